"""The emulator's fast paths keep C's meaning: facts decoded once per node (declared types, plain
declarations, which blocks declare names), the shared-memory race check skipped only while no write
follows a barrier, memoized usual conversions."""
from __future__ import annotations

import numpy as np
import pytest

from gpgpu_opt.emulator import RaceError, UnsupportedConstruct, run_kernel
from gpgpu_opt.frontend import load_program


@pytest.fixture
def cu(tmp_path):
    def load(src: str):
        path = tmp_path / "k.cu"
        path.write_text(src)
        return load_program(str(path))

    return load


def run(prog, grid, block, **args):
    return run_kernel(prog.kernels[0], grid, block, args, device_functions=prog.device_functions)


def test_blocks_without_declarations_keep_shadowing(cu):
    """A block that declares nothing binds nothing; one that does hides outer names until it ends, in
    loops run again and again (each iteration's block starts without the previous one's names)."""
    prog = cu("""
    __global__ void k(int *out) {
        int t = threadIdx.x;
        int v = 1;
        for (int r = 0; r < 3; r++) {
            { v = v + 1; }
            {
                out[t * 4 + 0] = v;
                int v = 100 + r;
                { out[t * 4 + 1] = v; }
                if (t > 0) { v = v + t; out[t * 4 + 2] = v; }
            }
        }
        out[t * 4 + 3] = v;
    }
    """)
    out = np.zeros(4 * 4, np.int32)
    run(prog, (1,), (4,), out=out)
    rows = out.reshape(4, 4)
    assert rows[:, 0].tolist() == [4] * 4          # outer v after three increments
    assert rows[:, 1].tolist() == [102] * 4        # the inner v of the last iteration
    assert rows[:, 2].tolist() == [0, 103, 104, 105]
    assert rows[:, 3].tolist() == [4] * 4


def test_plain_declarations_convert_to_their_type_every_time(cu):
    """`int i = e;` decoded once still converts each evaluation (a float truncates, an unsigned wraps)."""
    prog = cu("""
    __global__ void k(const float *x, int *out, unsigned int *u) {
        int t = threadIdx.x;
        for (int r = 0; r < 2; r++) {
            int i = x[t] * (r + 1);
            unsigned int w = i - 3;
            out[t * 2 + r] = i;
            u[t * 2 + r] = w;
        }
    }
    """)
    x = np.array([1.75, -2.5, 0.5, 3.25], np.float32)
    out = np.zeros(8, np.int32)
    u = np.zeros(8, np.uint32)
    run(prog, (1,), (4,), x=x, out=out, u=u)
    expect = np.array([[int(v * (r + 1)) for r in range(2)] for v in x], np.int64).ravel()
    assert out.tolist() == expect.tolist()
    assert u.tolist() == [(int(v) - 3) % 2**32 for v in expect]


@pytest.mark.parametrize("decl, message", [("void v = 0;", "void variable 'v'"),
                                           ("static int v = 0;", "'static' declaration of 'v'")])
def test_declarations_outside_the_fast_path_report_as_before(cu, decl, message):
    prog = cu(f"__global__ void k(int *out) {{ {decl} out[threadIdx.x] = 1; }}")
    with pytest.raises(UnsupportedConstruct, match=message):
        run(prog, (1,), (2,), out=np.zeros(2, np.int32))


SHARED_AFTER_BARRIER = """
__global__ void k(const float *in, float *out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    s[t + 32] = in[t];
    __syncthreads();
    float a = s[(t + 1) % 32];     /* ordered by the barrier: no race */
    if (t == 0) s[40] = a;         /* WRITE */
    out[t] = s[40] + a;            /* READ */
}
"""


def _run_shared(prog):
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    run(prog, (1,), (32,), **{"in": x, "out": out})
    return x, out


def test_shared_reads_after_a_barrier_are_not_races(cu):
    x, out = _run_shared(cu(SHARED_AFTER_BARRIER.replace("if (t == 0) s[40] = a;", "")))
    assert out.tolist() == (x[8] + np.roll(x, -1)).tolist()


def test_a_write_after_the_barrier_makes_later_reads_checked_again(cu):
    """The writer check is skipped only until a write follows the barrier: thread 0's store to s[40]
    (a word nobody read since the barrier) and the other threads' load of it are unordered."""
    with pytest.raises(RaceError, match=r"race on shared array 's' index 40: .* reads it at .*:10, and "
                                        r"block \(0,0,0\) thread \(0,0,0\) wrote it at .*:9"):
        _run_shared(cu(SHARED_AFTER_BARRIER))


def test_a_second_barrier_orders_the_write_again(cu):
    x, out = _run_shared(cu(SHARED_AFTER_BARRIER.replace("/* WRITE */", "__syncthreads();")))
    assert out.tolist() == (x[1] + np.roll(x, -1)).tolist()


def test_usual_conversions_per_operand_pair(cu):
    """The memoized usual arithmetic conversions, both orders of each pair: int with unsigned is
    unsigned, long with unsigned is long, char promotes to int, float with double is double."""
    prog = cu("""
    __global__ void k(int *i, unsigned int *u, long *l, double *d) {
        int m = -1; unsigned int one = 1u; long big = -1; char c = -3; float f = 0.1f; double g = 0.1;
        u[0] = m < one; u[1] = one > m;
        l[0] = big < one; l[1] = one > big;
        i[0] = c * c; i[1] = c + one > 0u;
        d[0] = f * g; d[1] = g * f;
    }
    """)
    i, u, l, d = np.zeros(2, np.int32), np.zeros(2, np.uint32), np.zeros(2, np.int64), np.zeros(2, np.float64)
    run(prog, (1,), (1,), i=i, u=u, l=l, d=d)
    assert u.tolist() == [0, 0]                    # -1 converts to UINT_MAX
    assert l.tolist() == [1, 1]                    # long holds every unsigned int: -1 < 1
    assert i.tolist() == [9, 1]
    assert d[0] == d[1] == np.float64(np.float32(0.1)) * 0.1


def test_local_arrays_by_uniform_and_per_lane_index(cu):
    """A local array's element at a uniform index is one strided slice over the lanes' copies; at a
    per-lane index, or under a divergent branch, it is addressed lane by lane: the two agree."""
    prog = cu("""
    __global__ void k(const float *x, float *out, float2 *pairs) {
        int t = threadIdx.x;
        float a[4];
        float2 p[3];
        for (int j = 0; j < 4; j++)
            a[j] = x[t] * (j + 1);
        for (int j = 0; j < 3; j++)
            p[j] = make_float2(a[j], a[j + 1]);
        if (t % 2 == 1) { a[1] = -a[t % 4]; p[2].x = 7.0f; }
        out[t * 2] = a[1] + a[3];
        out[t * 2 + 1] = a[t % 4];
        pairs[t] = p[2];
    }
    """)
    x = np.arange(1, 9, dtype=np.float32)
    out = np.zeros(16, np.float32)
    pairs = np.zeros(16, np.float32)
    run(prog, (1,), (8,), x=x, out=out, pairs=pairs)
    a = x[:, None] * np.arange(1, 5, dtype=np.float32)
    odd = np.arange(8) % 2 == 1
    a[odd, 1] = -a[odd, np.arange(8)[odd] % 4]
    assert out[0::2].tolist() == (a[:, 1] + a[:, 3]).tolist()
    assert out[1::2].tolist() == a[np.arange(8), np.arange(8) % 4].tolist()
    p2 = np.stack([np.where(odd, 7.0, x * 3), x * 4], axis=1).astype(np.float32)
    assert pairs.tolist() == p2.ravel().tolist()
