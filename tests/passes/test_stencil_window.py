"""The merge pass's stencil window (issue 9): V x R outputs per thread of a small stencil from a register
window (one row load each, float4 where aligned, neighbouring columns by warp shuffles): its shape,
equivalence at ragged sizes in the emulator with the race check, what it leaves alone, and nvcc."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.test_split_loop import compile_file, compile_text, merge_decisions, only
from gpgpu_opt.verify import Case, run_case

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"
PROGRAMS = ROOT / "tests" / "programs"

CROSS = """
__global__ void cross(const float *A, float *B, int n, int m)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x > 0 && x < n - 1 && y >= 1 && y < m - 1)
        B[y * n + x] = A[y * n + x] + A[y * n + x - 1] + A[y * n + x + 1] + A[(y - 1) * n + x] + A[(y + 1) * n + x];
}
"""


def assert_nvcc_compiles(result, tmp_path: Path) -> None:
    """Builds for sm_90 with no spills and no stack frame (the window stays in registers)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / "window_out.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", "/dev/null", f"-I{INPUTS}",
                           f"-I{PROGRAMS}", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in proc.stdout + proc.stderr
    assert not re.search(r"[1-9]\d* bytes spill", proc.stdout + proc.stderr)


def kernel_named(result, name):
    return next(k for k in result.kernels if k.naive.name == name)


def assert_equivalent(kernel, sizes: dict, space: tuple[int, int]) -> None:
    case = Case(sizes=sizes, global_space=space)
    result = run_case(kernel.naive, kernel.optimized, kernel.context.naive_block, case, seed=5, device_functions={})
    assert result.ok, result.error or result.mismatches


def test_blur_float4_rows_and_shuffles(tmp_path):
    result = compile_file(PROGRAMS / "blur3x3.cu")
    k = kernel_named(result, "blur3x3")
    text = kernel_source(k.optimized.funcdef)
    assert "const int x0 = (blockIdx.x * 32 + threadIdx.x) * 4;" in text
    assert "const int y0 = (blockIdx.y * 8 + threadIdx.y) * 2;" in text
    assert "float in_win[4][6];" in text                       # rows: 2 + reach 2, columns: 4 + 2
    assert "if (w % 4 == 0 && row_read && x0 + 3 < w)" in text     # the pitch checked at run time
    assert "const float4 quad = *((const float4 *) (&in[row * w + x0]));" in text
    assert "in_win[i][0] = __shfl_up_sync(0xffffffffu, in_win[i][4], 1);" in text
    assert "in_win[i][5] = __shfl_down_sync(0xffffffffu, in_win[i][1], 1);" in text
    assert "sum += in_win[r + dy + 1][v + dx + 1];" in text
    assert "__shared__" not in text and "__syncthreads" not in text
    # The shuffles come before any guard: the window loop is at the top level.
    assert text.index("__shfl_up_sync") < text.index("if (x >= 1")
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 8), (128, 16))
    for n in (37, 45, 70):
        assert_equivalent(k, {"w": n, "h": n - 3}, (n, n - 3))
    assert_equivalent(k, {"w": 64, "h": 20}, (64, 20))          # a multiple of 4: the float4 path
    assert_nvcc_compiles(result, tmp_path)


def test_jacobi_cross_loads_only_what_naive_reads(tmp_path):
    """The 5-point cross reads no corner: the rows above and below are predicated on their own columns."""
    result = compile_file(PROGRAMS / "jacobi2d.cu")
    k = kernel_named(result, "runJacobiCUDA_kernel1")
    text = kernel_source(k.optimized.funcdef)
    assert "float A_win[4][6];" in text
    assert text.count("const int row_read") == 3
    assert "__shfl_down_sync" in text and "__syncthreads" not in text
    assert any(r.startswith("stencil window, 4 x 2 outputs per thread") for r in merge_decisions(k, "applied"))
    for n in (37, 45, 70):
        assert_equivalent(k, {"n": n}, (n, n))
    assert_nvcc_compiles(result, tmp_path)


def test_demosaic_element_loads_without_alignment(tmp_path):
    result = compile_file(INPUTS / "demosaic.cu")
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "float4" not in text and "float raw_win[4][4];" in text
    assert "const int x0 = (blockIdx.x * 32 + threadIdx.x) * 2;" in text
    assert "raw_win[i][2] = __shfl_down_sync(0xffffffffu, raw_win[i][0], 1);" in text
    assert "if (y % 2 == 0)" in text                            # the branches kept, per copy
    assert any("alignment is not known" in r for r in merge_decisions(k, "applied"))
    for w, h in ((37, 45), (70, 9)):
        assert_equivalent(k, {"width": w, "height": h}, (w, h))


def test_cross_program_and_merge_request(tmp_path):
    result = compile_text(tmp_path, CROSS)
    k = only(result)
    assert "__shfl_up_sync" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"n": 45, "m": 37}, (45, 37))
    asked = only(compile_text(tmp_path, CROSS, bindings={"n": 48}))
    assert "float4" not in kernel_source(asked.optimized.funcdef)   # no launch: base alignment unknown


def test_left_alone_on_g80_and_without_passes(tmp_path):
    k = kernel_named(compile_file(PROGRAMS / "blur3x3.cu", "g80"), "blur3x3")
    assert "__shfl" not in kernel_source(k.optimized.funcdef)
    k = kernel_named(compile_file(PROGRAMS / "blur3x3.cu", passes="restrict,normalize,coalesce"), "blur3x3")
    assert "_win" not in kernel_source(k.optimized.funcdef)


def test_unguarded_without_stated_space_declines():
    k = only(compile_file(INPUTS / "imregionmax.cu"))
    assert "_win" not in kernel_source(k.optimized.funcdef)
    assert any("does not tile the naive 16x16 blocks" in r for r in merge_decisions(k, "skipped"))
