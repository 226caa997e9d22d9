"""The merge pass's 2-D register tiles (thread merge in x and y): the shape of mm's output, equivalence at
ragged sizes in the emulator for the matrix products people write (in-place gemm, transposed operands,
the same array on both sides, doubles), `--merge`, what it leaves alone and why, and nvcc."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.check.cases import Case, run_case
from tests.passes.test_split_loop import INPUTS, assert_nvcc_compiles, compile_file, compile_text, merge_decisions, only


def assert_equivalent_2d(kernel, sizes: dict, space: tuple[int, int]) -> None:
    case = Case(sizes=sizes, global_space=space)
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5, device_functions={})
    assert result.ok, result.error or result.mismatches
    assert result.elements >= space[0] * space[1]


#: The register tile as the merge pass leaves it (prefetch then double-buffers its tiles: test_prefetch.py).
NO_PREFETCH = "vectorize,coalesce,merge"


def test_mm_sm90_8x8_per_thread_with_both_operands_staged(tmp_path):
    result = compile_file(INPUTS / "mm.cu", passes=NO_PREFETCH)
    k = next(r for r in result.kernels if r.naive.name == "mm")
    text = kernel_source(k.optimized.funcdef)
    # CHECK: 8x8 accumulators per thread, a 16-step tile of 128 rows of A (padded) and of 128 columns of B
    assert "float sum[8][8];" in text
    assert "__shared__ __align__(16) float tile_A[16][132];" in text
    assert "__shared__ __align__(16) float tile_B[16][128];" in text
    # CHECK: a thread's rows and columns are two groups of 4, 64 apart (16-byte, conflict-free reads)
    assert "A_frag[r] = tile_A[kk][r / 4 * 64 + threadIdx.y * 4 + r % 4];" in text
    assert "B_frag[c] = tile_B[kk][c / 4 * 64 + threadIdx.x * 4 + c % 4];" in text
    assert "sum[r][c] += A_frag[r] * B_frag[c];" in text
    # CHECK: coalesced loads, all issued before the stores; one barrier after the stores, one after the use
    assert "A_staged[l] = (load_row < n && 0 < n && load_k < n) ? A[load_row * n + load_k] : 0;" in text
    assert text.count("__syncthreads();") == 2
    assert re.search(r"if \(k0 \+ kk >= n\)\s*break;", text)  # n is not known to divide the step
    # CHECK: each output keeps its guard on the store
    assert re.search(r"if \(row < n && col < n\) \{\s*C\[row \* n \+ col\] = sum\[r\]\[c\];", text)
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((16, 16), (128, 128))
    assert "__global__ __launch_bounds__(256, 2) void mm(" in result.output
    assert any("8x8 outputs per thread" in r for r in merge_decisions(k, "applied"))
    assert_equivalent_2d(k, {"n": 37}, (37, 37))
    assert_nvcc_compiles(result, tmp_path)


GEMM = """
__global__ void gemm(int ni, int nj, int nk, float alpha, float beta, const float *__restrict__ A,
                     const float *__restrict__ B, float *__restrict__ C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < ni && j < nj) {
        C[i * nj + j] *= beta;
        for (int k = 0; k < nk; k++)
            C[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j];
    }
}
"""


def test_in_place_gemm_with_rectangular_ragged_sizes(tmp_path):
    k = only(compile_text(tmp_path, GEMM))
    text = kernel_source(k.optimized.funcdef)
    assert "C_acc[r][c] = C[i * nj + j];" in text and "C_acc[r][c] *= beta;" in text
    assert "C_acc[r][c] += alpha * A_frag[r] * B_frag[c];" in text
    assert_equivalent_2d(k, {"ni": 37, "nj": 45, "nk": 29, "alpha": 1.5, "beta": 0.5}, (45, 37))
    assert_equivalent_2d(k, {"ni": 3, "nj": 130, "nk": 1, "alpha": 1.5, "beta": 0.5}, (130, 3))


def test_zero_trip_loop_keeps_beta_only(tmp_path):
    k = only(compile_text(tmp_path, GEMM))
    assert_equivalent_2d(k, {"ni": 20, "nj": 19, "nk": 0, "alpha": 1.5, "beta": 0.5}, (19, 20))


SYRK_T = """
__global__ void syrk_t(int n, int m, const double *__restrict__ A, double *__restrict__ C)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        double acc = 0.0;
        for (int k = 0; k < m; k++)
            acc += A[k * n + row] * A[k * n + col];
        C[row * n + col] = acc;
    }
}
"""


def test_transposed_operands_of_one_array_in_double(tmp_path):
    """A^T A: both operands come from A, each contiguous along its output axis (loaded row-wise). Doubles
    take twice the registers: 4x4 outputs per thread. (On sm_80, which has no FP64 mma.sync.m16n8k8: on sm_90
    doubles take the tensor-core tile, test_mma_tile.py.)"""
    k = only(compile_text(tmp_path, SYRK_T, target="sm_80", passes=NO_PREFETCH))
    text = kernel_source(k.optimized.funcdef)
    assert "__shared__ __align__(16) double tile_A[16][64];" in text
    assert "__shared__ __align__(16) double tile_A2[16][64];" in text
    assert "double acc[4][4];" in text
    assert "tile_A[e / 64][e % 64] = A_staged[l];" in text
    assert_equivalent_2d(k, {"n": 33, "m": 18}, (33, 33))


def test_merge_request_picks_the_tile_and_rejects_other_factors(tmp_path):
    path = tmp_path / "gemm.cu"
    path.write_text(GEMM)
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.frontend import load_program
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with
    from gpgpu_opt.targets import get_target

    def with_request(request):
        program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
        return only(compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                                    merge_request=request))

    k = with_request(MergeRequest(x=8, y=4))
    text = kernel_source(k.optimized.funcdef)
    assert "float C_acc[4][8];" in text and k.optimized.launch.outputs_per_block == (128, 64)
    assert any("--merge x=8,y=4" in r for r in merge_decisions(k, "applied"))
    assert_equivalent_2d(k, {"ni": 37, "nj": 45, "nk": 29, "alpha": 1.5, "beta": 0.5}, (45, 37))
    k = with_request(MergeRequest(x=2, y=2))
    assert any("register tile takes 4 or 8" in r for r in merge_decisions(k, "skipped"))
    # the next merge that can make 2x2 outputs per thread (the thread merge) then may: still the same results
    assert_equivalent_2d(k, {"ni": 37, "nj": 45, "nk": 29, "alpha": 1.5, "beta": 0.5}, (45, 37))


def test_small_known_sizes_take_the_4x4_tile(tmp_path):
    k = only(compile_text(tmp_path, GEMM, bindings={"ni": 512, "nj": 512, "nk": 512}))
    assert k.optimized.launch.outputs_per_block == (64, 64)
    assert any("64 blocks of 64x64" in r for r in merge_decisions(k, "applied"))


@pytest.mark.parametrize("source, reason", [
    ("""
__global__ void tri(int n, const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col <= row) {
        float s = 0.0f;
        for (int k = 0; k < n; k++)
            s += A[row * n + k] * B[k * n + col];
        C[row * n + col] = s;
    }
}
""", "ties the row to the column"),
    ("""
__global__ void aliased(int n, const float *A, const float *B, float *C)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float s = 0.0f;
        for (int k = 0; k < n; k++)
            s += A[row * n + k] * B[k * n + col];
        C[row * n + col] = s;
    }
}
""", "may alias"),
    ("""
__global__ void positional(int n, const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float s = 0.0f;
        for (int k = 0; k < n; k++)
            s += (k == row ? 2.0f : 1.0f) * A[row * n + k] * B[k * n + col];
        C[row * n + col] = s;
    }
}
""", "the output's position"),
])
def test_what_it_leaves_alone_says_why(tmp_path, source, reason):
    k = only(compile_text(tmp_path, source))
    assert k.optimized.launch is None or k.optimized.launch.outputs_per_block != (128, 128)
    assert any(reason in r for r in merge_decisions(k, "skipped")), merge_decisions(k, "skipped")


def test_g80_has_no_registers_for_a_tile(tmp_path):
    k = next(r for r in compile_file(INPUTS / "mm.cu", "g80").kernels if r.naive.name == "mm")
    # staged, blocks merged in x, then rows per thread (the paper's Fig. 7), not a 2-D register tile
    assert "tile_A[16][256]" in kernel_source(k.optimized.funcdef)
    assert not any(r.startswith("thread merge in x and y") for r in merge_decisions(k, "applied"))
    k = only(compile_text(tmp_path, GEMM, target="g80", passes="merge"))
    assert not any(r.startswith("thread merge in x and y") for r in merge_decisions(k, "applied"))
    assert any("registers per thread" in r for r in merge_decisions(k, "skipped"))


# -- the shape confirmed with ptxas ------------------------------------------------------------------------------
def test_mm_shape_is_confirmed_by_ptxas_where_nvcc_is_installed(tmp_path):
    from gpgpu_opt.nvcc import nvcc_available

    k = next(r for r in compile_file(INPUTS / "mm.cu").kernels if r.naive.name == "mm")
    (why, _) = merge_decisions(k, "applied")
    if nvcc_available():
        assert re.search(r"ptxas at 2 blocks per SM: 8x8 \d+ registers, 0 bytes of spills", why), why
    else:
        assert "nvcc not found, so the model's register count stands" in why


_NO_CTX = SimpleNamespace(options=SimpleNamespace(target=None))


def _usage(spills_by_source):
    def resource_usage(source, target):
        return {"k": {"registers": 128, "spill_store_bytes": spills_by_source[source]}}
    return resource_usage


def test_ptxas_spills_step_the_shape_down(monkeypatch):
    from gpgpu_opt.passes.merge import tile_shape

    monkeypatch.setattr(tile_shape, "nvcc_available", lambda: True)
    monkeypatch.setattr(tile_shape, "resource_usage", _usage({"8x8": 400, "4x4": 0}))
    build = lambda shape: f"{shape[0]}x{shape[1]}"   # noqa: E731
    shape, said = tile_shape.confirm_with_ptxas("k", _NO_CTX, [(8, 8), (4, 4)], build)
    assert shape == (4, 4)
    assert said == "ptxas at 2 blocks per SM: 8x8 128 registers, 400 bytes of spills; 4x4 128 registers, 0 bytes of spills"
    # a few spilled words are kept: two blocks per SM are worth more (bench/RESULTS.md)
    monkeypatch.setattr(tile_shape, "resource_usage", _usage({"8x8": 100, "4x4": 0}))
    assert tile_shape.confirm_with_ptxas("k", _NO_CTX, [(8, 8), (4, 4)], build)[0] == (8, 8)
    # a kernel that does not compile alone keeps the model's shape
    monkeypatch.setattr(tile_shape, "resource_usage", lambda source, target: None)
    shape, said = tile_shape.confirm_with_ptxas("k", _NO_CTX, [(8, 8), (4, 4)], build)
    assert shape == (8, 8) and "does not compile on its own" in said
