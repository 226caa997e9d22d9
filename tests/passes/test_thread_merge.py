"""The merge pass's thread merge (paper §3.5 Fig. 6-7, one thread computes several outputs): vv's shape,
equivalence with the race check at ragged sizes, `--merge` requests, barriers, what it declines and why,
and nvcc."""
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
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"

OUTER = """
__global__ void outer(const float *a, const float *b, float *C, int w, int h)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < h && j < w) {
        float scale = a[i] * 2.0f;
        C[i * w + j] = C[i * w + j] + scale * b[j];
    }
}
"""

#: A barrier and a shared array: the copies of a thread would each need their own slot and the barrier once.
BARRIER = """
__global__ void rows_shifted(const float *a, const float *b, float *C, int w, int h)
{
    __shared__ float row[16][16];
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    row[threadIdx.y][threadIdx.x] = a[i] * b[j];
    __syncthreads();
    C[i * w + j] = row[threadIdx.y][(threadIdx.x + 1) % 16];
}
"""


def compile_text(tmp_path: Path, source: str, target: str = "sm_90", passes: str | None = None, merge=None):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return compile_file(path, target, passes, merge)


def compile_file(path: Path, target: str = "sm_90", passes: str | None = None, merge=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    request = MergeRequest.parse(merge) if merge else None
    # The merge without the vectorize pass before it (which widens vv and OUTER on sm_90: test_vectorize.py).
    return compile_with(program, get_target(target), parse_pass_list(passes or "coalesce,merge"), diagnostics,
                           merge_request=request, validate=True)


def only(result):
    (kernel,) = result.kernels
    return kernel


def merge_decisions(kernel, action: str) -> list[str]:
    return [d.reason for d in kernel.context.log.decisions if d.pass_name == "merge" and d.action == action]


def assert_equivalent(kernel, sizes: dict, space: tuple[int, int]) -> None:
    """Every element of C compared, with the emulator's race check on."""
    case = Case(sizes=sizes, global_space=space)
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5,
                      device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches
    assert result.elements == space[0] * space[1]


def assert_nvcc_compiles(result, tmp_path: Path) -> str:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / "merged.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null", f"-I{INPUTS}",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "0 bytes spill stores" in proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


# -- vv, the paper's input -------------------------------------------------------------------------------
def test_vv_sm90_rows_per_thread_with_b_read_once(tmp_path):
    result = compile_file(INPUTS / "vv.cu")
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    # CHECK: the index of copy 0, the block covering 32 rows with 8 threads in y
    assert "const int idx = blockIdx.x * blockDim.x + threadIdx.x;" in text
    assert "const int idy = blockIdx.y * 32 + threadIdx.y;" in text
    # CHECK: B[idx] once, A and C per copy, 8 rows apart (a warp stays on one row: coalesced)
    assert text.count("= B[idx]") == 1 and "const float B_val = B[idx];" in text
    assert "float A_val[4];" in text and "A_val[r] = A[idy + 8 * r];" in text
    assert "float C_val[4];" in text and "C_val[r] = C[(idy + 8 * r) * 4096 + idx];" in text
    # CHECK-NEXT: all the loads of C before the first store
    assert text.index("C_val[r] = C[") < text.index("C[(idy + 8 * r) * 4096 + idx] = C_val[r] + A_val[r] * B_val;")
    assert text.count("#pragma unroll") == 3 and text.count("for (int r = 0; r < 4; r++)") == 3
    # CHECK-NOT: a guard (the stated 4096x4096 space is tiled by the 32x32 outputs of a block)
    assert " if " not in text and "__syncthreads" not in text
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 8), (32, 32))
    (why,) = [r for r in merge_decisions(k, "applied") if r.startswith("thread merge")]
    assert "B[idx] read once" in why and "in flight per SM" in why
    assert k.validation.status == "passed"
    usage = assert_nvcc_compiles(result, tmp_path)
    assert re.search(r"Used \d+ registers", usage)


def test_vv_g80_is_staged_then_merged_in_both_directions():
    """On g80 coalesce stages A[idy]; its blocks are then merged in x, and each thread takes 16 rows."""
    k = only(compile_file(INPUTS / "vv.cu", "g80"))
    applied = merge_decisions(k, "applied")
    assert any(r.startswith("thread-block merge: 16 blocks") for r in applied), applied
    text = kernel_source(k.optimized.funcdef)
    # CHECK: B[idx] read once for the 16 rows; the staged A values per row
    assert text.count("= B[idx];") == 1 and "tile_A[16][1]" in text
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((256, 1), (256, 16))
    assert k.validation.status == "passed"


def test_vv_merge_request_y8(tmp_path):
    k = only(compile_file(INPUTS / "vv.cu", merge="y=8"))
    text = kernel_source(k.optimized.funcdef)
    assert "float C_val[8];" in text and "const int idy = blockIdx.y * 64 + threadIdx.y;" in text
    assert k.optimized.launch.outputs_per_block == (32, 64)
    assert any("asked for with --merge x=1,y=8" in r for r in merge_decisions(k, "applied"))
    assert k.validation.status == "passed"


# -- equivalence at ragged sizes ---------------------------------------------------------------------------
@pytest.mark.parametrize("w,h", [(45, 37), (33, 70), (70, 9)])
def test_guarded_kernel_equivalent_at_ragged_sizes(tmp_path, w, h):
    k = only(compile_text(tmp_path, OUTER))
    text = kernel_source(k.optimized.funcdef)
    assert "if (i < h && j < w)" in text                  # the shared guard, copy 0's
    assert "if (i + 8 * r < h)" in text                   # each copy's own row guard
    assert text.count("= b[j]") == 1 and "float scale[4];" in text
    assert k.optimized.launch.block == (32, 8)
    assert_equivalent(k, {"w": w, "h": h}, (w, h))


@pytest.mark.parametrize("request_", ["y=8", "y=2", "x=2", "x=2,y=4"])
def test_merge_requests_equivalent(tmp_path, request_):
    k = only(compile_text(tmp_path, OUTER, merge=request_))
    assert any("--merge" in r for r in merge_decisions(k, "applied")), merge_decisions(k, "skipped")
    factors = MergeRequest.parse(request_)
    launch = k.optimized.launch
    assert launch.outputs_per_block == (launch.block[0] * factors.x, launch.block[1] * factors.y)
    assert_equivalent(k, {"w": 45, "h": 37}, (45, 37))


def test_nvcc_compiles_ragged_forms(tmp_path):
    assert_nvcc_compiles(compile_text(tmp_path, OUTER), tmp_path)
    assert_nvcc_compiles(compile_text(tmp_path, OUTER, merge="x=2,y=4"), tmp_path)


# -- what it declines ----------------------------------------------------------------------------------------
def test_a_kernel_with_a_barrier_is_declined_with_a_note(tmp_path):
    k = only(compile_text(tmp_path, BARRIER, passes="merge", merge="y=2"))
    assert not merge_decisions(k, "applied")
    (why,) = merge_decisions(k, "skipped")
    assert "shared memory" in why, why
    assert kernel_source(k.optimized.funcdef).count("__syncthreads();") == 1


@pytest.mark.parametrize("change,why", [
    (("C[i * w + j] = C[i * w + j] + scale * b[j];", "C[i * w + j] = a[threadIdx.y] * b[j];"),
     "depends on the block shape"),
    (("C[i * w + j] = C[i * w + j] + scale * b[j];", "C[j] = scale * b[j];"),
     "does not move with the global y index"),
])
def test_unsafe_kernels_are_declined_with_a_note(tmp_path, change, why):
    k = only(compile_text(tmp_path, OUTER.replace(*change), passes="merge", merge="y=4"))
    assert not merge_decisions(k, "applied")
    assert any(why in r for r in merge_decisions(k, "skipped")), merge_decisions(k, "skipped")


def test_a_kernel_sharing_nothing_is_left_without_a_note(tmp_path):
    source = OUTER.replace("scale * b[j]", "scale").replace("a[i] * 2.0f", "a[i * w + j] * 2.0f")
    k = only(compile_text(tmp_path, source))
    assert not [d for d in k.context.log.decisions if d.pass_name == "merge"]


def test_a_request_for_a_dimension_the_kernel_lacks_is_declined(tmp_path):
    source = "__global__ void scale(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; " \
             "if (i < n) x[i] = 2.0f * x[i]; }"
    k = only(compile_text(tmp_path, source, merge="y=4"))
    assert any("has no y dimension" in r for r in merge_decisions(k, "skipped")), k.context.log.decisions


# -- a kernel coalesce staged (paper Fig. 5 then Fig. 7: g80 mm merged in x by blocks, in y by threads) -------
def _staged_mm(merge=None):
    return next(k for k in compile_file(INPUTS / "mm.cu", "g80", merge=merge).kernels if k.naive.name == "mm")


def test_g80_mm_staged_merge_has_the_shape_of_the_papers_figure_7():
    k = _staged_mm()
    text = kernel_source(k.optimized.funcdef)
    # CHECK: 16 blocks merged in x share one A tile row; the tile replicated per merged row, staged once per row
    assert "__shared__ float tile_A[16][256];" in text and "float sum[16];" in text
    assert "tile_A[r][threadIdx.x] = (row + r < n && " in text and "A[(row + r) * n + k0 + threadIdx.x]" in text
    # CHECK: B[k * n + col] read once into a register for the 16 rows
    assert text.count("= B[k * n + col];") == 1 and "sum[r] += A_val[r] * B_val;" in text
    # CHECK: the barriers kept once each
    assert text.count("__syncthreads();") == 2
    assert "C[(row + r) * n + col] = sum[r];" in text
    launch = k.optimized.launch
    assert (launch.block, launch.outputs_per_block) == ((256, 1), (256, 16))
    for n in (37, 16):
        result = run_case(k.naive, k.optimized, k.context.facts.naive_block, Case(sizes={"n": n}, global_space=(n, n)),
                          seed=2, device_functions={}, check_races=True)
        assert result.ok and result.elements == n * n, result.error or result.mismatches


def test_staged_merge_requests():
    # y alone: rows per thread only, the blocks not merged
    k = _staged_mm("y=4")
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((16, 1), (16, 4))
    result = run_case(k.naive, k.optimized, k.context.facts.naive_block, Case(sizes={"n": 23}, global_space=(23, 23)),
                      seed=2, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches
    # x alone: blocks merged, one row per thread
    k = _staged_mm("x=2")
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 1), (32, 1))
    assert "float sum[" not in kernel_source(k.optimized.funcdef)


def test_staged_merge_nvcc(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / "mm_fig7.cu"
    out.write_text(kernel_source(_staged_mm().optimized.funcdef))
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "0 bytes spill stores" in proc.stdout + proc.stderr, proc.stderr
