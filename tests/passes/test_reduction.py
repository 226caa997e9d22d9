"""The merge pass's reductions: the paper's tree over a global array moved into registers (shuffles, or a
shared array on g80 / for odd blocks), bit-exact, at ragged n (n = 1, n below one block); the atomic form
(register sums, one atomicAdd per block, a grid-stride loop only where the launch covers n) within verify's
tolerance for reordered sums; the race check; what is left alone and why; nvcc."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import ATOMIC_TOLERANCE, TOLERANCE, Case, optimized_launch, run_case

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "programs"

ATOMIC = """
__global__ void total(const float *a, float *result, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(result, a[i]);
}
"""

SHARED_TREE = """
__global__ void block_sum(const float *in, float *out, int n)
{
    __shared__ float s[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride)
            s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0)
        atomicAdd(out, s[0]);
}
"""


def compile_file(path: Path, target: str = "sm_90", block=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(None), diagnostics, {},
                           block_override=block)


def compile_text(tmp_path: Path, source: str, target: str = "sm_90", block=None):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return compile_file(path, target, block)


def kernel_named(result, name: str):
    return next(k for k in result.kernels if k.naive.name == name)


def merge_decisions(kernel, action: str) -> list[str]:
    return [d.reason for d in kernel.context.log.decisions if d.pass_name == "merge" and d.action == action]


def paper_tree(target: str, block=None):
    return kernel_named(compile_file(ROOT / "inputs" / "reduction.cu", target, block), "reduction")


def tree_case(n: int, threads: int) -> Case:
    """`threads` naive threads, each summing ceil(n / threads) strided elements (the input's comment)."""
    return Case(sizes={"n": n, "segSize": max(1, -(-n // threads))}, global_space=(threads, 1))


# ---- the paper's form ------------------------------------------------------------------------------------

def test_sm90_tree_runs_in_registers_with_the_naive_pairing():
    kernel = paper_tree("sm_90")
    (applied,) = merge_decisions(kernel, "applied")[:1]
    assert "bit-exact" in applied and "__shfl_down_sync" in applied
    text = kernel_source(kernel.optimized.funcdef)
    # CHECK: the segment loop keeps loads in flight; the tree is shuffles plus one value per warp in shared
    assert "#pragma unroll 8" in text
    assert text.count("__shfl_down_sync(0xffffffff, sum, s)") == 1
    assert "__shared__ float warp_sum[8];" in text
    assert "__shfl_down_sync(0xff, sum, s, 8)" in text
    # CHECK: no level reads global memory any more; each thread's partial[] stored where it stops adding
    assert "partial[i + s]" not in text
    assert re.search(r"if \(lane % \(2 \* s\) == s\)\s+partial\[i\] = sum;", text)
    assert "partial[blockIdx.x * blockDim.x + 32 * lane] = sum;" in text
    assert re.search(r"if \(tid == 0\) \{\s+partial\[i\] = sum;\s+out\[blockIdx.x\] = sum;", text)
    assert text.count("__syncthreads();") == 1
    assert kernel.optimized.launch.block == (256, 1)


def test_g80_tree_runs_in_shared_memory_without_shuffles():
    kernel = paper_tree("g80")
    text = kernel_source(kernel.optimized.funcdef)
    # CHECK: g80 has no shuffles: the naive tree level for level on a shared copy, partial[i] stored once
    assert "__shfl" not in text
    assert "__shared__ float tree[256];" in text
    assert "tree[threadIdx.x] += tree[threadIdx.x + s];" in text
    assert text.count("partial[i] = sum;") == 1
    assert "partial[i + s]" not in text
    assert "out[blockIdx.x] = sum;" in text


@pytest.mark.parametrize("target", ["sm_90", "g80"])
@pytest.mark.parametrize("n,threads", [(1, 256), (100, 256), (255, 256), (3001, 1024)])
def test_tree_is_bit_exact_at_ragged_sizes(target, n, threads):
    """Every add is the naive's, in its order: partial[] and out[] equal the naive's bit for bit, and the
    emulator's race check (on for both kernels) finds no race."""
    kernel = paper_tree(target)
    case = tree_case(n, threads)
    rng = np.random.default_rng(7)
    blocks = threads // 256
    args = {"in": rng.standard_normal(max(n, 1)).astype(np.float32),
            "partial": np.full(threads, np.nan, np.float32), "out": np.full(blocks, np.nan, np.float32),
            "n": n, "segSize": case.sizes["segSize"]}
    runs = {}
    for label, k, launch in (("naive", kernel.naive, ((256, 1, 1), (blocks, 1, 1))),
                             ("optimized", kernel.optimized, optimized_launch(kernel.optimized, (256, 1), case))):
        mine = {key: (v.copy() if isinstance(v, np.ndarray) else v) for key, v in args.items()}
        block, grid = launch
        run_kernel(k, grid, block, mine, check_races=True)
        runs[label] = mine
    for name in ("partial", "out"):
        assert np.array_equal(runs["naive"][name], runs["optimized"][name]), name


@pytest.mark.parametrize("block", [(64, 1), (96, 1), (32, 1)])
def test_tree_at_other_blocks_verifies(block):
    """Two warps (shuffles and a 2-value warp tree), three warps (not a power of two: the shared tree with
    the `tid + s < blockDim.x` guard kept), one warp (no shared memory)."""
    kernel = paper_tree("sm_90", block)
    text = kernel_source(kernel.optimized.funcdef)
    assert kernel.optimized.launch.block == block
    if block[0] == 96:
        assert "__shfl" not in text and "threadIdx.x + s < 96" in text
    elif block[0] == 32:
        assert "__shared__" not in text and "__syncthreads" not in text
    for n in (1, block[0] - 5, 7 * block[0] + 3):
        threads = block[0] * max(1, -(-n // (block[0] * 4)))
        result = run_case(kernel.naive, kernel.optimized, block, tree_case(n, threads), seed=5, device_functions={})
        assert result.ok, result.error or result.mismatches
        assert result.max_rel_error == 0.0


def test_tree_without_the_bound_guard_at_an_odd_block_is_left_with_a_note(tmp_path):
    source = (ROOT / "inputs" / "reduction.cu").read_text().replace(" && tid + s < blockDim.x", "")
    result = compile_text(tmp_path, source, block=(96, 1))
    kernel = kernel_named(result, "reduction")
    assert any("not a power of two" in s for s in merge_decisions(kernel, "skipped"))
    assert "partial[i] += partial[i + s]" in kernel_source(kernel.optimized.funcdef)


def test_tree_that_does_not_double_is_left_with_a_note(tmp_path):
    source = (ROOT / "inputs" / "reduction.cu").read_text().replace("s *= 2", "s += 1")
    kernel = kernel_named(compile_text(tmp_path, source), "reduction")
    assert any("does not double" in s for s in merge_decisions(kernel, "skipped"))
    assert "partial[i] += partial[i + s]" in kernel_source(kernel.optimized.funcdef)


# ---- the atomic form -------------------------------------------------------------------------------------

def assert_verifies_atomic(kernel, sizes: dict, elements: int, block=(256, 1)):
    result = run_case(kernel.naive, kernel.optimized, block, Case(sizes=sizes, global_space=(elements, 1)),
                      seed=11, device_functions={})
    assert result.ok, result.error or result.mismatches
    # verify's bound for reordered sums: TOLERANCE + ATOMIC_TOLERANCE * sqrt(terms), relative to the total
    assert result.max_rel_error <= TOLERANCE + ATOMIC_TOLERANCE * math.sqrt(max(elements, 1))


@pytest.mark.parametrize("n", [1, 100, 256, 4099])
def test_sum_program_becomes_a_grid_stride_loop_and_one_atomic_per_block(n):
    kernel = kernel_named(compile_file(PROGRAMS / "sum_atomic.cu"), "sum_kernel")
    (applied,) = merge_decisions(kernel, "applied")[:1]
    assert "summation order changes" in applied and "grid-stride" in applied
    text = kernel_source(kernel.optimized.funcdef)
    # CHECK: a grid-stride walk bounded by n, 8 elements a step with no exit between their loads, then the rest;
    # shuffles, one atomicAdd under threadIdx.x == 0
    assert "for (; first < n - 7 * stride; first += 8 * stride) {" in text and "#pragma unroll 8" in text
    assert "const int i = first + k * stride;" in text and "for (int i = first; i < n; i += stride)" in text
    assert text.count("atomicAdd(") == 1 and re.search(r"if \(threadIdx.x == 0\)\s+atomicAdd\(total, sum\);", text)
    assert kernel.optimized.launch.max_blocks_x
    assert_verifies_atomic(kernel, {"n": n}, n)


def test_dot_program_keeps_its_product_term():
    kernel = kernel_named(compile_file(PROGRAMS / "dot_atomic.cu"), "dot_kernel")
    text = kernel_source(kernel.optimized.funcdef)
    assert "sum += a[i] * b[i];" in text and text.count("atomicAdd(") == 1
    assert_verifies_atomic(kernel, {"n": 1000}, 1000)


@pytest.mark.parametrize("target", ["sm_90", "g80"])
def test_atomic_kernel_without_a_covering_launch_keeps_the_naive_grid(tmp_path, target):
    """No launch site proves the grid covers n: a grid-stride loop could visit elements no naive thread
    handles, so only the atomics merge (one per block)."""
    kernel = kernel_named(compile_text(tmp_path, ATOMIC, target), "total")
    text = kernel_source(kernel.optimized.funcdef)
    assert "gridDim" not in text and "naive grid kept" in merge_decisions(kernel, "applied")[0]
    assert ("__shfl_down_sync" in text) == (target == "sm_90")
    assert kernel.optimized.launch.max_blocks_x is None
    for n in (1, 200, 777):
        assert_verifies_atomic(kernel, {"n": n}, n)


def test_hand_written_shared_tree_is_left_alone_and_verifies(tmp_path):
    kernel = kernel_named(compile_text(tmp_path, SHARED_TREE), "block_sum")
    assert not merge_decisions(kernel, "applied")
    text = kernel_source(kernel.optimized.funcdef)
    assert "s[tid] += s[tid + stride];" in text and "atomicAdd(out, s[0]);" in text
    for n in (1, 300):
        assert_verifies_atomic(kernel, {"n": n}, -(-n // 256) * 256)


# ---- nvcc ------------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_reductions_build_for_sm90_without_spills(tmp_path):
    sources = [kernel_source(paper_tree("sm_90").optimized.funcdef),
               kernel_source(kernel_named(compile_file(PROGRAMS / "sum_atomic.cu"), "sum_kernel").optimized.funcdef)]
    path = tmp_path / "reductions.cu"
    path.write_text("\n".join(sources))
    build = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", str(path), "-o",
                            str(tmp_path / "r.cubin")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    assert "spill" in build.stdout + build.stderr
    assert not re.search(r"[1-9]\d* bytes spill", build.stdout + build.stderr)


@pytest.mark.parametrize("target", ["sm_90", "g80"])
def test_reduction_goldens_have_the_tree_out_of_global_memory(target):
    text = (ROOT / "golden" / target / "reduction.cu").read_text()
    # CHECK: the naive launch kept, the segment loop unrolled, no tree level in global memory
    assert "// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, global_y)" in text
    assert "#pragma unroll 8" in text and "partial[i + s]" not in text
    assert ("__shfl_down_sync" in text) == (target == "sm_90")
    assert ("__shared__ float warp_sum[8];" in text) == (target == "sm_90")
    assert ("__shared__ float tree[256];" in text) == (target == "g80")
    assert "out[blockIdx.x] = sum;" in text


def test_the_assumed_block_of_a_kernel_the_program_does_not_launch_is_said():
    """out[] holds one sum per block: with no launch in the file, the report says which block it assumed."""
    k = kernel_named(compile_file(ROOT / "inputs" / "reduction.cu"), "reduction")
    (launch,) = [r for r in merge_decisions(k, "applied") if r.startswith("the naive blocks")]
    assert "the program does not launch the kernel, so blocks of 256 are assumed" in launch
    k = kernel_named(compile_file(ROOT / "inputs" / "reduction.cu", block=(128, 1)), "reduction")
    assert not any("assumed" in r for r in merge_decisions(k, "applied"))
