"""The partition pass (paper §3.8): detection (camping / not camping), the diagonal block order (a bijection
on any grid, pure Python), the rotated loop start (exact at ragged sizes), on by default on g80, only when
named in --passes on sm_90 (else a note), equivalence in the emulator at non-square and ragged sizes with
the race check, nvcc without spills, and --passes switching each pass off."""
from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.partition import camps_between_blocks
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list, pipeline_order, registered_passes
from gpgpu_opt.passes.partition.diagonal import diagonal_order
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"
PROGRAM = ROOT / "tests" / "programs" / "transpose_rowsum.cu"

COPY = """
__global__ void copy(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i];
}
"""

STORES_IN_LOOP = """
__global__ void scatter_rows(const float *A, float *B, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        for (int c = 0; c < cols; c++)
            B[r * cols + c] = A[r * cols + c] + (c > 0 ? B[r * cols + c - 1] : 0.0f);
    }
}
"""


def compile_path(path: Path, target: str, passes: str | None = None, bindings=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, bindings or {})


def compile_text(tmp_path: Path, source: str, target: str, passes: str | None = None, bindings=None):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return compile_path(path, target, passes, bindings)


def partition_decisions(kernel, action: str) -> list[str]:
    return [d.reason for d in kernel.context.log.decisions if d.pass_name == "partition" and d.action == action]


def assert_equivalent(kernel, sizes: dict, space: tuple[int, int]) -> None:
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, Case(sizes=sizes, global_space=space),
                      seed=5, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


# -- detection ----------------------------------------------------------------------------------------------
def camping(path_or_text, target="g80", block=(16, 16), bindings=None, tmp_path=None):
    if tmp_path is not None:
        (tmp_path / "k.cu").write_text(textwrap.dedent(path_or_text))
        path_or_text = tmp_path / "k.cu"
    program = load_program(str(path_or_text))
    analysis = analyze_kernel(program.kernels[0], get_target(target), block, bindings or {})
    width = get_target(target).partition_camping[0]
    return {f"{r.access.array}": camps_between_blocks(r.access, r.partition, width) for r in analysis.reports}


def test_the_strided_read_of_transpose_camps_on_g80_and_its_coalesced_write_does_not():
    found = camping(INPUTS / "transpose.cu", bindings={"rows": 4096, "cols": 4096})
    assert found == {"in": True, "out": False}


def test_a_contiguous_copy_does_not_camp(tmp_path):
    assert camping(COPY, block=(256, 1), tmp_path=tmp_path) == {"in": False, "out": False}


def test_nothing_camps_on_a_target_that_hashes_addresses():
    program = load_program(str(INPUTS / "transpose.cu"))
    analysis = analyze_kernel(program.kernels[0], get_target("sm_90"), (16, 16))
    assert all(r.partition is None for r in analysis.reports)


# -- the diagonal order is a bijection ----------------------------------------------------------------------
@pytest.mark.parametrize("gx", [1, 2, 3, 5, 8, 13, 32])
@pytest.mark.parametrize("gy", [1, 2, 3, 4, 7, 16, 33])
def test_the_diagonal_order_is_a_bijection_on_any_grid(gx, gy):
    tiles = [diagonal_order(bx, by, gx, gy) for by in range(gy) for bx in range(gx)]
    assert sorted(tiles) == [(x, y) for x in range(gx) for y in range(gy)]


@pytest.mark.parametrize("g", [1, 2, 5, 16])
def test_on_a_square_grid_it_is_the_papers_formula(g):
    for by in range(g):
        for bx in range(g):
            assert diagonal_order(bx, by, g, g) == ((bx + by) % g, bx)


# -- g80: on by default --------------------------------------------------------------------------------------
def test_g80_transpose_is_remapped_and_equivalent_on_a_non_square_grid():
    kernel = compile_path(INPUTS / "transpose.cu", "g80").kernels[0]
    (reason,) = partition_decisions(kernel, "applied")
    assert "diagonal block order" in reason and "bijection" in reason
    # 40 x 72 outputs in 16 x 16 tiles: a 3 x 5 grid, ragged in both directions.
    assert_equivalent(kernel, {"rows": 40, "cols": 72}, (40, 72))
    assert_equivalent(kernel, {"rows": 37, "cols": 45}, (37, 45))


def test_g80_mv_loop_is_rotated_exactly_at_ragged_sizes():
    kernel = compile_path(INPUTS / "mv.cu", "g80").kernels[0]
    (reason,) = partition_decisions(kernel, "applied")
    assert "'c0' loop rotated per block" in reason and "sum adds the same terms in another order" in reason
    for rows, cols in ((37, 45), (100, 16), (70, 161)):
        assert_equivalent(kernel, {"rows": rows, "cols": cols}, (rows, 1))


def test_g80_mv_is_rotated_and_prefetched_again_on_the_rotated_loop():
    """Prefetch runs first (the paper's order); its registers carry one step into the next, so partition
    rotates the loop as it was before prefetching and prefetches the rotated loop again (none of it is lost)."""
    result = compile_path(INPUTS / "mv.cu", "g80")
    kernel = result.kernels[0]
    prefetch = [d.reason for d in kernel.context.log.decisions if d.pass_name == "prefetch" and d.action == "applied"]
    (reason,) = partition_decisions(kernel, "applied")
    assert prefetch and "the prefetch of A -> tile_A, x -> tile_x is made again on the rotated loop" in reason
    text = result.output
    assert "const int c0 = blockIdx.x % c0_steps * 16;" in text          # the first step, under 0 < c0_steps
    assert "if (c0_step_next < c0_steps) {" in text                       # no load after the last step
    assert "const int c0_next = (c0_step_next + blockIdx.x) % c0_steps * 16;" in text
    assert "float A_next[16];" in text and text.count("__syncthreads();") == 2


ROTATED_STAGED = """
__global__ void rotated_mv(const float *A, const float *x, float *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ float tile_A[32][17];
    __shared__ float tile_x[16];
    float sum = 0;
    const int c0_steps = (cols + 15) / 16;
    for (int c0_step = 0; c0_step < c0_steps; c0_step++) {
        const int c0 = (c0_step + blockIdx.x) % c0_steps * 16;
        for (int rr = 0; rr < 32; rr += 2)
            tile_A[rr + threadIdx.x / 16][threadIdx.x % 16] = (blockIdx.x * 32 + rr + threadIdx.x / 16 < rows && c0 + threadIdx.x % 16 < cols) ? A[(blockIdx.x * 32 + rr + threadIdx.x / 16) * cols + c0 + threadIdx.x % 16] : 0.0f;
        if (threadIdx.x < 16)
            tile_x[threadIdx.x] = (blockIdx.x * 32 < rows && c0 + threadIdx.x < cols) ? x[c0 + threadIdx.x] : 0.0f;
        __syncthreads();
        if (r < rows) {
            for (int c = c0; c < c0 + 16 && c < cols; c++)
                sum += tile_A[threadIdx.x][c - c0] * tile_x[c - c0];
        }
        __syncthreads();
    }
    if (r < rows)
        y[r] = sum;
}

void run(const float *A, const float *x, float *y, int rows, int cols)
{
    rotated_mv<<<(rows + 31) / 32, 32>>>(A, x, y, rows, cols);
}
"""


@pytest.mark.parametrize("target, shape", [("g80", "A_next[rr / 2] = "), ("sm_90", "__pipeline_memcpy_async(")])
def test_prefetch_takes_a_rotated_loop_and_loads_its_rotated_next_step(tmp_path, target, shape):
    """The step's positions (`c0` from `c0_step`) are computed for the step a load is for, under that
    step's condition (so `% c0_steps` is never taken of 0 steps), in both of prefetch's forms."""
    result = compile_text(tmp_path, ROTATED_STAGED, target, "prefetch")
    kernel = result.kernels[0]
    assert [d.action for d in kernel.context.log.decisions if d.pass_name == "prefetch"] == ["applied"]
    text = result.output
    assert shape in text and "if (0 < c0_steps) {" in text and "if (c0_step_next < c0_steps) {" in text
    assert "const int c0_next = (c0_step_next + blockIdx.x) % c0_steps * 16;" in text
    for rows, cols in ((37, 45), (100, 16), (70, 161), (5, 0)):
        # the naive kernel here is rotated already: its subscripts do not tell the arrays' sizes
        extents = {"A": max(1, rows * cols), "x": max(1, cols), "y": rows}
        # the program's launch: blocks of 32 (normalize reads its `blockIdx.x * 32` as `blockIdx.x * blockDim.x`)
        case = Case(sizes={"rows": rows, "cols": cols}, global_space=(rows, 1), block=(32, 1),
                    grid=(max(1, -(-rows // 32)), 1), extents=extents)
        result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5,
                          device_functions={}, check_races=True)
        assert result.ok, result.error or result.mismatches


def test_a_loop_whose_iterations_depend_on_each_other_is_not_rotated(tmp_path):
    kernel = compile_text(tmp_path, STORES_IN_LOOP, "g80", "partition", {"cols": 4096}).kernels[0]
    assert not partition_decisions(kernel, "applied")
    (reason,) = partition_decisions(kernel, "skipped")
    assert "stores to B[r * cols + c]" in reason


# -- sm_90: only when named --------------------------------------------------------------------------------
def test_sm90_says_how_to_ask_for_it_and_leaves_the_kernel():
    kernel = compile_path(INPUTS / "transpose.cu", "sm_90").kernels[0]
    assert "partition" in kernel.passes_run and not partition_decisions(kernel, "applied")
    (note,) = partition_decisions(kernel, "skipped")
    assert note.startswith("not applied: sm_90 hashes addresses") and "--passes ...,partition" in note


def test_sm90_applies_it_when_named_explicitly(tmp_path):
    result = compile_path(INPUTS / "transpose.cu", "sm_90", "coalesce,merge,partition")
    kernel = result.kernels[0]
    (reason,) = partition_decisions(kernel, "applied")
    assert "asked for with --passes although sm_90 hashes addresses" in reason
    text = result.output
    assert "const unsigned int block_x = (block_id / gridDim.y + block_y) % gridDim.x;" in text
    # 40 x 72 outputs in 32 x 32 tiles: a 2 x 3 grid.
    assert_equivalent(kernel, {"rows": 40, "cols": 72}, (40, 72))
    if shutil.which("nvcc"):
        out = tmp_path / "t.cu"
        out.write_text(text)
        proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", str(tmp_path / "t.cubin"),
                               str(out)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"0 bytes spill stores, 0 bytes spill loads", proc.stdout + proc.stderr)


def test_the_default_pipeline_names_no_pass_and_a_list_names_its_passes():
    assert parse_pass_list(None).named == frozenset()
    assert parse_pass_list("none") == [] and parse_pass_list("none").named == frozenset()
    assert parse_pass_list("merge,partition").named == {"merge", "partition"}


@pytest.mark.parametrize("left_out", [p for p in ("vectorize", "coalesce", "merge", "prefetch", "partition")])
def test_each_pass_can_be_left_out(left_out):
    available = registered_passes()
    wanted = [p for p in pipeline_order() if p in available and p not in ("restrict", "normalize", left_out)]
    passes = parse_pass_list(",".join(wanted))
    assert left_out not in passes and passes == [p for p in pipeline_order() if p in available and p != left_out]


# -- a whole program as people write it ---------------------------------------------------------------------
def test_whole_program_on_g80_gets_both_fixes():
    result = compile_path(PROGRAM, "g80")
    by_name = {k.naive.name: k for k in result.kernels}
    assert "diagonal block order" in partition_decisions(by_name["transpose_kernel"], "applied")[0]
    assert "'j0' loop rotated per block" in partition_decisions(by_name["rowsum_kernel"], "applied")[0]
    assert_equivalent(by_name["rowsum_kernel"], {"ni": 70, "nj": 161}, (70, 1))
