"""Tests of the CPU emulator (gpgpu_opt.emulator) against numpy references."""
from __future__ import annotations

import time

import numpy as np
import pytest

from gpgpu_opt.emulator import (DivergentBarrierError, EmulationError, MisalignedAccessError, OutOfBoundsError,
                                RaceError, UndefinedBehaviorError, UnsupportedConstruct, run_kernel)
from gpgpu_opt.frontend import load_program

RNG = np.random.default_rng(1234)


def rand(n, lo=-1.0, hi=1.0, dtype=np.float32):
    x = RNG.uniform(lo, hi, n).astype(dtype)
    x[x == 0] = dtype(0.5)
    return x


def nans(n, dtype=np.float32):
    return np.full(n, np.nan, dtype)


@pytest.fixture
def cu(tmp_path):
    counter = [0]

    def load(src: str):
        counter[0] += 1
        path = tmp_path / f"k{counter[0]}.cu"
        path.write_text(src)
        return load_program(str(path))

    return load


def run(prog, grid, block, name=None, **args):
    k = prog.kernel(name) if name else prog.kernels[0]
    return run_kernel(k, grid, block, args, device_functions=prog.device_functions)


# ------------------------------------------------------------------------------------------------ basics
SAXPY = """
__global__ void saxpy(const float *x, float *y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_saxpy_partial_block(cu):
    prog = cu(SAXPY)
    n = 1000
    x, y = rand(n), rand(n)
    y0 = y.copy()
    stats = run(prog, (8,), (128,), x=x, y=y, a=2.5, n=n)
    assert np.array_equal(y, np.float32(2.5) * x + y0)
    assert stats.threads == 1024 and stats.blocks == 8
    assert stats.global_loads == 2 * n and stats.global_stores == n


def test_saxpy_many_batches(cu):
    prog = cu(SAXPY)
    n = 5000
    x, y = rand(n), rand(n)
    y0 = y.copy()
    k = prog.kernels[0]
    stats = run_kernel(k, (40,), (128,), dict(x=x, y=y, a=-1.0, n=n), max_threads_per_batch=1000)
    assert stats.batches == 6
    assert np.array_equal(y, -x + y0)


def test_global_oob_write(cu):
    prog = cu("""
__global__ void k(float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = 1.0f;
}
""")
    with pytest.raises(OutOfBoundsError) as e:
        run(prog, (8,), (128,), y=nans(1000), n=1000)
    msg = str(e.value)
    assert "'y'" in msg and "1000" in msg and "block (7,0,0)" in msg and "thread (104,0,0)" in msg
    assert ".cu:4" in msg and "'k'" in msg


def test_global_oob_read_past_end(cu):
    prog = cu("""
__global__ void k(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1];
}
""")
    with pytest.raises(OutOfBoundsError, match="'x'"):
        run(prog, (1,), (64,), x=rand(64), y=nans(64), n=64)


def test_short_circuit_guards_load(cu):
    prog = cu("""
__global__ void k(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) y[i] = 1.0f;
    else if (i < n) y[i] = (i >= n || x[i] < -0.5f) ? -1.0f : 0.0f;
}
""")
    n = 100
    x, y = rand(n), nans(n)
    run(prog, (1,), (128,), x=x, y=y, n=n)
    assert np.array_equal(y, np.where(x > 0, 1.0, np.where(x < -0.5, -1.0, 0.0)).astype(np.float32))


def test_missing_argument_and_dtype(cu):
    prog = cu(SAXPY)
    with pytest.raises(EmulationError, match="missing"):
        run(prog, (1,), (32,), x=rand(32), y=rand(32), a=1.0)
    with pytest.raises(EmulationError, match="dtype"):
        run(prog, (1,), (32,), x=rand(32, dtype=np.float64), y=rand(32), a=1.0, n=32)


# ------------------------------------------------------------------------------------------------ matmul
MM = """
#define TILE 16
__global__ void mm(const float *A, const float *B, float *C, int n)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; k++)
            sum += A[row * n + k] * B[k * n + col];
        C[row * n + col] = sum;
    }
}

__global__ void mm_tiled(const float *A, const float *B, float *C, int n)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < (n + TILE - 1) / TILE; t++) {
        As[ty][tx] = (row < n && t * TILE + tx < n) ? A[row * n + t * TILE + tx] : 0.0f;
        Bs[ty][tx] = (col < n && t * TILE + ty < n) ? B[(t * TILE + ty) * n + col] : 0.0f;
        __syncthreads();                                   /* BARRIER1 */
        #pragma unroll
        for (int k = 0; k < TILE; k++)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();                                   /* BARRIER2 */
    }
    if (row < n && col < n)
        C[row * n + col] = sum;
}
"""


def mm_reference_f32(A, B, n):
    """C = A B summed in k order in float32, as the naive kernel does."""
    A2, B2 = A.reshape(n, n), B.reshape(n, n)
    acc = np.zeros((n, n), np.float32)
    for k in range(n):
        acc = acc + np.outer(A2[:, k], B2[k, :]).astype(np.float32)
    return acc.ravel()


def _mm_args(n):
    return dict(A=rand(n * n), B=rand(n * n), C=nans(n * n), n=n)


def test_naive_mm_exact(cu):
    prog = cu(MM)
    n = 37
    args = _mm_args(n)
    run(prog, ((n + 15) // 16, (n + 15) // 16), (16, 16), name="mm", **args)
    ref = mm_reference_f32(args["A"], args["B"], n)
    assert np.array_equal(args["C"], ref)


def test_tiled_mm_correct_no_race(cu):
    prog = cu(MM)
    n = 40
    args = _mm_args(n)
    stats = run(prog, (3, 3), (16, 16), name="mm_tiled", **args)
    ref = (args["A"].reshape(n, n).astype(np.float64) @ args["B"].reshape(n, n)).ravel()
    assert np.allclose(args["C"], ref, atol=1e-4)
    assert stats.barriers == 9 * 3 * 2
    assert stats.shared_loads == 9 * 256 * 3 * 32


@pytest.mark.parametrize("which", ["BARRIER1", "BARRIER2"])
def test_tiled_mm_missing_barrier_races(cu, which):
    src = MM.replace(f"__syncthreads();                                   /* {which} */", "")
    assert src != MM
    prog = cu(src)
    with pytest.raises(RaceError) as e:
        run(prog, (2, 2), (16, 16), name="mm_tiled", **_mm_args(32))
    msg = str(e.value)
    assert "shared array" in msg and "block (" in msg and "thread (" in msg and ".cu:" in msg


def test_tiled_mm_off_by_one_staging(cu):
    prog = cu(MM.replace("As[ty][tx] = (row", "As[ty][tx + 1] = (row"))
    with pytest.raises(OutOfBoundsError) as e:
        run(prog, (2, 2), (16, 16), name="mm_tiled", **_mm_args(32))
    assert "'As'" in str(e.value) and "dimension 1" in str(e.value)


def test_shared_per_dimension_bounds(cu):
    prog = cu("""
__global__ void k(float *out) {
    __shared__ float t[16][17];
    t[threadIdx.x][threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = t[0][17 * (threadIdx.x == 3)];
}
""")
    with pytest.raises(OutOfBoundsError, match=r"index 17 in dimension 1.*t\[16\]\[17\].*thread \(3,0,0\)"):
        run(prog, (1,), (16,), out=nans(16))


def test_mm_256_speed(cu):
    prog = cu(MM)
    n = 256
    for name in ("mm", "mm_tiled"):
        args = _mm_args(n)
        t = time.perf_counter()
        run(prog, (16, 16), (16, 16), name=name, **args)
        elapsed = time.perf_counter() - t
        ref = (args["A"].reshape(n, n).astype(np.float64) @ args["B"].reshape(n, n)).ravel()
        assert np.allclose(args["C"], ref, atol=1e-3)
        assert elapsed < 15, (name, elapsed)


# ------------------------------------------------------------------------------------------------ barriers
def test_divergent_barrier(cu):
    prog = cu("""
__global__ void k(float *out) {
    __shared__ float s[32];
    s[threadIdx.x] = threadIdx.x;
    if (threadIdx.x < 8)
        __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
""")
    with pytest.raises(DivergentBarrierError) as e:
        run(prog, (2,), (32,), out=nans(64))
    assert "8 of the 32" in str(e.value) and "thread (8,0,0)" in str(e.value)


def test_barrier_after_early_exit_and_block_uniform_branch(cu):
    prog = cu("""
__global__ void k(const float *in, float *out, int n) {
    __shared__ float s[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x == 1) {
        s[threadIdx.x] = 2.0f * in[i];
        __syncthreads();
        out[i] = s[63 - threadIdx.x];
        return;
    }
    if (i >= n) return;
    out[i] = in[i];
}
""")
    x, out = rand(192), nans(192)
    run(prog, (3,), (64,), **{"in": x}, out=out, n=150)
    assert np.array_equal(out[:64], x[:64])
    assert np.array_equal(out[64:128], (2 * x[64:128])[::-1])
    assert np.array_equal(out[128:150], x[128:150]) and np.isnan(out[150:]).all()


REDUCE = """
__global__ void reduce(const float *in, float *out, int n) {
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""


def tree_sum_f32(x):
    x = x.copy()
    s = len(x) // 2
    while s > 0:
        x[:s] = x[:s] + x[s:2 * s]
        s //= 2
    return x[0]


def test_block_tree_reduction(cu):
    prog = cu(REDUCE)
    n = 1000
    x, out = rand(n), nans(4)
    stats = run(prog, (4,), (256,), **{"in": x}, out=out, n=n)
    padded = np.concatenate([x, np.zeros(24, np.float32)]).reshape(4, 256)
    assert np.array_equal(out, np.array([tree_sum_f32(r) for r in padded], np.float32))
    assert stats.barriers == 4 * 9


def test_reduction_without_barrier_races(cu):
    prog = cu(REDUCE.replace("""            sdata[tid] += sdata[tid + s];
        __syncthreads();""", """            sdata[tid] += sdata[tid + s];"""))
    with pytest.raises(RaceError, match="sdata"):
        run(prog, (1,), (256,), **{"in": rand(256)}, out=nans(1), n=256)


def test_global_in_place_tree_with_barriers_is_not_a_race(cu):
    """__syncthreads() orders global memory within a block (inputs/reduction.cu relies on it)."""
    prog = cu("""
__global__ void k(float *partial, float *out) {
    int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0 && tid + s < blockDim.x)
            partial[i] += partial[i + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[i];
}
""")
    x = rand(128)
    p, out = x.copy(), nans(2)
    run(prog, (2,), (64,), partial=p, out=out)
    assert np.allclose(out, x.reshape(2, 64).sum(axis=1), atol=1e-5)


def test_global_races(cu):
    prog = cu("""
__global__ void same_word(int *out) { out[0] = threadIdx.x; }
__global__ void cross_block(float *a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    a[i] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0 && blockIdx.x > 0) a[i] = a[i - 1];
}
__global__ void read_then_write(float *a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = a[(i + 1) % 64];
    a[i] = v;
}
""")
    with pytest.raises(RaceError, match=r"'out' index 0"):
        run(prog, (1,), (32,), name="same_word", out=np.zeros(1, np.int32))
    with pytest.raises(RaceError, match="different blocks"):
        run(prog, (2,), (32,), name="cross_block", a=nans(64))
    with pytest.raises(RaceError):
        run(prog, (2,), (32,), name="read_then_write", a=rand(64))
    a = rand(64)
    run_kernel(prog.kernel("read_then_write"), (2,), (32,), dict(a=a), check_races=False)


def test_atomics_serialized(cu):
    prog = cu("""
__global__ void k(const int *v, int *total, float *ftotal, int *old_out, int n) {
    __shared__ int counter[1];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) counter[0] = 0;
    __syncthreads();
    if (i < n) {
        old_out[i] = atomicAdd(&total[0], v[i]);
        atomicAdd(&ftotal[i % 2], 0.5f);
        atomicAdd(&counter[0], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&total[1], counter[0]);
}
""")
    n = 300
    v = RNG.integers(1, 10, n).astype(np.int32)
    total, ftotal, old = np.array([5, 0], np.int32), np.zeros(2, np.float32), np.zeros(n, np.int32)
    run(prog, (3,), (128,), v=v, total=total, ftotal=ftotal, old_out=old, n=n)
    assert total[0] == 5 + v.sum() and total[1] == 128
    assert np.array_equal(old, 5 + np.concatenate([[0], np.cumsum(v)[:-1]]))
    assert np.array_equal(ftotal, [75.0, 75.0])


# ------------------------------------------------------------------------------------------------ C semantics
def test_integer_division_truncates(cu):
    prog = cu("""
__global__ void k(const int *a, const int *b, int *q, int *r, unsigned int *uq) {
    int i = threadIdx.x;
    q[i] = a[i] / b[i];
    r[i] = a[i] % b[i];
    uq[i] = (unsigned int) a[i] / 3u;
}
""")
    a = np.array([7, -7, 7, -7, 0, -1, 5, -9], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4, -5, 4], np.int32)
    q, r, uq = (np.zeros(8, np.int32), np.zeros(8, np.int32), np.zeros(8, np.uint32))
    run(prog, (1,), (8,), a=a, b=b, q=q, r=r, uq=uq)
    assert q.tolist() == [3, -3, -3, 3, 0, 0, -1, -2]
    assert r.tolist() == [1, -1, 1, -1, 0, -1, 0, -1]
    assert uq.tolist() == [(int(x) % 2**32) // 3 for x in a]


def test_integer_division_by_zero(cu):
    prog = cu("""
__global__ void k(const int *a, int *q, int n) {
    int i = threadIdx.x;
    if (a[i] != 0) q[i] = n / a[i];
    if (i == 5) q[i] = n / (a[i] - a[i]);
}
""")
    a = np.array([1, 0, 2, 0, 3, 4, 5, 6], np.int32)
    with pytest.raises(UndefinedBehaviorError, match="division by zero"):
        run(prog, (1,), (8,), a=a, q=np.zeros(8, np.int32), n=10)


def test_unsigned_wraparound(cu):
    prog = cu("""
__global__ void k(int *out, unsigned int *uout, int *flag) {
    int i = threadIdx.x - 1;
    unsigned int u = threadIdx.x - 1;
    out[threadIdx.x] = i;
    uout[threadIdx.x] = u;
    flag[threadIdx.x] = (threadIdx.x - 1 < 5) ? 1 : 0;
    if (i < 0) flag[threadIdx.x] += 10;
    if (-1 < threadIdx.x) flag[threadIdx.x] += 100;  /* -1 becomes 0xffffffff: never true */
}
""")
    out, uout, flag = np.zeros(8, np.int32), np.zeros(8, np.uint32), np.zeros(8, np.int32)
    run(prog, (1,), (8,), out=out, uout=uout, flag=flag)
    assert out.tolist() == list(range(-1, 7))
    assert uout[0] == 2**32 - 1 and uout[1:].tolist() == list(range(7))
    assert flag.tolist() == [10, 1, 1, 1, 1, 1, 0, 0]


def test_float32_stays_float32(cu):
    prog = cu("""
__global__ void k(const float *x, float *y, float *z, double *d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float t = x[i];
    y[i] = t * 0.1f + t / 3.0f - 1.5f * t * t;
    z[i] = t * 1.1;
    float c = 1.0 / 3;
    d[i] = t + c + 1;
}
""")
    n = 256
    x, y, z, d = rand(n), nans(n), nans(n), nans(n, np.float64)
    run(prog, (2,), (128,), x=x, y=y, z=z, d=d)
    f = np.float32
    ref = x * f(0.1) + x / f(3.0) - f(1.5) * x * x
    assert ref.dtype == np.float32 and y.tobytes() == ref.tobytes()
    assert z.tobytes() == (x.astype(np.float64) * 1.1).astype(np.float32).tobytes()
    assert np.array_equal(d, ((x + f(1.0 / 3)) + f(1)).astype(np.float64))


def test_operators_and_conversions(cu):
    prog = cu("""
__global__ void k(int *o, float *f) {
    int i = threadIdx.x, j = 0;
    int a = i++, b = ++i;
    j += a * 10; j -= 1; j *= 2; j <<= 1; j |= 1; j ^= 3; j %= 1000; j /= 2;
    o[0 * 8 + threadIdx.x] = j;
    o[1 * 8 + threadIdx.x] = (a, b);
    o[2 * 8 + threadIdx.x] = (int) sizeof(double) + (int) sizeof(float2);
    o[3 * 8 + threadIdx.x] = (int) (-7.9f) + (int) 2.5;
    o[4 * 8 + threadIdx.x] = ~a & 0xff;
    o[5 * 8 + threadIdx.x] = !a + (a > 3) + (a >> 1);
    o[6 * 8 + threadIdx.x] = min(a, 3) + max(a, 5) + abs(-a);
    o[7 * 8 + threadIdx.x] = (short) 70000 + (char) 200;
    f[threadIdx.x] = sqrtf((float) a) + fmaxf(1.0f, 2.0f) + powf(2.0f, 3.0f) + roundf(2.5f) + floorf(-1.5f);
}
""")
    o, f = np.zeros(64, np.int32), nans(8)
    run(prog, (1,), (8,), o=o, f=f)
    o = o.reshape(8, 8)
    for t in range(8):
        a, b = t, t + 2
        j = a * 10
        j = (((((j - 1) * 2) << 1) | 1) ^ 3)
        j = int(np.fmod(j, 1000))
        j = int(j / 2)
        assert o[0, t] == j
        assert o[1, t] == b
        assert o[4, t] == (~a) & 0xFF
        assert o[5, t] == int(a == 0) + int(a > 3) + (a >> 1)
        assert o[6, t] == min(a, 3) + max(a, 5) + a
    assert (o[2] == 16).all() and (o[3] == -5).all() and (o[7] == 4464 - 56).all()
    ref = np.sqrt(np.arange(8, dtype=np.float32)) + np.float32(2 + 8 + 3 - 2)
    assert np.array_equal(f, ref)


def test_vector_casts(cu):
    prog = cu("""
__global__ void k(const float *A, float *B, float *C, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = ((const float4 *) A)[i];
        ((float4 *) B)[i] = make_float4(v.w, v.z, v.y, v.x);
        float2 p = ((const float2 *) A)[2 * i + 1];
        p.x += 1.0f;
        ((float2 *) C)[i] = p;
    }
}
__global__ void misaligned(const float *A, float *B) {
    int i = threadIdx.x;
    float2 p = ((const float2 *) (A + 1))[i];
    B[i] = p.x;
}
""")
    n4 = 50
    A, B, C = rand(4 * n4), nans(4 * n4), nans(2 * n4)
    run(prog, (1,), (64,), name="k", A=A, B=B, C=C, n4=n4)
    assert np.array_equal(B.reshape(-1, 4), A.reshape(-1, 4)[:, ::-1])
    ref = A.reshape(-1, 4)[:, 2:].copy()
    ref[:, 0] += np.float32(1)
    assert np.array_equal(C.reshape(-1, 2), ref)
    with pytest.raises(MisalignedAccessError, match="float2"):
        run(prog, (1,), (4,), name="misaligned", A=rand(16), B=nans(4))
    with pytest.raises(OutOfBoundsError):
        run(prog, (1,), (64,), name="k", A=rand(4 * n4 - 1), B=nans(4 * n4), C=nans(2 * n4), n4=n4)


def test_device_function_calls(cu):
    prog = cu("""
__device__ float sq(float v) { return v * v; }
__device__ int clamp_steps(int x, int limit) {
    int steps = 0;
    while (x > 1) {
        if (steps == limit) return -1;
        x = (x % 2 == 0) ? x / 2 : 3 * x + 1;
        steps++;
    }
    return steps;
}
__device__ void store(float *p, int i, float v) { p[i] = v; }
__global__ void k(const float *x, float *y, int *steps) {
    int i = threadIdx.x;
    store(y, i, sq(x[i]) + sq(2.0f));
    steps[i] = clamp_steps(i + 1, 15);
}
""")
    x, y, steps = rand(32), nans(32), np.zeros(32, np.int32)
    run(prog, (1,), (32,), x=x, y=y, steps=steps)
    assert np.array_equal(y, x * x + np.float32(4))

    def collatz(v, limit=15):
        s = 0
        while v > 1:
            if s == limit:
                return -1
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s

    assert steps.tolist() == [collatz(i + 1) for i in range(32)]


def test_loops_per_thread_trip_counts(cu):
    prog = cu("""
__global__ void k(int *out) {
    int i = threadIdx.x, s = 0;
    for (int k = 0; k < i; k++) {
        if (k * k > i) break;
        if (k % 3 == 1) continue;
        s += k;
    }
    int w = 0, c = i;
    do { c /= 2; w++; } while (c > 0);
    int sw;
    switch (i % 4) {
    case 0: sw = 100; break;
    case 1: sw = 200;
    case 2: sw += 1; break;
    default: sw = -1;
    }
    out[i] = s + 1000 * w + 100000 * sw;
}
""")
    out = np.zeros(40, np.int32)
    run(prog, (1,), (40,), out=out)
    for i in range(40):
        s = 0
        for k in range(i):
            if k * k > i:
                break
            if k % 3 == 1:
                continue
            s += k
        w, c = 0, i
        while True:
            c //= 2
            w += 1
            if c <= 0:
                break
        sw = {0: 100, 1: 201, 3: -1}.get(i % 4)
        if sw is None:
            continue            # case 2 reads an uninitialised variable
        assert out[i] == s + 1000 * w + 100000 * sw, i


def test_pointer_local_row(cu):
    prog = cu("""
__global__ void mv(const float *A, const float *x, float *y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const float *row = A + r * cols;
        float sum = 0;
        for (int c = 0; c < cols; c++)
            sum += row[c] * x[c];
        y[r] = sum;
    }
}
""")
    rows, cols = 70, 33
    A, x, y = rand(rows * cols), rand(cols), nans(rows)
    run(prog, (2,), (64,), A=A, x=x, y=y, rows=rows, cols=cols)
    assert np.allclose(y, A.reshape(rows, cols).astype(np.float64) @ x, atol=1e-5)


def test_local_arrays(cu):
    prog = cu("""
__global__ void k(const float *in, float *out) {
    float t[3] = {1.0f, 2.0f, 3.0f};
    float acc[4];
    int i = threadIdx.x;
    for (int j = 0; j < 4; j++) acc[j] = in[i] * j;
    out[i] = t[i % 3] + acc[i % 4];
}
""")
    x, out = rand(16), nans(16)
    run(prog, (1,), (16,), **{"in": x}, out=out)
    i = np.arange(16)
    assert np.array_equal(out, (i % 3 + 1).astype(np.float32) + x * (i % 4).astype(np.float32))


# ------------------------------------------------------------------------------------------------ warps
def test_warp_shuffle_reduction(cu):
    prog = cu("""
__global__ void k(const float *in, float *out, int *lanes) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffff, v, off);
    int lane = threadIdx.x % 32;
    if (lane == 0) out[i / 32] = v;
    lanes[i] = __shfl_sync(0xffffffff, lane, (lane + 1) % 32) + 100 * __shfl_xor_sync(0xffffffff, lane, 1);
}
""")
    x, out, lanes = rand(128), nans(4), np.zeros(128, np.int32)
    run(prog, (2,), (64,), **{"in": x}, out=out, lanes=lanes)
    ref = x.reshape(4, 32).copy()
    for off in (16, 8, 4, 2, 1):
        shifted = np.concatenate([ref[:, off:], ref[:, 32 - off:]], axis=1)  # out-of-range lanes keep own
        shifted[:, 32 - off:] = ref[:, 32 - off:]
        ref = ref + shifted
    assert np.array_equal(out, ref[:, 0])
    lane = np.arange(128) % 32
    assert np.array_equal(lanes, (lane + 1) % 32 + 100 * (lane ^ 1))


def test_warp_synchronous_shared_with_syncwarp(cu):
    src = """
__global__ void k(const float *in, float *out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    if (t < 32) {
        float v = s[t] + s[t + 32];
        for (int off = 16; off > 0; off >>= 1) {
            s[t] = v;
            __syncwarp();
            if (t < off) v += s[t + off];
            __syncwarp();
        }
        if (t == 0) out[0] = v;
    }
}
"""
    prog = cu(src)
    x, out = rand(64), nans(1)
    run(prog, (1,), (64,), **{"in": x}, out=out)
    assert np.isclose(out[0], x.sum(), atol=1e-5)
    racy = cu(src.replace("            __syncwarp();\n        }", "        }"))
    with pytest.raises(RaceError, match="'s'"):
        run(racy, (1,), (64,), **{"in": x}, out=nans(1))


# ------------------------------------------------------------------------------------------------ unsupported
def test_unsupported_constructs(cu):
    prog = cu("""
__device__ int f(int x) { return x <= 0 ? 0 : f(x - 1); }
__global__ void recursive(int *o) { o[threadIdx.x] = f(3); }
__global__ void addr_of_local(int *o) { int x = 1; int *p = &x; o[0] = *p; }
__global__ void with_goto(int *o) { if (threadIdx.x) goto done; o[0] = 1; done: ; }
""")
    for name in ("recursive", "addr_of_local", "with_goto"):
        with pytest.raises(UnsupportedConstruct) as e:
            run(prog, (1,), (4,), name=name, o=np.zeros(4, np.int32))
        assert ".cu:" in str(e.value)


# ------------------------------------------------------------------------------------------------ more builtins
def test_3d_launch_coordinates(cu):
    prog = cu("""
__global__ void k(int *out) {
    int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int g = bx * (blockDim.x * blockDim.y * blockDim.z) + t;
    out[g] = threadIdx.z * 1000000 + threadIdx.y * 10000 + threadIdx.x * 100 + blockIdx.z * 10 + blockIdx.y;
}
""")
    grid, block = (2, 3, 2), (4, 2, 3)
    out = np.full(12 * 24, -1, np.int32)
    run_kernel(prog.kernels[0], grid, block, dict(out=out), max_threads_per_batch=50)
    ref = []
    for bz in range(2):
        for by in range(3):
            for bx in range(2):
                for tz in range(3):
                    for ty in range(2):
                        for tx in range(4):
                            ref.append(tz * 1000000 + ty * 10000 + tx * 100 + bz * 10 + by)
    assert out.tolist() == ref


def test_shared_scalar_votes_ldg(cu):
    prog = cu("""
__global__ void k(const float *x, int *out, unsigned int *ballots) {
    __shared__ int count;
    int t = threadIdx.x;
    if (t == 0) count = 0;
    __syncthreads();
    int positive = __ldg(&x[t]) > 0.0f;
    int n = __syncthreads_count(positive);
    if (positive) atomicAdd(&count, 1);
    __syncthreads();
    ballots[t] = __popc(positive << (t % 32));
    out[t] = n * 1000 + count;
}
""")
    x = rand(64)
    out, ballots = np.zeros(64, np.int32), np.zeros(64, np.uint32)
    run(prog, (1,), (64,), x=x, out=out, ballots=ballots)
    npos = int((x > 0).sum())
    assert out.tolist() == [npos * 1001] * 64
    assert ballots.tolist() == (x > 0).astype(np.uint32).tolist()


def parse_c_kernel(src: str):
    """A kernel parsed by pycparser alone (for builtins the front end's prelude does not declare)."""
    from pycparser import c_ast, c_parser
    ast = c_parser.CParser().parse(src, filename="direct.cu")
    return [e for e in ast.ext if isinstance(e, c_ast.FuncDef)][-1]


def test_warp_votes():
    k = parse_c_kernel("""
typedef struct { unsigned int x, y, z; } uint3;
extern uint3 threadIdx;
unsigned int __ballot_sync(unsigned int, int); int __all_sync(unsigned int, int); int __any_sync(unsigned int, int);
void votes(const float *x, int *out, unsigned int *ballots) {
    int t = threadIdx.x;
    int positive = x[t] > 0.0f;
    ballots[t] = __ballot_sync(0xffffffff, positive);
    out[t] = 100 * __all_sync(0xffffffff, t < 64) + 200 * __any_sync(0xffffffff, t == 40);
    if (t < 16) out[t] += __any_sync(0xffff, 1);
}
""")
    x = rand(64)
    out, ballots = np.zeros(64, np.int32), np.zeros(64, np.uint32)
    run_kernel(k, (1,), (64,), dict(x=x, out=out, ballots=ballots))
    bits = [int(sum(1 << i for i in range(32) if x[w * 32 + i] > 0)) for w in range(2)]
    assert ballots.tolist() == [bits[t // 32] for t in range(64)]
    assert out.tolist() == [100 + 200 * (t >= 32) + (t < 16) for t in range(64)]


def test_math_overloads_and_fma(cu):
    prog = cu("""
__global__ void k(const float *x, float *f, double *d) {
    int i = threadIdx.x;
    float v = x[i];
    f[i] = sqrt(v * v) + fmaf(v, 3.0f, 1.0f) + expf(v) + __fdividef(v, 7.0f) + rsqrtf(4.0f);
    d[i] = sqrt((double) v) + exp(1.0) + fabs(-2.0) + fmin(1.0, (double) v);
}
""")
    x = rand(32, 0.1, 2.0)
    f, d = nans(32), nans(32, np.float64)
    run(prog, (1,), (32,), x=x, f=f, d=d)
    f32 = np.float32
    fma = (x.astype(np.float64) * 3 + 1).astype(np.float32)
    ref = np.sqrt(x * x) + fma + np.exp(x) + x / f32(7) + f32(0.5)
    assert np.array_equal(f, ref)
    assert np.array_equal(d, np.sqrt(x.astype(np.float64)) + np.e + 2.0 + np.minimum(1.0, x.astype(np.float64)))


def test_more_unsupported(cu):
    prog = cu("""
__global__ void dyn(float *o) { extern __shared__ float s[]; s[threadIdx.x] = 1.0f; o[0] = s[0]; }
__global__ void ptr_select(float *a, float *b) { float *p = threadIdx.x < 2 ? a : b; p[0] = 1.0f; }
""")
    with pytest.raises(UnsupportedConstruct, match="'s'"):
        run(prog, (1,), (4,), name="dyn", o=nans(4))
    k = parse_c_kernel("float no_such_libf(float); void unknown_call(float *o) { o[0] = no_such_libf(0.5f); }")
    with pytest.raises(UnsupportedConstruct, match="no_such_libf.*direct.cu:1"):
        run_kernel(k, (1,), (1,), dict(o=nans(1)))
    with pytest.raises(UnsupportedConstruct, match="different arrays"):
        run(prog, (1,), (4,), name="ptr_select", a=nans(4), b=nans(4))


def test_uniform_loop_inside_divergent_branch(cu):
    prog = cu("""
__global__ void k(const int *n, int *out) {
    int i = threadIdx.x, s = 0, k = 0;
    if (i % 2 == 0) {
        while (k < n[0]) { s += k; k++; }
    } else {
        k = 100;
        while (k > n[i]) k -= 7;
    }
    out[i] = s * 1000 + k;
}
""")
    n = RNG.integers(0, 50, 16).astype(np.int32)
    out = np.zeros(16, np.int32)
    run(prog, (1,), (16,), n=n, out=out)
    for i in range(16):
        if i % 2 == 0:
            assert out[i] == sum(range(n[0])) * 1000 + n[0]
        else:
            k = 100
            while k > n[i]:
                k -= 7
            assert out[i] == k
