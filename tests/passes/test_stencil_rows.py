"""Stencil rows (the sm_90 form for small stencils): R consecutive rows per thread, the rows
the stencil's reads share sliding through registers; loads only where the naive thread of a row reads."""
from __future__ import annotations

import shutil
import subprocess
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
PROGRAMS = ROOT / "tests" / "programs"
INPUTS = ROOT / "inputs"


@pytest.fixture(scope="module", autouse=True)
def _rows_without_the_window():
    """The stencil window comes first where it applies (these kernels, on sm_90); the rows are what the merge
    pass makes where it does not, so test them with the window out of the list."""
    from gpgpu_opt.passes import merge

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(merge, "UNSTAGED", tuple(m for m in merge.UNSTAGED if m.name != "stencil_window"))
        yield


def compile_path(path: Path, target="sm_90", merge=None, passes=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, {},
                           merge_request=MergeRequest.parse(merge) if merge else None)


def kernel(result, name=None):
    return next(k for k in result.kernels if name is None or k.naive.name == name)


def assert_equivalent(k, sizes: dict, space: tuple[int, int]) -> None:
    result = run_case(k.naive, k.optimized, k.context.facts.naive_block, Case(sizes=sizes, global_space=space),
                      seed=7, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


@pytest.fixture(scope="module")
def blur():
    return compile_path(PROGRAMS / "blur3x3.cu")


def test_blur_keeps_two_of_three_rows_in_registers(blur):
    k = kernel(blur)
    text = kernel_source(k.optimized.funcdef)
    assert "float in_rows[3][3];" in text and "const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * 4;" in text
    assert text.count("prev_row_loaded ? in_rows[") == 6                 # rows y-1 and y shift up
    assert "in_rows[2][2] = in[(y + 1) * w + (x + 1)];" in text          # row y+1 is the one new load
    assert "in_rows[0][0] = prev_row_loaded ? in_rows[1][0] : in[(y - 1) * w + (x - 1)];" in text
    assert "if (x >= 1 && x < w - 1 && y >= 1 && y < h - 1)" in text     # the guard, once per row
    assert "__syncthreads" not in text and "__shared__" not in text
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 8), (32, 32))
    for w, h in ((45, 37), (3, 3), (2, 5), (33, 70)):
        assert_equivalent(k, {"w": w, "h": h}, (w, h))


def test_merge_request_sets_the_rows_and_the_plus_shifts_only_its_column():
    k = kernel(compile_path(PROGRAMS / "jacobi2d.cu", merge="y=8"), "runJacobiCUDA_kernel1")
    text = kernel_source(k.optimized.funcdef)
    assert "* 8;" in text and "for (int r = 0; r < 8; r++)" in text
    assert text.count("prev_row_loaded ?") == 2                          # (i-1, j) and (i, j)
    assert_equivalent(k, {"n": 37}, (37, 37))


def test_pointers_that_may_alias_keep_one_output_per_thread():
    k = kernel(compile_path(INPUTS / "demosaic.cu"))
    assert "raw_rows" not in kernel_source(k.optimized.funcdef)
    assert any("no stencil rows" in d.reason and "__restrict__" in d.reason for d in k.context.log.decisions)


def test_g80_stages_the_halo_instead():
    k = kernel(compile_path(PROGRAMS / "blur3x3.cu", target="g80"))
    text = kernel_source(k.optimized.funcdef)
    assert "tile_in" in text and "in_rows" not in text


def test_without_coalesce_the_rows_are_still_reachable():
    k = kernel(compile_path(PROGRAMS / "blur3x3.cu", passes="restrict,normalize,merge"))
    assert "in_rows" in kernel_source(k.optimized.funcdef)


def test_blur_rows_compile_without_spills(blur, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / "blur.cu"
    out.write_text(blur.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null", f"-I{PROGRAMS}",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "0 bytes spill stores" in proc.stdout + proc.stderr


def test_imregionmax_window_loops_index_the_registers_and_rows_without_a_guard_always_shift():
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / "imregionmax.cu"), diagnostics=diagnostics)
    k = kernel(compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, {},
                               assume_restrict=True))
    text = kernel_source(k.optimized.funcdef)
    assert "float A_rows[3][3];" in text and "float a = A_rows[i][j];" in text
    assert "float center = A_rows[1][1];" in text
    assert text.count("(r > 0) ? A_rows[") == 6 and "prev_row_loaded" not in text
    assert k.optimized.launch.outputs_per_block == (32, 32)     # its stated thread space is whole blocks of 32
    result = run_case(k.naive, k.optimized, k.context.facts.naive_block, Case(sizes={}, global_space=(64, 32)),
                      seed=7, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches
