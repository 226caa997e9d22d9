"""Loops whose iterator starts at a per-thread value (`for (i = tid; i < n; i += 1024)`): the iterator is
`start + step*k` with k the trip index, the same for all threads, so `d[i]` differs between threads; it
is never taken for an element all threads (or all blocks) share."""
import textwrap

import pytest

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target
from tests.passes.test_split_loop import assert_equivalent, compile_text, merge_decisions, only

SOURCE = """
    #define STRIDE (1 << 10)
    __global__ void strided(float *d, const float *a, int size) {
        int tid = blockIdx.x * blockDim.x + threadIdx.x;
        for (int i = tid; i < size; i += 1024)
            d[i] = a[i] * 2.0f;
    }
    __global__ void folded(float *d, const float *a, int size) {
        for (int i = threadIdx.x; i < size; i += STRIDE)
            d[i] = a[i] + 1.0f;
    }
    __global__ void nested(float *d, const float *a, int n) {
        int tid = blockIdx.x * blockDim.x + threadIdx.x;
        for (int p = tid; p < n; p += 4096)
            for (int q = p; q < p + 4; q++)
                d[q] = a[q];
    }
    __global__ void uniform(float *out, const float *x, int n) {
        int tid = blockIdx.x * blockDim.x + threadIdx.x;
        float s = 0.0f;
        for (int c = 0; c < n; c += 1024)
            s += x[c];
        out[tid] = s;
    }
    __global__ void rowstart(float *out, const float *A, int n) {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        float s = 0.0f;
        for (int k = row * n; k < row * n + n; k += 2)
            s += A[k] * A[k + 1];
        out[row] = s;
    }
    __global__ void unknown(float *d, const float *a, const int *off, int n) {
        int tid = blockIdx.x * blockDim.x + threadIdx.x;
        for (int i = tid + 1; i < n; i *= 2)
            d[i] = a[i];
        int s = off[tid];
        for (int j = s; j < s + 8; j++)
            d[j] = a[j];
    }
"""


@pytest.fixture(scope="module")
def accesses(tmp_path_factory):
    path = tmp_path_factory.mktemp("loops") / "k.cu"
    path.write_text(textwrap.dedent(SOURCE))
    prog = load_program(str(path))

    def of(kernel, target="sm_90"):
        return [a for a in analyze_kernel(prog.kernel(kernel), get_target(target)).as_dict()["accesses"]]
    return of


def reuse_scopes(access):
    return {(r["scope"], r.get("dimension")) for r in access["reuse"]}


@pytest.mark.parametrize("kernel", ["strided", "folded"])
def test_a_thread_dependent_start_with_a_constant_step_is_coalesced_not_broadcast(accesses, kernel):
    for a in accesses(kernel):
        assert a["kind"] == "loop"
        assert a["coalesced"] and not a["broadcast"] and a["efficiency"] == 1.0
        assert ("threads", "x") not in reuse_scopes(a)
        # `folded` starts at threadIdx.x: every block walks the same elements (true sharing between blocks)
        blocks = kernel == "folded"
        assert (("blocks", "x") in reuse_scopes(a)) == blocks
        if a["mode"] == "read":
            assert a["sharing"]["x"]["shared"] == ("yes" if blocks else "no")


def test_an_inner_loop_starting_at_a_thread_dependent_iterator_moves_with_the_thread(accesses):
    read = next(a for a in accesses("nested") if a["mode"] == "read")
    assert not read["broadcast"]
    # thread t reads t..t+3, thread t+1 reads t+1..t+4: neighbours share elements over the loop, not all
    assert ("threads-over-loop", "x") in reuse_scopes(read) and ("threads", "x") not in reuse_scopes(read)
    assert read["sharing"]["x"]["shared"] == "overlap"


def test_a_uniform_start_is_still_a_broadcast(accesses):
    x = next(a for a in accesses("uniform") if a["array"] == "x")
    assert x["broadcast"] and ("threads", "x") in reuse_scopes(x)
    assert x["sharing"]["x"]["shared"] == "yes"


def test_a_multiplicative_or_unknown_per_thread_start_is_unresolved(accesses):
    got = [a for a in accesses("unknown") if a["array"] in ("a", "d")]
    assert len(got) == 4 and all(a["kind"] == "unresolved" for a in got)
    assert all(not a.get("broadcast") for a in got)


ROW_FROM_ITS_START = """
__global__ void rowsum(const float *A, float *out, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float s = 0.0f;
        for (int k = r * 512; k < r * 512 + 512; k++)
            s += A[k];
        out[r] = s;
    }
}
"""


def test_a_loop_from_the_row_start_is_split_a_warp_per_row_and_matches_the_naive_kernel(tmp_path):
    """`A[k]` with k from r*512 runs along the row, strided across outputs: the warp form (coalesced), not
    the columns form that the bare iterator (no thread id in `k`) suggested."""
    kernel = only(compile_text(tmp_path, ROW_FROM_ITS_START, bindings={"rows": 64}))
    applied = merge_decisions(kernel, "applied")
    assert any("a warp per output reads it coalesced" in reason for reason in applied), applied
    assert "__shfl_down_sync" in kernel_source(kernel.optimized.funcdef)
    assert_equivalent(kernel, {"rows": 37}, 37)


def test_a_start_with_its_own_sizes_reads_one_row_per_thread(accesses):
    """`k` from `row * n`: n appears only in the start; each thread walks its own row, 32 sectors a
    request (neighbouring rows are n apart), with reuse along the loop."""
    for a in (a for a in accesses("rowstart") if a["array"] == "A"):
        assert a["kind"] == "loop" and not a["coalesced"] and not a["broadcast"]
        assert a["sectors_per_request"] == 32
        assert ("loop", None) in reuse_scopes(a) and ("threads", "x") not in reuse_scopes(a)
