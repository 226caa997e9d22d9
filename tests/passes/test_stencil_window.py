"""The merge pass's stencil window: V x R outputs per thread of a small stencil from a register
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
from gpgpu_opt.check.cases import Case, run_case

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
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5, device_functions={})
    assert result.ok, result.error or result.mismatches


def test_blur_float4_rows_and_shuffles(tmp_path):
    result = compile_file(PROGRAMS / "blur3x3.cu")
    k = kernel_named(result, "blur3x3")
    text = kernel_source(k.optimized.funcdef)
    assert "const int x0 = (blockIdx.x * 32 + threadIdx.x) * 4;" in text
    assert "const int y0 = (blockIdx.y * 8 + threadIdx.y) * 4;" in text
    assert "float in_win[6][6];" in text                       # rows: 4 + reach 2, columns: 4 + 2
    assert "if (w % 4 == 0 && row_read && x0 + 3 < w)" in text     # the pitch checked at run time
    assert "const float4 quad = *((const float4 *) (&in[row * w + x0]));" in text
    # The warp's edge lanes load their halo columns with the rows; the others take them from the neighbouring
    # lanes once every row is loaded (a shuffle waits for its row: none may sit between two rows' loads).
    assert "in_win[i][0] = (threadIdx.x == 0 && row_read && x0 - 1 >= 0 && x0 - 1 < w) ? in[row * w + x0 - 1] : 0;" in text
    assert "in_win[i][5] = (threadIdx.x == 31 && row_read && x0 + 4 < w) ? in[row * w + x0 + 4] : 0;" in text
    assert "const float from_left = __shfl_up_sync(0xffffffffu, in_win[i][4], 1);" in text
    assert "const float from_right = __shfl_down_sync(0xffffffffu, in_win[i][1], 1);" in text
    assert "if (threadIdx.x != 0)\n            in_win[i][0] = from_left;" in text
    assert text.rindex("in[row * w") < text.index("__shfl_up_sync")
    assert "sum += in_win[r + dy + 1][v + dx + 1];" in text
    assert "__shared__" not in text and "__syncthreads" not in text
    # The shuffles come before any guard: the window loop is at the top level.
    assert text.index("__shfl_up_sync") < text.index("if (x >= 1")
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 8), (128, 32))
    # The interior: every copy's guard at the corners; the copies unguarded, one float4 store per row where
    # out's pitch allows (its base is cudaMalloc'd), else element stores; the guarded copies are the else path.
    assert "if (x0 >= 1 && x0 + 3 < w - 1 && y0 >= 1 && y0 + 3 < h - 1) {" in text
    assert "if (w % 4 == 0) {\n                *((float4 *)" in text
    assert "} else {\n                #pragma unroll\n                for (int v = 0; v < 4; v++)\n" \
           "                    out[(y0 + r) * w + x0 + v] = out_row[v];" in text
    assert "out_row[v] = sum / 9.0f;" in text
    assert "*((float4 *) (&out[(y0 + r) * w + x0])) = make_float4(out_row[0], out_row[1], out_row[2], out_row[3]);" \
        in text
    assert text.count("out[y * w + x] = sum / 9.0f;") == 1 and text.index("make_float4") < text.index("} else {\n        // the edges")
    interior = text[text.index("// interior"):text.index("// the edges")]
    assert "int x" not in interior and "int y" not in interior     # the guard and the store used them
    for n in (37, 45, 70):
        assert_equivalent(k, {"w": n, "h": n - 3}, (n, n - 3))
    assert_equivalent(k, {"w": 64, "h": 20}, (64, 20))          # a multiple of 4: float4 loads, the interior
    assert_equivalent(k, {"w": 68, "h": 37}, (68, 37))          # the interior with ragged rows
    assert_nvcc_compiles(result, tmp_path)


def test_jacobi_cross_loads_only_what_naive_reads(tmp_path):
    """The 5-point cross reads no corner: the rows above and below are predicated on their own columns."""
    result = compile_file(PROGRAMS / "jacobi2d.cu")
    k = kernel_named(result, "runJacobiCUDA_kernel1")
    text = kernel_source(k.optimized.funcdef)
    assert "float A_win[6][6];" in text
    assert text.count("const int row_read") == 3
    assert "__shfl_down_sync" in text and "__syncthreads" not in text
    assert any(r.startswith("stencil window, 4 x 4 outputs per thread") for r in merge_decisions(k, "applied"))
    assert "if (y0 >= 1 && y0 + 3 < n - 1 && x0 >= 1 && x0 + 3 < n - 1) {" in text and "if (n % 4 == 0) {" in text
    assert "*((float4 *) (&B[(y0 + r) * n + x0])) = make_float4(B_row[0], B_row[1], B_row[2], B_row[3]);" in text
    for n in (37, 45, 70, 64):
        assert_equivalent(k, {"n": n}, (n, n))
    assert_nvcc_compiles(result, tmp_path)


def test_demosaic_float2_rows_and_float4_stores_checked_at_run_time(tmp_path):
    """No launch in the file: nothing is known of the bases. Rows of pitch width + 2 are float2 pairs where
    each row's address is 8-byte aligned; the interior stores r, g, b rows as float4 where their bases are
    16-byte aligned and width is a multiple of 4."""
    result = compile_file(INPUTS / "demosaic.cu")
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "float raw_win[6][6];" in text
    assert "const int x0 = (blockIdx.x * 32 + threadIdx.x) * 4;" in text
    assert "if (row_read && x0 + 3 < width + 2 && (((size_t) (raw + row * (width + 2) + x0)) & 7) == 0) {" in text
    assert "const float2 pair2 = *((const float2 *) (&raw[row * (width + 2) + x0 + 2]));" in text
    assert "const float from_right1 = __shfl_down_sync(0xffffffffu, raw_win[i][0], 1);" in text
    assert "if (threadIdx.x != 31) {\n            raw_win[i][4] = from_right1;\n            raw_win[i][5] = from_right2;" in text
    assert "if (x0 + 3 < width && y0 + 3 < height) {" in text
    assert ("if ((((size_t) r) & 15) == 0 && (((size_t) g) & 15) == 0 && (((size_t) b) & 15) == 0 && "
            "width % 4 == 0) {") in text
    # an even width that is not a multiple of 4: float2 stores; an odd one: element stores (both unguarded)
    assert ("} else if ((((size_t) r) & 7) == 0 && (((size_t) g) & 7) == 0 && (((size_t) b) & 7) == 0 && "
            "width % 2 == 0) {") in text
    assert "*((float2 *) (&g[(y0 + r2) * width + x0 + 2])) = make_float2(g_row[2], g_row[3]);" in text
    assert "g[(y0 + r2) * width + x0 + v] = g_row[v];" in text
    assert "*((float4 *) (&g[(y0 + r2) * width + x0])) = make_float4(g_row[0], g_row[1], g_row[2], g_row[3]);" in text
    assert text.count("if (y % 2 == 0)") == 2                   # the branches kept, per copy, in both paths
    for w, h in ((37, 45), (70, 9), (64, 20), (68, 7)):
        assert_equivalent(k, {"width": w, "height": h}, (w, h))
    assert_nvcc_compiles(result, tmp_path)


def test_cross_program_and_merge_request(tmp_path):
    result = compile_text(tmp_path, CROSS)
    k = only(result)
    assert "__shfl_up_sync" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"n": 45, "m": 37}, (45, 37))
    asked = only(compile_text(tmp_path, CROSS, bindings={"n": 48}))
    asked_text = kernel_source(asked.optimized.funcdef)
    # No launch: the base's alignment is checked with each row's address; the pitch 48 is known.
    assert "(((size_t) (A + row * 48 + x0)) & 15) == 0" in asked_text and "48 % 4" not in asked_text
    assert "if (x0 >= 1 && x0 + 3 < 47 && y0 >= 1 && y0 + 3 < m - 1) {" in asked_text
    assert "if ((((size_t) B) & 15) == 0) {" in asked_text
    assert_equivalent(asked, {"n": 48, "m": 21}, (48, 21))


def test_left_alone_on_g80_and_without_passes(tmp_path):
    k = kernel_named(compile_file(PROGRAMS / "blur3x3.cu", "g80"), "blur3x3")
    assert "__shfl" not in kernel_source(k.optimized.funcdef)
    k = kernel_named(compile_file(PROGRAMS / "blur3x3.cu", passes="restrict,normalize,coalesce"), "blur3x3")
    assert "_win" not in kernel_source(k.optimized.funcdef)


def test_unguarded_stated_space_widens_only_the_stores(tmp_path):
    """imregionmax states its thread space (the launch tiles it, so the copies need no guard): its pitch
    4098 allows float2 loads only, and C's rows (pitch 4096) are float4 stores where C is aligned."""
    k = only(compile_file(INPUTS / "imregionmax.cu"))
    text = kernel_source(k.optimized.funcdef)
    assert "const float2 pair2 = *((const float2 *) (&A[row * 4098 + x0 + 2]));" in text
    assert "if ((((size_t) C) & 15) == 0) {" in text
    assert "*((float4 *) (&C[(y0 + r) * 4096 + x0])) = make_float4(C_row[0], C_row[1], C_row[2], C_row[3]);" in text
    assert "C[(y0 + r) * 4096 + x0 + v] = C_row[v];" in text     # the else path: element stores
    assert "C[idy * 4096 + idx]" not in text                     # no guard: no copies of their own
    small = (INPUTS / "imregionmax.cu").read_text().replace("#define WIDTH_C 4096", "#define WIDTH_C 128") \
        .replace("#define HEIGHT_C 4096", "#define HEIGHT_C 32")
    k = only(compile_text(tmp_path, small))
    assert "make_float4" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {}, (128, 32))
