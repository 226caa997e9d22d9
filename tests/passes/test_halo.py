"""Halo tiles (5): a stencil's footprint in one 2-D shared tile of the block's outputs
plus the reach, loaded cooperatively with predicated edges, one barrier; declined on sm_90 where the L1
already absorbs a small stencil's reuse."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case
from tests.analysis.test_footprint import PARAMETER_CONV

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"
PROGRAMS = ROOT / "tests" / "programs"

BLUR = """
__global__ void blur(float *in, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= 1 && x < w - 1 && y >= 1 && y < h - 1)
        out[y * w + x] = (in[(y - 1) * w + x] + in[y * w + x - 1] + in[y * w + x] + in[y * w + x + 1]
                          + in[(y + 1) * w + x]) * 0.2f;
}
"""


def compile_path(path: Path, target: str, defines=None, passes=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics, defines=defines or {}) if defines \
        else load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, {})


def compile_text(tmp_path: Path, source: str, target: str = "g80"):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return compile_path(path, target)


def kernel(result, name=None):
    return next(k for k in result.kernels if name is None or k.naive.name == name)


def coalesce_notes(k, action: str) -> list[str]:
    return [d.reason for d in k.context.log.decisions if d.pass_name == "coalesce" and d.action == action]


def assert_equivalent(k, sizes: dict, space: tuple[int, int]) -> None:
    result = run_case(k.naive, k.optimized, k.context.facts.naive_block, Case(sizes=sizes, global_space=space),
                      seed=3, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def test_five_point_plus_loads_only_the_elements_some_thread_reads(tmp_path):
    k = kernel(compile_text(tmp_path, BLUR))
    text = kernel_source(k.optimized.funcdef)
    assert "__shared__ float tile_in[18][18];" in text
    # the plus is three rectangles: the row above, the block's rows (one column either side), the row below
    load = next(line for line in text.splitlines() if "tile_in[elem / 18][elem % 18] =" in line)
    assert load.count("||") == 2 and "in[row * w + col]" in load
    assert text.count("__syncthreads();") == 1
    assert "tile_in[threadIdx.y][threadIdx.x + 1]" in text and "tile_in[threadIdx.y + 2][threadIdx.x + 1]" in text
    assert "x >= 1 && x < w - 1 && y >= 1 && y < h - 1" in text       # the guard stays exact
    for w, h in ((37, 29), (3, 3), (2, 5), (17, 16)):
        assert_equivalent(k, {"w": w, "h": h}, (w, h))


def test_blur3x3_program_tile_is_outputs_plus_one_each_side_on_g80():
    k = kernel(compile_path(PROGRAMS / "blur3x3.cu", "g80"))
    text = kernel_source(k.optimized.funcdef)
    assert "__shared__ float tile_in[18][18];" in text and text.count("__syncthreads();") == 1
    assert k.optimized.launch.block == (16, 16)
    assert_equivalent(k, {"w": 45, "h": 37}, (45, 37))


@pytest.mark.parametrize("target, block, tile", [("g80", (16, 16), "tile_in[31][31]"),
                                                 ("sm_90", (32, 8), "tile_in[23][47]")])
def test_conv_tile_is_outputs_plus_the_filter_reach(target, block, tile):
    # without merge: on sm_90 the merge pass replaces this tile by the convolution's register tile
    k = kernel(compile_path(INPUTS / "conv.cu", target, passes="coalesce"))
    text = kernel_source(k.optimized.funcdef)
    assert f"__shared__ float {tile};" in text
    assert "tile_in[threadIdx.y + j][threadIdx.x + i]" in text
    assert k.optimized.launch.block == block and text.count("__syncthreads();") == 1
    assert_equivalent(k, {"width": 37, "height": 21}, (37, 21))


def test_conv_g80_stages_the_filter_with_the_halo():
    k = kernel(compile_path(INPUTS / "conv.cu", "g80"))
    text = kernel_source(k.optimized.funcdef)
    assert "__shared__ float tile_filt[256];" in text and "tile_filt[j * 16 + i]" in text


@pytest.mark.parametrize("path", [PROGRAMS / "blur3x3.cu", INPUTS / "demosaic.cu"])
def test_sm90_declines_small_stencils_with_the_models_numbers(path):
    k = kernel(compile_path(path, "sm_90"))
    assert "__shared__" not in kernel_source(k.optimized.funcdef)
    (note,) = [n for n in coalesce_notes(k, "skipped") if "no halo tile" in n]
    assert "DRAM bounds the kernel" in note and re.search(r"L1 \d+ bytes naive", note)


def test_a_guard_that_is_no_interval_leaves_the_reads(tmp_path):
    k = kernel(compile_text(tmp_path, BLUR.replace("if (x >= 1 &&", "if (x % 2 == 1 &&")))
    assert "__shared__" not in kernel_source(k.optimized.funcdef)
    assert any("is not a bound on the global x or y index" in n for n in coalesce_notes(k, "skipped"))


def test_a_store_that_may_alias_before_the_reads_keeps_them_global(tmp_path):
    source = BLUR.replace("        out[y * w + x] = (", "    {\n        out[0] = 1.0f;\n        out[y * w + x] = (") \
        .replace("* 0.2f;\n", "* 0.2f;\n    }\n")
    k = kernel(compile_text(tmp_path, source))
    assert "__shared__" not in kernel_source(k.optimized.funcdef)
    assert any("may alias" in n for n in coalesce_notes(k, "skipped"))


def test_a_condition_inside_the_filter_loop_keeps_the_reads(tmp_path):
    k = kernel(compile_text(tmp_path, """
    __global__ void edge(const float *in, float *out, int w, int h)
    {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x < w && y < h) {
            float s = 0.0f;
            for (int j = 0; j < 3; j++)
                if (x + j < w)
                    s += in[y * (w + 2) + x + j];
            out[y * w + x] = s;
        }
    }"""))
    assert "__shared__ float tile_in" not in kernel_source(k.optimized.funcdef)
    assert any("under a condition inside its loop" in n for n in coalesce_notes(k, "skipped"))


@pytest.mark.parametrize("seed", range(6))
def test_random_stencils_under_interval_guards_stay_exact(tmp_path, seed):
    """Random offsets (negative columns wrap into the row above, as in the naive kernel) and guards that keep
    the naive reads in range: the g80 halo tile and the sm_90 stencil rows agree with the naive kernel."""
    import random
    rng = random.Random(seed)
    offsets = set()
    while len(offsets) < rng.randint(2, 7):
        offsets.add((rng.randint(-2, 2), rng.randint(-2, 2)))
    terms = " + ".join(f"{rng.choice([1, 2, 3])}.0f * in[(y + {dy}) * w + x + {dx}]" for dy, dx in sorted(offsets))
    left = max(0, -min(o[1] for o in offsets)) + rng.randint(0, 1)
    up = max(0, -min(o[0] for o in offsets)) + rng.randint(0, 1)
    right = max(0, max(o[1] for o in offsets)) + rng.randint(0, 1)
    down = max(0, max(o[0] for o in offsets)) + rng.randint(0, 1)
    source = f"""
    __global__ void st(const float *__restrict__ in, float *__restrict__ out, int w, int h)
    {{
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x >= {left} && x < w - {right} && y > {up - 1} && y <= h - {down + 1})
            out[y * w + x] = {terms};
    }}"""
    for target, forms in (("g80", ("tile_in",)), ("sm_90", ("in_rows", "in_win"))):   # sm_90: rows or a window
        k = kernel(compile_text(tmp_path, source, target))
        assert any(form in kernel_source(k.optimized.funcdef) for form in forms)
        for w, h in ((rng.randint(1, 40), rng.randint(1, 40)), (rng.randint(20, 70), rng.randint(5, 70))):
            assert_equivalent(k, {"w": w, "h": h}, (w, h))


def test_a_parameter_sized_filter_gets_no_tile_sized_for_its_binding(tmp_path):
    path = tmp_path / "pconv.cu"
    path.write_text(textwrap.dedent(PARAMETER_CONV))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    k = kernel(compile_with(program, get_target("g80"), parse_pass_list(None), diagnostics, {"k": 5}))
    assert "tile_in" not in kernel_source(k.optimized.funcdef)
    notes = [n for n in coalesce_notes(k, "skipped") if n.startswith("no halo tile") or "halo" in n]
    assert len(notes) == 1 and "the filter's size is a parameter" in notes[0]
