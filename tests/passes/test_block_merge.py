"""Thread-block merge of coalesced kernels (paper §3.5): the merged shapes on g80 (mm, mv, conv, strsm),
the shared tile loaded once by the merged block's threads, equivalence with the race check at sizes that
do not divide the merged tile, `--merge`, the notes of merges not made, and nvcc without spills."""
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


def compile_file(path: Path, target: str = "g80", merge: MergeRequest | None = None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(None), diagnostics, {},
                           merge_request=merge)


def kernel(result, name):
    return next(k for k in result.kernels if k.naive.name == name)


def merge_decisions(k, action: str) -> list[str]:
    return [d.reason for d in k.context.log.decisions if d.pass_name == "merge" and d.action == action]


def assert_equivalent(k, sizes: dict, space: tuple[int, int]) -> None:
    """Emulated against the naive kernel, with the race check (a cooperative load that a sub-block
    read before the barrier would be a race)."""
    result = run_case(k.naive, k.optimized, k.context.facts.naive_block, Case(sizes=sizes, global_space=space),
                      seed=5, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def barriers(text: str) -> int:
    return text.count("__syncthreads();")


@pytest.fixture(scope="module")
def mm():
    return compile_file(INPUTS / "mm.cu")


def test_mm_merges_16_blocks_in_x_sharing_the_row_of_A(mm):
    k = kernel(mm, "mm")
    text = kernel_source(k.optimized.funcdef)
    # The blocks are merged first; the thread merge in y (Fig. 7, test_thread_merge.py) then gives each
    # thread 16 rows, so the tile has a row per merged row.
    assert k.optimized.launch.block == (256, 1) and k.optimized.launch.outputs_per_block == (256, 16)
    # CHECK: one tile of A's rows for the merged block, 16 tile steps wide, loaded once by all 256 threads
    assert "__shared__ float tile_A[16][256];" in text
    assert "for (int k0 = 0; k0 < n; k0 += 256)" in text
    assert text.count("tile_A[r][threadIdx.x] = ") == 1
    assert "threadIdx.x / " not in text and "threadIdx.x % " not in text   # no sub-block loading alone
    assert barriers(text) == 2
    assert "// merge: 16 blocks of 16x1 threads merged in x: they share tile_A" in text
    (applied, launch, _, _) = merge_decisions(k, "applied")
    assert "loaded by all 256 threads" in applied and "768 threads resident per SM against 128" in applied
    assert launch == "blocks of 256x1 threads, one thread per output"
    assert "// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, (global_y + 15) / 16)" in mm.output


@pytest.mark.parametrize("n", [37, 270])   # one partial merged block; two, the second partial
def test_mm_merged_is_equivalent_at_sizes_not_dividing_the_tile(mm, n):
    assert_equivalent(kernel(mm, "mm"), {"n": n}, (n, n))


def test_mv_merges_2_blocks_small_tiles_over_wide_steps():
    k = kernel(compile_file(INPUTS / "mv.cu"), "mv")
    text = kernel_source(k.optimized.funcdef)
    assert k.optimized.launch.block == (32, 1)
    # CHECK: A's rows per merged block, and the shared segment of x loaded once (by its first 16 threads
    # while the others load A)
    assert "__shared__ float tile_A[32][17];" in text and "__shared__ float tile_x[16];" in text
    assert re.search(r"if \(threadIdx.x < 16\)\s*tile_x\[threadIdx.x\] = ", text)
    assert text.count("tile_x[threadIdx.x] = ") == 1
    assert barriers(text) == 2
    assert_equivalent(k, {"rows": 45, "cols": 37}, (45, 1))


def test_merge_request_gives_the_factor():
    k = kernel(compile_file(INPUTS / "mv.cu", merge=MergeRequest(x=4)), "mv")
    assert k.optimized.launch.block == (64, 1)
    assert any("4 asked for with --merge" in r for r in merge_decisions(k, "applied"))
    assert_equivalent(k, {"rows": 70, "cols": 19}, (70, 1))


def test_merge_request_in_two_directions_merges_blocks_in_x_and_rows_per_thread():
    k = kernel(compile_file(INPUTS / "mm.cu", merge=MergeRequest(x=2, y=2)), "mm")
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 1), (32, 2))
    assert any("2 asked for with --merge" in r for r in merge_decisions(k, "applied"))
    assert_equivalent(k, {"n": 37}, (37, 37))


WEIGHTS = """
__global__ void weights(const float *in, const float *filt, float *out, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        float sum = 0.0f;
        for (int j = 0; j < 16; j++)
            for (int i = 0; i < 16; i++)
                sum += in[y * width + x] * filt[j * 16 + i];
        out[y * width + x] = sum;
    }
}
"""


def test_filter_shared_by_all_blocks(tmp_path):
    """conv's filter without its halo (conv itself stages the halo tile: tests/passes/test_halo.py)."""
    path = tmp_path / "weights.cu"
    path.write_text(WEIGHTS)
    k = kernel(compile_file(path), "weights")
    text = kernel_source(k.optimized.funcdef)
    assert k.optimized.launch.block == (256, 1)
    assert re.search(r"if \(threadIdx.x < 16\)\s*tile_filt\[threadIdx.x\] = ", text)
    assert barriers(text) == 2
    assert_equivalent(k, {"width": 37, "height": 5}, (37, 5))


def test_strsm_triangular_loop_merged():
    k = kernel(compile_file(INPUTS / "strsm.cu"), "strsm")
    assert k.optimized.launch.block == (256, 1)
    assert "k0 += 256" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"n": 19, "m": 300}, (300, 1))


def test_unguarded_kernel_without_a_launch_is_not_merged_and_says_why(tmp_path):
    # tmv with no stated thread space: its blocks might not divide it, and nothing guards the extra threads
    path = tmp_path / "tmv.cu"
    path.write_text((INPUTS / "tmv.cu").read_text().replace("#define globalDimX WIDTH_A\n", ""))
    k = kernel(compile_file(path), "tmv")
    assert k.optimized.launch.block == (16, 1)
    (note,) = merge_decisions(k, "skipped")
    assert note.startswith("blocks not merged: blocks of 16x1 kept (128 threads resident per SM): 2, 4, 8, 16, 32 in x:")
    assert "the program does not launch the kernel" in note


def test_a_stated_thread_space_the_merged_blocks_tile_is_merged():
    k = kernel(compile_file(INPUTS / "tmv.cu"), "tmv")
    assert k.optimized.launch.block == (256, 1)
    assert_equivalent(k, {}, (4096, 1))


def test_sm90_blocks_are_left_alone(tmp_path):
    """sm_90's coalesced blocks already fill an SM and its mm is register-tiled: no block merge."""
    path = tmp_path / "rows.cu"
    path.write_text(textwrap.dedent("""
        __global__ void scale_rows(const float *A, const float *s, float *out, int n) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x < n && y < n)
                out[y * n + x] = A[y * n + x] * s[y];
        }"""))
    k = compile_file(path, "sm_90").kernels[0]
    assert not [r for r in merge_decisions(k, "applied") if "thread-block merge" in r]


def test_merged_g80_kernels_compile_without_spills(mm, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    sources = [mm.output] + [compile_file(INPUTS / f"{n}.cu").output for n in ("mv", "conv")]
    for i, text in enumerate(sources):
        out = tmp_path / f"merged{i}.cu"
        out.write_text(text)
        proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null",
                               f"-I{INPUTS}", str(out)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "spill" not in proc.stdout + proc.stderr or " 0 bytes spill" in proc.stdout + proc.stderr
        assert not re.search(r"[1-9]\d* bytes spill", proc.stdout + proc.stderr)
