"""compile checks what it writes: a rewritten kernel that does not match the naive one in the emulator is
rolled back to the last version that does, with a note and a report entry; --no-validate skips the check."""
import json

import numpy as np
import pytest

from pycparser import c_ast

from gpgpu_opt import pipeline
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.targets import get_target
from tests.cli_in_process import run_cli
from tests.conftest import INPUTS

MV = str(INPUTS / "mv.cu")


def _off_by_one(kernel, ctx):
    """A broken pass: every subscript of the written array reads one element further."""
    for node in list(walk(kernel.body)):
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID) and node.name.name == "A":
            node.subscript = c_ast.BinaryOp("+", node.subscript, c_ast.Constant("int", "1"))
    return kernel


def test_a_pass_that_changes_the_result_is_rolled_back(monkeypatch):
    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "bad": _off_by_one})
    program = load_program(MV, diagnostics=Diagnostics(quiet=True))
    diagnostics = Diagnostics(quiet=True)
    result = pipeline.compile_with(program, get_target("sm_90"), ["restrict", "normalize", "coalesce", "bad"],
                                      diagnostics, validate=True)
    kernel = result.kernels[0]
    assert kernel.validation.status == "rolled back" and kernel.validation.kept_after == "coalesce"
    assert "after bad:" in kernel.validation.detail
    assert kernel.optimized.launch is not None  # coalesce's version, which passes, is what is written
    assert any("the emulated check failed" in str(n) for n in diagnostics.notes)
    report = result.report()["kernels"][0]["validation"]
    assert report["status"] == "rolled back" and report["kept"] == "coalesce" and report["sizes"]


def test_compile_validates_by_default_and_no_validate_skips(tmp_path):
    for flags, expected in (([], "passed"), (["--no-validate"], None)):
        report = tmp_path / "r.json"
        proc = run_cli("compile", MV, "-o", tmp_path / "o.cu", "--report", report, *flags)
        assert proc.returncode == 0, proc.stderr
        validation = json.loads(report.read_text())["kernels"][0].get("validation")
        assert (validation or {}).get("status") == expected
        if expected:
            assert validation["sizes"] == {"rows": 37, "cols": 45}  # ragged: divides no tile


ROW_SUMS_FIXED = """
#define N 4096
#define K 2048
__global__ void row_sums(const float *__restrict__ a, float *__restrict__ out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += a[i * K + k];
        out[i] = sum;
    }
}
"""


def _drop_last_output(kernel, ctx):
    """A broken pass that only shows at the edge of the thread space: the guard loses the last thread."""
    for node in walk(kernel.body):
        if isinstance(node, c_ast.BinaryOp) and node.op == "<" and isinstance(node.right, c_ast.Constant) \
                and node.right.value == "4096":
            node.right = c_ast.Constant("int", "4095")
    return kernel


def test_sizes_too_large_to_emulate_are_checked_at_two_corners(tmp_path, monkeypatch):
    path = tmp_path / "rows.cu"
    path.write_text(ROW_SUMS_FIXED)
    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "edge": _drop_last_output})
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    good = pipeline.compile_with(program, get_target("g80"), ["restrict", "normalize", "coalesce"],
                                    Diagnostics(quiet=True), validate=True).kernels[0]
    assert good.validation.status == "passed" and "two corners" in good.validation.detail
    assert good.optimized.launch is not None  # the staged kernel, checked at its real size
    bad = pipeline.compile_with(program, get_target("g80"), ["restrict", "normalize", "coalesce", "edge"],
                                   Diagnostics(quiet=True), validate=True).kernels[0]
    assert bad.validation.status == "rolled back" and bad.validation.kept_after == "coalesce"


def test_a_sample_of_blocks_runs_only_those_blocks():
    from gpgpu_opt.emulator import run_kernel
    from gpgpu_opt.check.cases import blocks_covering

    program_text = "__global__ void mark(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }"
    func = c_parser_parse(program_text)
    x = np.zeros(64, np.float32)
    stats = run_kernel(func, (8,), (8,), {"x": x}, blocks=blocks_covering([((0, 8), (0, 1)), ((56, 64), (0, 1))],
                                                                         (8, 1), (8, 1)))
    assert stats.blocks == 2 and x[:8].all() and x[56:].all() and not x[8:56].any()


def c_parser_parse(text):
    from gpgpu_opt.frontend.cuda_c import cuda_to_c, parse_c

    return parse_c(cuda_to_c(text)[0], "<test>").ext[-1]


def test_an_unguarded_kernel_of_unknown_size_is_checked_on_whole_naive_blocks(tmp_path):
    """tmv (no guard, no launch in the file, no stated thread space) only works for launches of whole blocks:
    two naive blocks."""
    report = tmp_path / "r.json"
    source = tmp_path / "tmv.cu"
    source.write_text((INPUTS / "tmv.cu").read_text().replace("#define globalDimX WIDTH_A\n", ""))
    proc = run_cli("compile", source, "-o", tmp_path / "o.cu", "--report", report)
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads(report.read_text())["kernels"][0]
    assert "merge" in kernel["passes"] and kernel["validation"]["status"] == "passed"
    assert kernel["validation"]["threads"] == [2 * kernel["naive_block"][0], 1]


def test_the_check_runs_at_the_sizes_bind_fixed():
    """A kernel specialized with --bind n=4096 is only meant for n = 4096: the check emulates it there (at two
    corners, too large to run whole), not at ragged sizes where its float4 loads would read past the array."""
    jacobi = INPUTS.parent / "tests" / "programs" / "jacobi2d.cu"
    program = load_program(str(jacobi), diagnostics=Diagnostics(quiet=True))
    result = pipeline.compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                                      bindings={"n": 4096}, validate=True)
    kernel = result.kernels[0]
    assert kernel.validation.status == "passed", kernel.validation.detail
    assert kernel.validation.case.sizes == {"n": 4096} and "two corners" in kernel.validation.detail
    assert kernel.optimized.launch is not None and "4096" in pipeline.kernel_source(kernel.optimized.funcdef)


# -- a check that cannot run ----------------------------------------------------------------------------------
ROW_SUMS_HUGE = ROW_SUMS_FIXED.replace("#define K 2048", "#define K 65536").replace(
    "const float *__restrict__ a, float *__restrict__ out", "const float *a, float *out")


def _compile_huge(tmp_path, pass_names, monkeypatch=None, extra=None, strict=None):
    path = tmp_path / "huge.cu"
    path.write_text(ROW_SUMS_HUGE)
    if extra:
        registered = pipeline.registry.registered_passes()
        monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, **extra})
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = pipeline.compile_with(program, get_target("g80"), pass_names, diagnostics, validate=True,
                                      assume_restrict=True, strict=strict)
    return result, diagnostics


def test_a_transformed_kernel_the_check_cannot_run_on_is_not_written_transformed(tmp_path):
    """65536 iterations per thread even at two corners: too much to emulate. coalesce's staging rests on the
    check, so the kernel is written as it was before it (restrict's qualifiers, proved by the alias facts)."""
    result, diagnostics = _compile_huge(tmp_path, ["restrict", "normalize", "coalesce"])
    kernel = result.kernels[0]
    assert kernel.passes_run[-1] == "coalesce"  # the pass did transform it
    assert kernel.validation.status == "rolled back" and not kernel.validation.emulated
    # normalize leaves this kernel as restrict wrote it: its version is the newest whose changes are proved
    assert kernel.validation.kept_after == "normalize" and kernel.optimized.launch is None
    assert "too large to emulate" in kernel.validation.detail and "coalesce" in kernel.validation.detail
    assert "__shared__" not in result.output and "__restrict__" in result.output
    assert any("not written as transformed" in str(n) for n in diagnostics.notes)
    report = result.report()["kernels"][0]["validation"]
    assert report["status"] == "rolled back" and report["emulated"] is False and report["kept"] == "normalize"


def _claims_a_change(kernel, ctx):
    """A pass that logs a transformation but leaves the kernel as it was."""
    ctx.log.applied("kernel", "nothing, in fact")
    return kernel


def test_an_unchecked_kernel_changed_only_by_proved_passes_is_kept(tmp_path, monkeypatch):
    result, diagnostics = _compile_huge(tmp_path, ["restrict", "normalize", "idle"], monkeypatch,
                                        {"idle": _claims_a_change})
    kernel = result.kernels[0]
    assert kernel.validation.status == "not checked" and kernel.validation.proved_by == ("restrict",)
    assert kernel.validation.kept_after == "idle" and "too large to emulate" in kernel.validation.detail
    assert "__restrict__" in result.output
    report = result.report()["kernels"][0]["validation"]
    assert report["proved_by"] == ["restrict"] and report["emulated"] is False and report["kept"] == "idle"
    assert any("proved without emulation (restrict)" in str(n) for n in diagnostics.notes)


def test_no_validate_writes_the_unchecked_kernel_as_before(tmp_path):
    path = tmp_path / "huge.cu"
    path.write_text(ROW_SUMS_HUGE)
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = pipeline.compile_with(program, get_target("g80"), ["restrict", "normalize", "coalesce"],
                                      Diagnostics(quiet=True), validate=False)
    assert result.kernels[0].validation is None and result.kernels[0].optimized.launch is not None


def _emulator_bug(*args, **kwargs):
    raise TypeError("an emulator bug")


def test_an_emulator_failure_rolls_back_or_fails_in_strict_mode(monkeypatch):
    from gpgpu_opt.check import validate

    monkeypatch.setattr(validate, "run_case", _emulator_bug)
    program = load_program(MV, diagnostics=Diagnostics(quiet=True))
    passes = ["restrict", "normalize", "coalesce"]
    result = pipeline.compile_with(program, get_target("sm_90"), passes, Diagnostics(quiet=True), validate=True,
                                      strict=False)
    kernel = result.kernels[0]
    assert kernel.validation.status == "rolled back" and not kernel.validation.emulated
    assert "the emulator failed: TypeError: an emulator bug" in kernel.validation.detail
    assert kernel.optimized.launch is None
    with pytest.raises(pipeline.InternalError, match="an emulator bug"):
        pipeline.compile_with(program, get_target("sm_90"), passes, Diagnostics(quiet=True), validate=True,
                                 strict=True)


NAIVE_RACES = """
__global__ void copy_flag(const float *a, float *out, float *flag, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 2.0f * a[i];
        flag[0] = a[i];
    }
}
"""


def test_a_naive_kernel_the_emulator_cannot_run_keeps_only_proved_changes(tmp_path):
    """The naive kernel races in the emulator (every thread stores flag[0]): no version can be compared, so
    what normalize and vectorize did is dropped (restrict, which the alias facts decide, is the newest version
    whose changes are proved; it changed nothing here: no launch in the file)."""
    path = tmp_path / "flag.cu"
    path.write_text(NAIVE_RACES)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    # (a width asked for: a kernel the file does not launch is not widened by size, launch_dispatch.py)
    result = pipeline.compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics,
                                      validate=True, vector_width=4)
    kernel = result.kernels[0]
    assert "vectorize" in kernel.passes_run
    assert kernel.validation.status == "rolled back" and not kernel.validation.emulated
    assert "the naive kernel races" in kernel.validation.detail and kernel.validation.kept_after == "restrict"
    assert "float4" not in result.output and "out[i] = 2.0f * a[i];" in result.output
