"""The merge pass's convolution register tile: the shape of conv's output (halo tile = outputs per block +
the filter's reach, R x C accumulators), equivalence in the emulator at ragged sizes for the filters people
write (3x3 and 5x5 macros, a centred `-R..R` window with a pitch parameter, doubles), `--merge`, what it
leaves alone and why, and nvcc (no spills)."""
from __future__ import annotations

import re

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.nvcc import nvcc_available, resource_usage
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.targets import get_target
from tests.passes.test_register_tile import assert_equivalent_2d
from tests.passes.test_split_loop import INPUTS, assert_nvcc_compiles, compile_file, merge_decisions, only
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with


def compile_text(tmp_path, source: str, merge: MergeRequest | None = None):
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    return compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                           merge_request=merge)


def conv_source(filter_size: int) -> str:
    text = (INPUTS / "conv.cu").read_text()
    return text.replace("#define FILTER 16", f"#define FILTER {filter_size}")


def test_conv_sm90_8x8_per_thread_with_halo_tile_and_filter_staged(tmp_path):
    result = compile_file(INPUTS / "conv.cu")
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    # CHECK: the halo tile is the block's 64 x 128 outputs plus the filter's reach (15), rows padded to 16 bytes
    assert "__shared__ __align__(16) float tile_in[79][144];" in text
    assert "__shared__ __align__(16) float tile_filt[16][16];" in text
    # CHECK: 8 x 8 accumulators; a row of 8 + 15 inputs in registers feeds the 8 output rows
    assert "float sum[8][8];" in text and "float in_row[23];" in text
    assert "in_row[c] = tile_in[threadIdx.y * 8 + row][threadIdx.x * 8 + c];" in text
    assert "for (int row = 0; row < 23; row++)" in text
    assert "const int j = row - r;" in text and "if (j >= 0 && j < 16)" in text
    assert "sum[r][c] += in_row[c + i] * tile_filt[j][i];" in text
    # CHECK: predicated, coalesced tile loads (the lowest output that reads an element decides), one barrier
    assert "in[(first_row + tile_row) * (width + 15) + first_col + tile_col]" in text
    assert "first_row + ((tile_row < 15) ? 0 : (tile_row - 15)) < height" in text
    assert text.count("__syncthreads();") == 1
    # CHECK: every output keeps its guard on the store
    assert re.search(r"if \(x < width && y < height\)\s*\{\s*out\[y \* width \+ x\] = sum\[r\]\[c\];", text)
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((16, 8), (128, 64))
    assert "__global__ __launch_bounds__(128, 4) void conv(" in result.output
    assert any(r.startswith("convolution register tile: 8x8 outputs per thread") for r in merge_decisions(k, "applied"))
    assert_equivalent_2d(k, {"width": 37, "height": 45}, (37, 45))


@pytest.mark.parametrize("size", [3, 5])
def test_small_filters_at_ragged_sizes(tmp_path, size):
    k = only(compile_text(tmp_path, conv_source(size)))
    text = kernel_source(k.optimized.funcdef)
    assert f"float in_row[{8 + size - 1}];" in text                                  # 8x8 per thread
    assert f"__shared__ __align__(16) float tile_in[{64 + size - 1}][" in text        # 16x8 threads
    assert_equivalent_2d(k, {"width": 70, "height": 131}, (70, 131))
    assert_equivalent_2d(k, {"width": 5, "height": 3}, (5, 3))


CENTRED = """
#define RADIUS 2
#define TAPS (2 * RADIUS + 1)

__global__ void blur(const float *src, const float *weights, float *dst, int w, int h, int pitch)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= h || col >= w)
        return;
    float acc = 0.0f;
    for (int dy = -RADIUS; dy <= RADIUS; dy++) {
        for (int dx = -RADIUS; dx <= RADIUS; dx++) {
            acc += weights[(dy + RADIUS) * TAPS + dx + RADIUS] * src[(row + RADIUS + dy) * pitch + col + RADIUS + dx];
        }
    }
    dst[row * w + col] = 2.0f * acc;
}
"""


def test_centred_window_with_a_pitch_parameter(tmp_path):
    k = only(compile_text(tmp_path, CENTRED))
    text = kernel_source(k.optimized.funcdef)
    assert "const int dy = row2 - r - 2;" in text and "if (dy >= -2 && dy < 3)" in text
    assert "for (int dx = -2; dx < 3; dx++)" in text
    assert "src_row[c + dx + 2]" in text and "tile_weights[dy + 2][dx + 2]" in text
    assert "src[(first_row + tile_row) * pitch + first_col + tile_col]" in text
    assert_equivalent_2d(k, {"w": 37, "h": 45, "pitch": 41}, (37, 45))
    assert_equivalent_2d(k, {"w": 70, "h": 9, "pitch": 80}, (70, 9))


def test_doubles(tmp_path):
    k = only(compile_text(tmp_path, conv_source(3).replace("float", "double")))
    assert "double sum[" in kernel_source(k.optimized.funcdef)
    assert_equivalent_2d(k, {"width": 37, "height": 45}, (37, 45))


@pytest.mark.parametrize("x, y", [(4, 8), (2, 16), (2, 8), (4, 4), (1, 3)])
def test_merge_request_selects_the_outputs_per_thread(tmp_path, x, y):
    k = only(compile_text(tmp_path, conv_source(5), merge=MergeRequest(x=x, y=y)))
    text = kernel_source(k.optimized.funcdef)
    assert f"float sum[{y}][{x}];" in text
    assert any(f"--merge x={x},y={y}" in r for r in merge_decisions(k, "applied"))
    assert_equivalent_2d(k, {"width": 37, "height": 45}, (37, 45))


def test_16x2_of_a_16x16_filter_takes_8_rows_of_threads_to_fit_shared_memory(tmp_path):
    k = only(compile_text(tmp_path, conv_source(16), merge=MergeRequest(x=2, y=16)))
    assert k.optimized.launch.block == (16, 8) and k.optimized.launch.outputs_per_block == (32, 128)
    assert "__launch_bounds__(128, 4)" in k.optimized.with_launch_bounds(kernel_source(k.optimized.funcdef))


DECLINED = {
    "a filter size that is a parameter": ("for (int j = 0; j < FILTER; j++)", "for (int j = 0; j < fsize; j++)",
                                          "does not have a constant start and length"),
    "columns before rows": ("in[(y + j) * (width + FILTER - 1) + (x + i)]", "in[(y + i) * (width + FILTER - 1) + (x + j)]",
                            "not the form"),
    "a strided window": ("in[(y + j) * (width + FILTER - 1) + (x + i)]", "in[(y + j) * (width + FILTER - 1) + (2 * x + i)]",
                         "not the form"),
}


@pytest.mark.parametrize("case", DECLINED)
def test_declines_with_a_note(tmp_path, case):
    old, new, why = DECLINED[case]
    source = conv_source(3).replace(old, new).replace("int width, int height", "int width, int height, int fsize")
    k = only(compile_text(tmp_path, source))
    assert k.optimized.launch is None or "tile_in" not in kernel_source(k.optimized.funcdef)
    assert any(why in r for r in merge_decisions(k, "skipped")), merge_decisions(k, "skipped")


def test_a_data_dependent_window_is_not_a_convolution(tmp_path):
    source = conv_source(3).replace("in[(y + j) * (width + FILTER - 1) + (x + i)]",
                                    "in[(y + j) * (width + FILTER - 1) + (x + i) + (int) filt[0]]")
    k = only(compile_text(tmp_path, source))
    assert "tile_in" not in kernel_source(k.optimized.funcdef)


def test_a_kernel_that_writes_its_input_is_left_alone(tmp_path):
    source = conv_source(3).replace("float *out", "float *in2").replace(
        "const float *in", "float *in").replace("out[y * width + x] = sum;", "in[y * width + x] = sum;")
    k = only(compile_text(tmp_path, source))
    assert "tile_in" not in kernel_source(k.optimized.funcdef)
    assert any("writes in" in r for r in merge_decisions(k, "skipped"))


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH")
@pytest.mark.parametrize("x, y", [(4, 8), (2, 16), (2, 8), (4, 4)])
def test_nvcc_compiles_the_variants_without_spills(tmp_path, x, y):
    merge = None if (x, y) == (4, 8) else MergeRequest(x=x, y=y)
    result = compile_text(tmp_path, conv_source(16), merge=merge)
    k = only(result)
    usage = resource_usage(k.optimized.with_launch_bounds(kernel_source(k.optimized.funcdef)),
                           get_target("sm_90"))["conv"]
    assert usage["spill_store_bytes"] == 0 and usage["registers"] <= 128, usage
    if (x, y) == (4, 8):
        assert_nvcc_compiles(result, tmp_path)
