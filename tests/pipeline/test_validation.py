"""compile checks what it writes: a rewritten kernel that does not match the naive one in the emulator is
rolled back to the last version that does, with a note and a report entry; --no-validate skips the check."""
import json

import numpy as np
import subprocess
import sys

from pycparser import c_ast

from gpgpu_opt import pipeline
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.targets import get_target
from tests.conftest import INPUTS

MV = str(INPUTS / "mv.cu")


def _off_by_one(kernel, ctx):
    """A broken pass: every subscript of the written array reads one element further."""
    for node in list(walk(kernel.body)):
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID) and node.name.name == "A":
            node.subscript = c_ast.BinaryOp("+", node.subscript, c_ast.Constant("int", "1"))
    return kernel


def test_a_pass_that_changes_the_result_is_rolled_back(monkeypatch):
    registered = pipeline.registered_passes()
    monkeypatch.setattr(pipeline, "registered_passes", lambda: {**registered, "bad": _off_by_one})
    program = load_program(MV, diagnostics=Diagnostics(quiet=True))
    diagnostics = Diagnostics(quiet=True)
    result = pipeline.compile_program(program, get_target("sm_90"), ["restrict", "normalize", "coalesce", "bad"],
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
        proc = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", MV, "-o", str(tmp_path / "o.cu"),
                               "--report", str(report), *flags], capture_output=True, text=True)
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
    registered = pipeline.registered_passes()
    monkeypatch.setattr(pipeline, "registered_passes", lambda: {**registered, "edge": _drop_last_output})
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    good = pipeline.compile_program(program, get_target("g80"), ["restrict", "normalize", "coalesce"],
                                    Diagnostics(quiet=True), validate=True).kernels[0]
    assert good.validation.status == "passed" and "two corners" in good.validation.detail
    assert good.optimized.launch is not None  # the staged kernel, checked at its real size
    bad = pipeline.compile_program(program, get_target("g80"), ["restrict", "normalize", "coalesce", "edge"],
                                   Diagnostics(quiet=True), validate=True).kernels[0]
    assert bad.validation.status == "rolled back" and bad.validation.kept_after == "coalesce"


def test_a_sample_of_blocks_runs_only_those_blocks():
    from gpgpu_opt.emulator import run_kernel
    from gpgpu_opt.verify import blocks_covering

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
    proc = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", str(source), "-o",
                           str(tmp_path / "o.cu"), "--report", str(report)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads(report.read_text())["kernels"][0]
    assert "merge" in kernel["passes"] and kernel["validation"]["status"] == "passed"
    assert kernel["validation"]["threads"] == [2 * kernel["naive_block"][0], 1]


def test_the_check_runs_at_the_sizes_bind_fixed():
    """A kernel specialized with --bind n=4096 is only meant for n = 4096: the check emulates it there (at two
    corners, too large to run whole), not at ragged sizes where its float4 loads would read past the array."""
    jacobi = INPUTS.parent / "tests" / "programs" / "jacobi2d.cu"
    program = load_program(str(jacobi), diagnostics=Diagnostics(quiet=True))
    result = pipeline.compile_program(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                                      bindings={"n": 4096}, validate=True)
    kernel = result.kernels[0]
    assert kernel.validation.status == "passed", kernel.validation.detail
    assert kernel.validation.case.sizes == {"n": 4096} and "two corners" in kernel.validation.detail
    assert kernel.optimized.launch is not None and "4096" in pipeline.kernel_source(kernel.optimized.funcdef)
