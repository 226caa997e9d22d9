"""A pass that crashes or breaks the kernel is rolled back with a note; the output stays correct."""
import pytest
from pycparser import c_ast

from gpgpu_opt import pipeline
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import normalize
from gpgpu_opt.targets import get_target
from tests.conftest import INPUTS


def _crashing_pass(kernel, ctx):
    raise RuntimeError("boom")


def _barrier_under_if(kernel, ctx):
    sync = c_ast.FuncCall(c_ast.ID("__syncthreads"), None)
    cond = c_ast.BinaryOp("<", c_ast.StructRef(c_ast.ID("threadIdx"), ".", c_ast.ID("x")), c_ast.Constant("int", "4"))
    kernel.body.block_items.append(c_ast.If(cond, sync, None))
    return kernel


def _doubled_barrier(kernel, ctx):
    kernel.body.block_items += [c_ast.FuncCall(c_ast.ID("__syncthreads"), None),
                                c_ast.FuncCall(c_ast.ID("__syncthreads"), None)]
    return kernel


def _wrong_result(kernel, ctx):
    for node in walk(kernel.body):
        if isinstance(node, c_ast.Decl) and node.name == "sum":
            node.init = c_ast.Constant("float", "1.0f")
    return kernel


@pytest.mark.parametrize("bad_pass, expected", [
    (_crashing_pass, "internal error"),
    (_barrier_under_if, "thread-dependent control flow"),
    (_doubled_barrier, "two __syncthreads() in a row"),
])
def test_broken_pass_is_rolled_back_with_a_note(monkeypatch, bad_pass, expected):
    pytest.importorskip("gpgpu_opt.emulator")
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {"normalize": normalize.run, "bad": bad_pass})
    diags = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / "mv.cu"), diagnostics=diags)
    result = pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"], diags, strict=False)
    assert result.kernels[0].passes_run == ["normalize"]
    assert any(expected in str(n) and "rolled back" in str(n) for n in diags.notes)
    assert "__syncthreads" not in result.output


def test_strict_mode_raises_a_pass_bug_with_the_pass_and_kernel(monkeypatch):
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {"normalize": normalize.run, "bad": _crashing_pass})
    program = load_program(str(INPUTS / "mv.cu"), diagnostics=Diagnostics(quiet=True))
    with pytest.raises(pipeline.InternalError) as raised:
        pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"], Diagnostics(quiet=True),
                                 strict=True)
    err = raised.value
    assert err.pass_name == "bad" and err.kernel_name == "mv" and isinstance(err.cause, RuntimeError)
    assert str(err).startswith(f"{INPUTS / 'mv.cu'}:") and "error: internal error in pass bad" in str(err)
    assert "RuntimeError: boom" in str(err)


def test_strict_mode_still_rolls_back_what_a_pass_refuses(monkeypatch):
    """A SanityError (the pass's own "cannot do this", or a kernel the sanity checks reject) is not a bug."""
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {"normalize": normalize.run, "bad": _doubled_barrier})
    diags = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / "mv.cu"), diagnostics=diags)
    result = pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"], diags, strict=True)
    assert result.kernels[0].passes_run == ["normalize"]
    assert any("rolled back" in str(n) for n in diags.notes)


def test_strict_is_the_default_where_the_environment_asks(monkeypatch):
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {"normalize": normalize.run, "bad": _crashing_pass})
    program = load_program(str(INPUTS / "mv.cu"), diagnostics=Diagnostics(quiet=True))
    monkeypatch.setenv("GPGPU_OPT_STRICT", "1")
    with pytest.raises(pipeline.InternalError):
        pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"], Diagnostics(quiet=True))
    monkeypatch.setenv("GPGPU_OPT_STRICT", "0")
    result = pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"], Diagnostics(quiet=True))
    assert result.kernels[0].passes_run == ["normalize"]


@pytest.mark.parametrize("traceback_env, strict_flag", [("", True), ("1", False)])
def test_cli_strict_prints_a_compiler_error_and_exits_3(monkeypatch, tmp_path, capsys, traceback_env, strict_flag):
    """`compile --strict` (or GPGPU_OPT_STRICT=1, which the test suite sets): no rollback, no output file, a
    `file:line:col: error: internal error in pass X` line; the traceback only with GPGPU_OPT_TRACEBACK=1."""
    import sys

    from gpgpu_opt import cli

    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "coalesce": _crashing_pass})
    monkeypatch.setenv("GPGPU_OPT_STRICT", "1" if not strict_flag else "0")
    monkeypatch.setenv("GPGPU_OPT_TRACEBACK", traceback_env)
    out = tmp_path / "o.cu"
    argv = ["gpgpu-opt", "compile", str(INPUTS / "mv.cu"), "-o", str(out), "--passes", "coalesce", "--no-tuned"]
    monkeypatch.setattr(sys, "argv", argv + (["--strict"] if strict_flag else []))
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 3 and not out.exists()
    err = capsys.readouterr().err
    assert f"{INPUTS / 'mv.cu'}:" in err and "error: internal error in pass coalesce on kernel 'mv'" in err
    assert ("Traceback" in err) == bool(traceback_env)


def test_self_check_rolls_back_a_pass_that_changes_the_result(monkeypatch):
    pytest.importorskip("gpgpu_opt.emulator")
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {"normalize": normalize.run, "bad": _wrong_result})
    diags = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / "mm.cu"), diagnostics=diags)
    result = pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"], diags, self_check=True)
    assert result.kernels[0].passes_run == ["normalize"]
    assert any("self-check failed" in str(n) for n in diags.notes)
    unchecked = pipeline.compile_with(program, get_target("sm_90"), ["normalize", "bad"],
                                         Diagnostics(quiet=True))
    assert unchecked.kernels[0].passes_run == ["normalize", "bad"]  # only the emulation sees this one
