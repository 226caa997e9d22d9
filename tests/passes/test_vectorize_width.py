"""The vectorize pass, wider: the vector width by element size (16 bytes: float4, double2; `__half` beside
a float has `__half2`: halves alone, test_widen_half8.py), loops with a constant trip count in an elementwise body, and a note for every kernel it does
not widen. Each rewrite is emulated against the naive kernel at sizes no vector width divides (ragged
tails), with the race check, and built with nvcc."""
from __future__ import annotations


import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

DOUBLE_STEP = """
#define RK 3
__global__ void time_step(int j, int n, const double *old_v, double *v, const double *factors, const double *flux)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        double factor = factors[i] / double(RK + 1 - j);
        v[i + 2 * n] = old_v[i + 2 * n] + factor * flux[i + 2 * n];
    }
}

void step(int j, int n)
{
    double *old_v, *v, *factors, *flux;
    cudaMalloc(&old_v, 4 * n * sizeof(double));
    cudaMalloc(&v, 4 * n * sizeof(double));
    cudaMalloc(&factors, n * sizeof(double));
    cudaMalloc(&flux, 4 * n * sizeof(double));
    time_step<<<(n + 127) / 128, 128>>>(j, n, old_v, v, factors, flux);
}
"""

HALF_AXPY = """
#include <cuda_fp16.h>
__global__ void haxpy(int n, __half alpha, const __half *x, __half *y, float *r)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __hadd(__hmul(alpha, x[i]), y[i]);
        r[i] = __half2float(x[i]);
    }
}

void run(int n, const __half *x, __half *y, float *r)
{
    haxpy<<<(n + 255) / 256, 256>>>(n, __float2half(0.5f), x, y, r);
}
"""


@pytest.fixture(scope="module")
def double_step(tmp_path_factory):
    return compile_source(tmp_path_factory, "double_step", DOUBLE_STEP)


@pytest.fixture(scope="module")
def half_axpy(tmp_path_factory):
    return compile_source(tmp_path_factory, "half_axpy", HALF_AXPY)


# -- the width by element size ------------------------------------------------------------------------------
def test_doubles_are_widened_by_double2(double_step, tmp_path_factory):
    """Before: widen asked for a 4-element vector of double, which does not exist, and wrote that
    factors[i] was 'not one element per thread along x'. 16 bytes hold two doubles."""
    (k,) = double_step.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int i = 2 * (blockDim.x * blockIdx.x + threadIdx.x);" in text
    assert "double2 factor = make_double2(factors_val.x / ((double) (4 - j)), " in text
    assert "((double2 *) (v + 2 * n))[i / 2] = make_double2(" in text
    assert "double4" not in text
    assert any("(double2)" in n for n in vectorize_notes(k, "applied"))
    assert k.validation.status == "passed"
    for n in (37, 5, 64):
        assert_equivalent(k, {"n": n, "j": 1}, (n, 1), seed=5)
    assert_builds(double_step, tmp_path_factory)


def test_halves_are_widened_by_half2_with_exact_half_arithmetic(half_axpy, tmp_path_factory):
    """Before: "'x_val' depends on x and is not a scalar of a vector type's element". With the float output
    beside them, the vector of `__half` every element type has is `__half2`: two halves a thread (and float2 for the float output), each lane
    computed by the same half intrinsics, so the emulator's half rounding is the naive kernel's."""
    (k,) = half_axpy.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    assert "const __half2 x_val = ((const __half2 *) x)[i / 2];" in text
    assert "((__half2 *) y)[i / 2] = __halves2half2(__hadd(__hmul(alpha, x_val.x), y_val.x), " \
           "__hadd(__hmul(alpha, x_val.y), y_val.y));" in text
    assert "((float2 *) r)[i / 2] = make_float2(" in text
    assert k.validation.status == "passed"
    for n in (37, 3, 64):
        assert_equivalent(k, {"n": n, "alpha": 0.75}, (n, 1), seed=5)
    assert_builds(half_axpy, tmp_path_factory)


# -- loops with a constant trip count -----------------------------------------------------------------------
INIT_VARIABLES = """
#define NDIM 3
#define VAR_MOMENTUM 1
#define NVAR (VAR_MOMENTUM + NDIM + 1)
__constant__ float ff_variable[NVAR];

__global__ void initialize_variables(int nelr, float *variables)
{
    const int i = (blockDim.x * blockIdx.x + threadIdx.x);
    for (int j = 0; j < NVAR; j++)
        variables[i + j * nelr] = ff_variable[j];
}

void init(int nelr)
{
    float *variables;
    cudaMalloc(&variables, nelr * NVAR * sizeof(float));
    initialize_variables<<<nelr / 128, 128>>>(nelr, variables);
}
"""

SUM_ROWS = """
__global__ void sum_rows(int n, int m, const double *a, double *s, double *t)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double acc = 0.0;
        for (int j = 0; j < 3; j++) {
            double v = a[i + j * n];
            acc += v * v;
        }
        s[i] = acc;
        for (int j = 1; j < m; j++)
            t[i] = t[i] + 1.0;
    }
}
"""

#: Launched with a run-time size: widened for launches that fill the GPU, the naive kernel kept for smaller ones
#: (launch_dispatch.py); a file that does not launch it could not choose, and it would not be widened.
ROWS_SUM = SUM_ROWS.replace("        for (int j = 1; j < m; j++)\n            t[i] = t[i] + 1.0;\n", "") + """
void run(int n, const double *a, double *s, double *t)
{
    sum_rows<<<(n + 255) / 256, 256>>>(n, 3, a, s, t);
}
"""


@pytest.fixture(scope="module")
def init_variables(tmp_path_factory):
    # not validated in the pipeline: the check's sizes (nelr = 37) start no block of `nelr / 128` blocks
    # (choosing the sizes from the launch is another piece of work); emulated below at sizes that do
    return compile_source(tmp_path_factory, "init_variables", INIT_VARIABLES, validate=False)


@pytest.fixture(scope="module")
def rows_sum(tmp_path_factory):
    return compile_source(tmp_path_factory, "rows_sum", ROWS_SUM)


def test_a_constant_trip_loop_stays_and_its_stores_along_x_become_vectors(init_variables, tmp_path_factory):
    """Before: "a For statement" stopped widen, and no note said so. The loop stays; each iteration's store
    along x is one float4; the rows start aligned at every iteration when nelr is a multiple of 4, tested
    at run time (else the scalar path)."""
    (k,) = init_variables.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "const int i = 4 * (blockDim.x * blockIdx.x + threadIdx.x);" in text
    assert "if (nelr % 4 == 0) {" in text
    assert "((float4 *) (variables + j * nelr))[i / 4] = make_float4(ff_variable[j], ff_variable[j], " in text
    assert k.optimized.launch.block == (32, 1)
    for nelr in (256, 130, 388):   # 130: rows that do not start aligned, the scalar path
        assert_equivalent(k, {"nelr": nelr}, (nelr // 128 * 128, 1), seed=5)    # the launch's threads
    assert_builds(init_variables, tmp_path_factory)


def test_a_loop_accumulating_loads_along_x_is_widened_by_double2(rows_sum, tmp_path_factory):
    (k,) = rows_sum.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "double2 acc = make_double2(0.0, 0.0);" in text
    assert "double2 v = ((const double2 *) (a + j * n))[i / 2];" in text
    assert "if (i + 1 < n && n % 2 == 0 && " in text
    assert k.validation.status == "passed"
    for n in (37, 5, 64):
        assert_equivalent(k, {"n": n, "m": 2}, (n, 1), seed=5)
    assert_builds(rows_sum, tmp_path_factory)


def test_a_loop_of_a_run_time_trip_count_every_lane_shares_is_widened(tmp_path_factory):
    """Before: "the loop at line 12 has no constant trip count". Its header reads no x, so the lanes run the
    same iterations: widened at a width asked for; without one, only the size rule says no (the file does
    not launch it)."""
    (k,) = compile_source(tmp_path_factory, "sum_rows", SUM_ROWS, vector_width=2).kernels
    text = kernel_source(k.optimized.funcdef)
    assert "for (int j = 1; j < m; j++)" in text and "((double2 *) t)[i / 2] = " in text
    assert k.validation.status == "passed"
    for n, m in ((37, 3), (6, 0), (64, 5)):
        assert_equivalent(k, {"n": n, "m": m}, (n, 1), seed=5)
    (k,) = compile_source(tmp_path_factory, "sum_rows_unasked", SUM_ROWS).kernels
    assert "double2" not in kernel_source(k.optimized.funcdef)
    assert any("not widened: widened by 2, the launch would have 2x fewer threads" in n
               for n in vectorize_notes(k, "skipped"))


def test_a_loop_whose_trip_count_depends_on_x_is_not_widened_with_a_note(tmp_path_factory):
    source = SUM_ROWS.replace("for (int j = 1; j < m; j++)", "for (int j = 1; j < m + i % 3; j++)")
    (k,) = compile_source(tmp_path_factory, "sum_rows_x", source, vector_width=2).kernels
    assert "double2" not in kernel_source(k.optimized.funcdef)
    assert any("not widened: the loop at line 12 depends on x in its header" in n
               for n in vectorize_notes(k, "skipped")), vectorize_notes(k, "skipped")


# -- every refusal is a note --------------------------------------------------------------------------------
NOT_WIDENED = {
    "srad_index": ("""
#define NUMBER_THREADS 512
__global__ void extract(long d_Ne, float *d_I)
{
    int bx = blockIdx.x;
    int tx = threadIdx.x;
    int ei = (bx * NUMBER_THREADS) + tx;
    if (ei < d_Ne)
        d_I[ei] = exp(d_I[ei] / 255);
}
""", "not widened: 'ei' is 512*blockIdx.x + threadIdx.x, not the global x index blockIdx.x * blockDim.x + "
     "threadIdx.x that widening starts from"),
    "while_loop": ("""
__global__ void halve_down(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i];
        while (v > 1.0f)
            v = v * 0.5f;
        b[i] = v;
    }
}
""", "not widened: a 'while' loop at line 7 (only declarations, assignments, 'if's and 'for' "
     "loops are widened)"),
    "misaligned_stride": ("""
__global__ void odd_rows(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        for (int j = 0; j < 4; j++)
            b[i + 3 * j] = a[i] * 2.0f;
    }
}
""", "not widened: b[i + 3 * j]: a loop iteration moves it by 3 elements, so its 4-element vectors are never "
     "aligned"),
    "broadcast_in_loop": ("""
#define H 64
__global__ void tmv(const float *A, const float *B, float *C, int w)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    for (int i = 0; i < H; i++)
        sum += A[i * w + idx] * B[i];
    C[idx] = sum;
}
""", "not widened: B[i] in the loop at line 7 is the same element for every thread in x: reuse left to the later "
     "passes"),
    "rows_in_loop": ("""
__global__ void column_sum(const float *in, float *out, int w)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    float s = 0.0f;
    for (int j = 0; j < 3; j++)
        s += in[(y + j) * w + x];
    out[y * w + x] = s;
}
""", "not widened: in[(y + j) * w + x] in the loop at line 7 moves with both the loop and y: threads in y read it "
     "again, reuse left to the later passes"),
}


@pytest.mark.parametrize("name", sorted(NOT_WIDENED))
def test_a_kernel_not_widened_says_why(name, tmp_path_factory):
    """Before: srad's index and a nested `if` (widened now, test_widen_lanes.py) raised NotWidenable, which
    was dropped with no note (the corpus run listed such kernels as 'no pass applied (no note)')."""
    source, why = NOT_WIDENED[name]
    (k,) = compile_source(tmp_path_factory, name, source, validate=False).kernels
    assert "4 *" not in kernel_source(k.optimized.funcdef)
    assert f"kernel: {why}" in vectorize_notes(k, "skipped")


HALF_PAIRS = """
#include <cuda_fp16.h>
__global__ void swap_pairs(const __half *a, __half *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __half lo = a[2 * i];
        __half hi = a[2 * i + 1];
        c[2 * i] = hi;
        c[2 * i + 1] = lo;
    }
}

void run(int n)
{
    __half *a, *c;
    cudaMalloc(&a, 2 * n * sizeof(__half));
    cudaMalloc(&c, 2 * n * sizeof(__half));
    swap_pairs<<<(n + 63) / 64, 64>>>(a, c, n);
}
"""


def test_half_pairs_are_one_half2_access(tmp_path_factory):
    """The paper's pair rule on `__half` (before: "no two-element vector of __half"): loads and stores of
    two adjacent halves are one `__half2`, built by `__halves2half2`, `.x` the lower address."""
    result = compile_source(tmp_path_factory, "half_pairs", HALF_PAIRS)
    (k,) = result.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "const __half2 a2 = ((const __half2 *) a)[i];" in text
    assert "((__half2 *) c)[i] = __halves2half2(hi, lo);" in text
    assert k.validation.status == "passed"
    assert_equivalent(k, {"n": 37}, (37, 1), seed=5)
    assert_builds(result, tmp_path_factory)
