"""The vectorize pass: the paper's pair rule (§3.1; .x the lower address, loads and stores), what it leaves
scalar and why (odd N, a store between, an unproven base alignment), `--vector-width`, the emulated
equivalence with the race check, and nvcc."""
from __future__ import annotations

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

HOST = """
void run(int n)
{{
    float *a, *b, *c;
    cudaMalloc(&a, 2 * n * sizeof(float));
    cudaMalloc(&b, 2 * n * sizeof(float));
    cudaMalloc(&c, 2 * n * sizeof(float));
    {kernel}<<<(n + 63) / 64, 64>>>({args});
}}
"""

SWAP = """
__global__ void swap_pairs(const float *a, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float lo = a[2 * i + 2];
        float hi = a[2 * i + 3];
        c[2 * i + 2] = hi;
        c[2 * i + 3] = lo - hi;
    }
}
"""

ODD = """
__global__ void odd(const float *a, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[2 * i] = a[2 * i + 1] + a[2 * i + 2];
    }
}
"""

STORE_BETWEEN = """
__global__ void between(float *a, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float lo = a[2 * i];
        a[2 * i + 1] = lo * 2.0f;
        float hi = a[2 * i + 1];
        c[2 * i] = lo + hi;
    }
}
"""


def compile_text(tmp_path: Path, source: str, target: str = "sm_90", passes: str | None = None,
                 vector_width: int | None = None):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, validate=True,
                           vector_width=vector_width)


def with_host(kernel_text: str, name: str, args: str) -> str:
    return kernel_text + HOST.format(kernel=name, args=args)


def only(result):
    (kernel,) = result.kernels
    return kernel


def decisions(kernel, action: str) -> list[str]:
    return [f"{d.subject}: {d.reason}" for d in kernel.context.log.decisions
            if d.pass_name == "vectorize" and d.action == action]


def assert_equivalent(kernel, sizes: dict, space: tuple[int, int]) -> None:
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, Case(sizes=sizes, global_space=space),
                      seed=3, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def assert_nvcc_compiles(result, tmp_path: Path) -> str:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / "vectorized.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null", f"-I{INPUTS}",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "0 bytes spill stores" in proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


# -- the pair rule ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_complex_mul_pairs_become_float2_with_x_the_lower_element(target, tmp_path):
    result = compile_with(load_program(str(INPUTS / "complex_mul.cu"), diagnostics=Diagnostics(quiet=True)),
                             get_target(target), parse_pass_list(None), Diagnostics(quiet=True), validate=True)
    k = result.kernels[0]
    text = kernel_source(k.optimized.funcdef)
    # CHECK: one float2 per array; .x holds a[2 * i] (the real part), .y a[2 * i + 1]
    assert "const float2 a2 = ((const float2 *) a)[i];" in text
    assert "const float2 b2 = ((const float2 *) b)[i];" in text
    assert "const float c_x = a2.x * b2.x - a2.y * b2.y;" in text
    assert "((float2 *) c)[i] = make_float2(c_x, a2.x * b2.y + a2.y * b2.x);" in text
    # CHECK-NOT: a scalar access left
    assert "a[" not in text and "b[" not in text and "c[" not in text
    assert len(decisions(k, "applied")) == 3
    assert k.validation.status == "passed"
    assert_equivalent(k, {"n": 45}, (45, 1))
    assert_nvcc_compiles(result, tmp_path)


def test_x_is_the_lower_address_for_loads_and_stores_with_an_even_offset(tmp_path):
    k = only(compile_text(tmp_path, with_host(SWAP, "swap_pairs", "a, c, n"), passes="vectorize"))
    text = kernel_source(k.optimized.funcdef)
    # CHECK: 2 * i + 2 halves to i + 1; lo is .x, the stored pair is (hi, lo - hi) in that order
    assert "const float2 a2 = ((const float2 *) a)[i + 1];" in text
    assert "((float2 *) c)[i + 1] = make_float2(hi, lo - hi);" in text
    assert "float lo = a2.x;" in text and "float hi = a2.y;" in text
    assert_equivalent(k, {"n": 37}, (37, 1))


def test_odd_offset_is_not_paired(tmp_path):
    k = only(compile_text(tmp_path, with_host(ODD, "odd", "a, c, n"), passes="vectorize"))
    assert decisions(k, "applied") == []
    assert "float2" not in kernel_source(k.optimized.funcdef)


def test_a_store_between_the_loads_keeps_them_scalar(tmp_path):
    k = only(compile_text(tmp_path, with_host(STORE_BETWEEN, "between", "a, c, n"), passes="vectorize"))
    text = kernel_source(k.optimized.funcdef)
    assert "float2" not in text
    assert any("a store between the pair's loads" in r for r in decisions(k, "skipped"))


def test_an_odd_offset_launch_is_not_vectorized(tmp_path):
    source = SWAP + HOST.format(kernel="swap_pairs", args="a + 1, c, n")
    k = only(compile_text(tmp_path, source, passes="vectorize"))
    text = kernel_source(k.optimized.funcdef)
    # CHECK: c (a buffer of its own) is paired; a, passed one float past its allocation, stays scalar
    assert "((float2 *) c)[i + 1]" in text and "a[2 * i + 2]" in text and "a2" not in text
    assert any("a is not known to be 8-byte aligned" in r for r in decisions(k, "skipped"))
    assert_equivalent(k, {"n": 37}, (37, 1))


def test_no_launch_in_the_file_keeps_the_scalar_accesses(tmp_path):
    k = only(compile_text(tmp_path, SWAP, passes="vectorize"))
    assert "float2" not in kernel_source(k.optimized.funcdef)
    assert any("not known to be 8-byte aligned" in r for r in decisions(k, "skipped"))


def test_an_even_offset_launch_is_vectorized(tmp_path):
    source = SWAP + HOST.format(kernel="swap_pairs", args="a + 4, c, n")
    k = only(compile_text(tmp_path, source, passes="vectorize"))
    assert "const float2 a2 = ((const float2 *) a)[i + 1];" in kernel_source(k.optimized.funcdef)


# -- widening (sector-served targets) ---------------------------------------------------------------------
ROWS = """
__global__ void saxpy_rows(const float *x, float *y, float a, int w, int h)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < w && row < h) {
        y[row * w + col] = a * x[row * w + col] + y[row * w + col];
    }
}

void run(const float *x, float *y, float a, int w, int h)
{
    saxpy_rows<<<dim3((w + 31) / 32, (h + 7) / 8), dim3(32, 8)>>>(x, y, a, w, h);
}
"""

PROVEN = """
#define W 1024
__global__ void scale_rows(const float *x, float *y, int h)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < W && row < h)
        y[row * W + col] = 2.0f * x[row * W + col];
}

void run(int h)
{
    float *x, *y;
    cudaMalloc(&x, W * h * sizeof(float));
    cudaMalloc(&y, W * h * sizeof(float));
    scale_rows<<<dim3(W / 32, (h + 7) / 8), dim3(32, 8)>>>(x, y, h);
}
"""


@pytest.mark.parametrize("w,h", [(37, 5), (64, 3), (5, 2)])
def test_widened_rows_with_a_ragged_width_are_equivalent(tmp_path, w, h):
    k = only(compile_text(tmp_path, ROWS))
    text = kernel_source(k.optimized.funcdef)
    # CHECK: 4 consecutive x per thread, float4 along x; the ragged edge and unaligned rows go scalar
    assert "int col = 4 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    assert "if (col + 3 < w && (((size_t) (x + row * w)) & 15) == 0" in text
    assert "const float4 x_val = ((const float4 *) (x + row * w))[col / 4];" in text
    assert "for (int k = 0; k < 4; k++)" in text and "if (col + k < w)" in text
    assert k.optimized.launch.outputs_per_block[0] == 4 * k.optimized.launch.block[0]
    assert_equivalent(k, {"w": w, "h": h, "a": 1.5}, (w, h))


def test_vector_width_1_turns_widening_off(tmp_path):
    k = only(compile_text(tmp_path, ROWS, vector_width=1))
    assert "float4" not in kernel_source(k.optimized.funcdef)


def test_vector_width_2_widens_by_float2(tmp_path):
    k = only(compile_text(tmp_path, ROWS, vector_width=2))
    assert "((const float2 *) (x + row * w))[col / 2]" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"w": 37, "h": 3, "a": 2.0}, (37, 3))


def test_proven_alignment_and_width_leave_no_scalar_tail(tmp_path):
    result = compile_text(tmp_path, PROVEN)
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "((float4 *) (y + row * 1024))[col / 4] = make_float4(" in text
    # CHECK-NOT: a run-time test or a scalar path (cudaMalloc buffers, a row pitch of 1024 = 4 * 256)
    assert "size_t" not in text and "for (" not in text
    assert_equivalent(k, {"h": 3}, (1024, 3))
    assert_nvcc_compiles(result, tmp_path)


def test_g80_is_not_widened(tmp_path):
    k = only(compile_text(tmp_path, ROWS, target="g80"))
    assert "float4" not in kernel_source(k.optimized.funcdef)


def test_vv_is_widened_then_merged_in_y(tmp_path):
    result = compile_with(load_program(str(INPUTS / "vv.cu"), diagnostics=Diagnostics(quiet=True)),
                             get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True), validate=True)
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "const float4 B_val = ((const float4 *) B)[idx / 4];" in text
    assert "float4 C_old[16];" in text and "A_val[r] = A[idy + 16 * r];" in text
    assert k.validation.status == "passed"
    assert_nvcc_compiles(result, tmp_path)


LOCAL_ACCUMULATOR = """
__global__ void accumulate(const float *a, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 1.0f;
        s += a[i];
        c[i] = s;
    }
}
"""


@pytest.mark.parametrize("n", [13, 32, 3])
def test_a_local_accumulator_is_declared_per_copy(tmp_path, n):
    """Found by the fuzzer: the declaration `float s = 1.0f` names no x, so it was hoisted out as x-invariant
    and kept once; the scalar path then added every copy's a[i + k] into one s (and the vector path took the
    float's .x). The declaration belongs with s: a float4 on the vector path, one s per copy on the scalar one."""
    path = tmp_path / "kernel.cu"
    path.write_text(with_host(LOCAL_ACCUMULATOR, "accumulate", "a, c, n"))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list("vectorize"), Diagnostics(quiet=True))
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "float4 s = make_float4(1.0f, 1.0f, 1.0f, 1.0f);" in text
    loop = text[text.index("for (int k = 0; k < 4; k++)"):]
    assert "float s = 1.0f;" in loop
    assert_equivalent(k, {"n": n}, (n, 1))
    assert_nvcc_compiles(result, tmp_path)


X_INVARIANT_INIT = """
__global__ void first_plus(const float *a, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = a[0 * i + 1];
        s += a[i];
        c[i] = s;
    }
}
"""


def test_a_local_initialised_from_one_element_for_all_threads_is_not_a_vector_load(tmp_path):
    """Found by the fuzzer: `a[0 * i + 1]` names i but reads one element for every thread; it was loaded as a
    float4 at a + 1 - i, out of bounds. Only the accesses that run along x one element per thread are vectors."""
    path = tmp_path / "kernel.cu"
    path.write_text(with_host(X_INVARIANT_INIT, "first_plus", "a, c, n"))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list("vectorize"), Diagnostics(quiet=True))
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "float4 s = make_float4(a[0 * i + 1], a[0 * (i + 1) + 1]," in text
    assert "- i))[i / 4]" not in text  # no vector load at a + 1 - i
    assert "((float4 *) c)[i / 4] = " in text
    assert_equivalent(k, {"n": 37}, (37, 1))
    assert_nvcc_compiles(result, tmp_path)
