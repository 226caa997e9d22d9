"""16-byte loads of transposed tiles (coalesce's `vector_rows`): the float4 shape, the one
block-uniform test (alignment, tile inside the matrix) with today's scalar loads as the other branch, the
alignment proved from cudaMalloc'd launches and bindings, `--vector-width 1`, targets that prefer narrower
accesses, emulated equivalence with the race check at sizes that do not divide the tile (cols % 4 == 0 and
!= 0), and nvcc without spills."""
from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"

LAUNCHED = """
__global__ void transpose(const float *in, float *out, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < rows && y < cols)
        out[y * rows + x] = in[x * cols + y];
}

void run(int rows, int cols)
{
    float *in, *out;
    cudaMalloc(&in, rows * cols * sizeof(float));
    cudaMalloc(&out, rows * cols * sizeof(float));
    transpose<<<dim3((rows + 15) / 16, (cols + 15) / 16), dim3(16, 16)>>>(%s, out, rows, cols);
}
"""

DOUBLES = """
__global__ void transpose_d(const double *in, double *out, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < rows && y < cols)
        out[y * rows + x] = in[x * cols + y];
}
"""

SIZES = [(70, 45), (64, 32), (5, 3), (130, 64), (130, 128), (64, 44)]


def compile_path(path: Path, target: str = "sm_90", vector_width: int | None = None, bindings=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target(target), parse_pass_list(None), diagnostics, bindings or {},
                             validate=True, vector_width=vector_width)
    (kernel,) = result.kernels
    return result, kernel


def compile_text(tmp_path: Path, source: str, **kw):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return compile_path(path, **kw)


def staged_reason(kernel) -> str:
    return next(d.reason for d in kernel.context.log.decisions if d.pass_name == "coalesce" and d.action == "applied"
                and d.subject.startswith("in["))


def assert_equivalent(kernel, rows: int, cols: int) -> None:
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block,
                      Case(sizes={"rows": rows, "cols": cols}, global_space=(rows, cols)), seed=5,
                      device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def nvcc_resources(output: str, tmp_path: Path) -> str:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    src = tmp_path / "out.cu"
    src.write_text(output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null", str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    log = proc.stdout + proc.stderr
    assert "0 bytes spill stores" in log and "0 bytes spill loads" in log, log
    return log


@pytest.fixture(scope="module")
def transpose():
    return compile_path(INPUTS / "transpose.cu")


def test_float4_rows_under_one_uniform_test_with_the_scalar_loads_as_the_other_branch(transpose, tmp_path):
    result, k = transpose
    text = kernel_source(k.optimized.funcdef)
    # CHECK: one test per block: rows start 16-byte aligned, the block's tile inside the matrix
    assert "if (cols % 4 == 0 && (((size_t) in) & 15) == 0 && blockIdx.x * 64 + 63 < rows " \
           "&& blockIdx.y * 64 + 63 < cols) {" in text
    # CHECK: 16 threads per row of 64, 4 consecutive elements each: 2 passes of 32 rows
    assert "const int vrow = tid / 16;" in text and "const int vcol = tid % 16 * 4;" in text
    assert re.search(r"for \(int rr = 0; rr < 64; rr \+= 32\) \{\s+const float4 v = \*\(\(const float4 \*\) "
                     r"\(&in\[\(blockIdx.x \* 64 \+ rr \+ vrow\) \* cols \+ blockIdx.y \* 64 \+ vcol\]\)\);", text)
    # CHECK: the components go into the padded tile as scalars
    assert "__shared__ float tile_in[64][65];" in text
    for c, comp in enumerate("xyzw"):
        assert f"tile_in[rr + vrow][vcol{' + %d' % c if c else ''}] = v.{comp};" in text
    # CHECK: the other branch is the scalar, predicated load; one barrier, after both
    assert re.search(r"\} else \{\s+#pragma unroll\s+for \(int rr = 0; rr < 64; rr \+= 8\)\s+"
                     r"tile_in\[rr \+ threadIdx.y\]\[threadIdx.x\] = \(blockIdx.x \* 64 \+ rr \+ threadIdx.y < rows "
                     r"&& blockIdx.y \* 64 \+ threadIdx.x < cols\) \? ", text)
    assert text.count("__syncthreads();") == 1
    assert re.search(r"\}\s+__syncthreads\(\);", text)
    # CHECK: the report says the loads are 16 bytes and why
    reason = staged_reason(k)
    assert "4 consecutive elements of a row as one 16-byte load, tested at run time, per block (cols % 4 == 0 " \
           "and ((size_t) in & 15) == 0" in reason
    assert k.validation.status == "passed"
    log = nvcc_resources(result.output, tmp_path)
    assert "used 1 barriers" in log


@pytest.mark.parametrize("rows,cols", SIZES)
def test_equivalent_with_the_race_check_at_ragged_sizes(transpose, rows, cols):
    """cols % 4 == 0 (the vector branch for the blocks inside the matrix) and != 0 (the scalar branch)."""
    _, k = transpose
    assert_equivalent(k, rows, cols)


def test_vector_width_one_keeps_the_scalar_loads(tmp_path):
    result, k = compile_path(INPUTS / "transpose.cu", vector_width=1)
    text = kernel_source(k.optimized.funcdef)
    # CHECK-NOT: vectors, run-time tests
    assert "float4" not in text and "size_t" not in text and "16-byte" not in staged_reason(k)
    assert re.search(r"#pragma unroll\s+for \(int rr = 0; rr < 64; rr \+= 8\)\s+"
                     r"tile_in\[rr \+ threadIdx.y\]\[threadIdx.x\] = ", text)
    golden = (ROOT / "golden" / "sm_90" / "transpose.cu").read_text()
    assert "float4" in golden
    assert_equivalent(k, 70, 45)


def test_alignment_proved_from_cudamalloc_and_bindings(tmp_path):
    """A launch of cudaMalloc'd buffers proves the base; `cols` bound to a multiple of 4 proves the rows:
    only the block's tile being inside the matrix is tested."""
    _, k = compile_text(tmp_path, LAUNCHED % "in", bindings={"cols": 96})
    text = kernel_source(k.optimized.funcdef)
    assert "if (blockIdx.x * 64 + 63 < rows && blockIdx.y * 64 + 63 < 96) {" in text or \
        "if (blockIdx.x * 64 + 63 < rows && blockIdx.y * 64 + 63 < cols) {" in text, text
    assert "size_t" not in text and "% 4" not in text
    reason = staged_reason(k)
    assert "proved: cols = 96, 'in' is a cudaMalloc'd buffer at every launch" in reason
    assert_equivalent(k, 70, 96)


def test_an_offset_base_is_tested_at_run_time(tmp_path):
    """`in + 1` is only 4-byte aligned: the address is tested (and the rows' width)."""
    _, k = compile_text(tmp_path, LAUNCHED % "in + 1")
    text = kernel_source(k.optimized.funcdef)
    assert "if (cols % 4 == 0 && (((size_t) in) & 15) == 0 && " in text
    assert_equivalent(k, 70, 44)


def test_doubles_load_two_per_thread_as_double2(tmp_path):
    result, k = compile_text(tmp_path, DOUBLES)
    text = kernel_source(k.optimized.funcdef)
    assert "const double2 v = *((const double2 *) (&in[" in text
    assert "(((size_t) in) & 15) == 0" in text
    for rows, cols in ((70, 45), (130, 64)):
        assert_equivalent(k, rows, cols)
    nvcc_resources(result.output, tmp_path)


def test_targets_that_prefer_narrower_accesses_keep_scalar_loads():
    _, k = compile_path(INPUTS / "transpose.cu", target="g80")
    assert "float4" not in kernel_source(k.optimized.funcdef)
