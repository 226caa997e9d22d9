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
    monkeypatch.setattr(pipeline, "registered_passes", lambda: {"normalize": normalize.run, "bad": bad_pass})
    diags = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / "mv.cu"), diagnostics=diags)
    result = pipeline.compile_program(program, get_target("sm_90"), ["normalize", "bad"], diags)
    assert result.kernels[0].passes_run == ["normalize"]
    assert any(expected in str(n) and "rolled back" in str(n) for n in diags.notes)
    assert "__syncthreads" not in result.output


def test_self_check_rolls_back_a_pass_that_changes_the_result(monkeypatch):
    pytest.importorskip("gpgpu_opt.emulator")
    monkeypatch.setattr(pipeline, "registered_passes", lambda: {"normalize": normalize.run, "bad": _wrong_result})
    diags = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / "mm.cu"), diagnostics=diags)
    result = pipeline.compile_program(program, get_target("sm_90"), ["normalize", "bad"], diags, self_check=True)
    assert result.kernels[0].passes_run == ["normalize"]
    assert any("self-check failed" in str(n) for n in diags.notes)
    unchecked = pipeline.compile_program(program, get_target("sm_90"), ["normalize", "bad"],
                                         Diagnostics(quiet=True))
    assert unchecked.kernels[0].passes_run == ["normalize", "bad"]  # only the emulation sees this one
