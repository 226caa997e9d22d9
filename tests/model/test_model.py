"""The offline model (gpgpu_opt/model): the occupancy calculator's numbers, Spearman with ties, and the known
cases: a copy runs at DRAM bandwidth, mm's 8x8 register tile is far faster than the naive mm, mv with the
split beats mv without, conv with several outputs per thread beats one; ranking variants through the
`rank` command with measured times; ptxas's resources where nvcc is installed."""
from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.model import occupancy, predict, resources, spearman
from gpgpu_opt.model.rank import Variant, main as rank_main, rank_variants
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import TARGETS, get_target
from tests.conftest import INPUTS, requires_nvcc

SM90 = get_target("sm_90")
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def compiled(path, passes=None, merge=None, restrict=False):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), include_dirs=[str(Path(path).parent)], diagnostics=diagnostics)
    result = compile_with(program, SM90, parse_pass_list(passes), diagnostics, {}, assume_restrict=restrict,
                             merge_request=MergeRequest.parse(merge) if merge else None)
    return result.kernels[0]


def predicted(kernel_result, sizes, space):
    return predict(kernel_result.optimized, SM90, sizes, None, space, tuple(kernel_result.context.facts.naive_block))


# -- occupancy: the CUDA occupancy calculator's numbers for compute capability 9.0 ------------------------
@pytest.mark.parametrize("threads, registers, shared, blocks, warps, limited_by", [
    (256, 32, 0, 8, 64, "threads"),             # 100 %
    (256, 64, 0, 4, 32, "registers"),           # 50 %
    (256, 128, 0, 2, 16, "registers"),          # 25 %: mm's register tile at __launch_bounds__(256, 2)
    (256, 168, 0, 1, 8, "registers"),           # 12.5 %
    (128, 40, 0, 12, 48, "registers"),          # 40 regs -> 1280 per warp, 12 warps per sub-partition
    (256, 72, 32 * 1024, 3, 24, "registers"),   # shared memory would allow 6
    (128, 16, 48 * 1024, 4, 16, "shared memory"),  # 48 KB + the 1 KB the system reserves per block
    (1024, 32, 0, 2, 64, "threads"),
    (64, 16, 0, 32, 64, "threads"),              # blocks and threads both at their limit
])
def test_occupancy_matches_the_calculator(threads, registers, shared, blocks, warps, limited_by):
    occ = occupancy(SM90, threads, registers, shared)
    assert (occ.blocks_per_sm, occ.warps_per_sm) == (blocks, warps)
    assert occ.limits[limited_by] == blocks
    assert occ.fraction == pytest.approx(warps / 64)


def test_occupancy_of_the_papers_gpu_allocates_registers_per_block():
    # cc 1.0: 256 threads at 10 registers -> 2560 per block (256-register units): 3 blocks by registers,
    # 3 by threads (768 per SM)
    occ = occupancy(get_target("g80"), 256, 10, 2096)
    assert occ.blocks_per_sm == 3
    assert occupancy(get_target("g80"), 256, 16, 0).blocks_per_sm == 2    # 4096 registers per block


def test_every_target_has_the_models_fields():
    for target in TARGETS.values():
        assert target.issue_per_cycle > 0 and target.fp32_lanes_per_sm > 0 and target.lsu_per_cycle > 0
        assert target.l1_latency_cycles < target.l2_latency_cycles <= target.memory_latency_cycles
        assert 0 < target.dram_efficiency <= 1


# -- spearman ----------------------------------------------------------------------------------------
def test_spearman_with_ties_averaged():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert math.isnan(spearman([1, 1], [1, 2]))


# -- known cases ---------------------------------------------------------------------------------------
COPY = """
__global__ void copy(const float *__restrict__ in, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i];
}
"""


def test_a_copy_runs_at_dram_bandwidth(tmp_path):
    path = tmp_path / "copy.cu"
    path.write_text(textwrap.dedent(COPY))
    n = 1 << 26
    k = compiled(path, passes="none")
    p = predicted(k, {"n": n}, (n, 1))
    ideal = 2 * 4 * n / (SM90.memory_bandwidth_gbs * 1e9 * SM90.dram_efficiency)
    assert p.bound == "dram"
    assert ideal <= p.seconds <= 1.15 * ideal
    assert p.occupancy == 1.0


def test_mm_naive_is_much_slower_than_the_8x8_register_tile():
    sizes, space = {"n": 4096}, (4096, 4096)
    naive = predicted(compiled(INPUTS / "mm.cu", passes="none"), sizes, space)
    tiled = predicted(compiled(INPUTS / "mm.cu"), sizes, space)
    small = predicted(compiled(INPUTS / "mm.cu", merge="x=4,y=4"), sizes, space)
    assert naive.seconds > 4 * tiled.seconds
    assert tiled.seconds < small.seconds < naive.seconds
    assert naive.bound == "l1/shared"          # two loads per FMA, served by L1
    # the tile: 2 n^3 flops at about the FP32 peak (no faster than it)
    peak = SM90.sm_count * SM90.fp32_lanes_per_sm * 2 * SM90.clock_ghz * 1e9
    assert 2 * 4096 ** 3 / peak < tiled.seconds < 3 * 2 * 4096 ** 3 / peak


def test_mv_with_the_split_beats_mv_without():
    sizes, space = {"rows": 16384, "cols": 16384}, (16384, 1)
    naive = predicted(compiled(INPUTS / "mv.cu", passes="none"), sizes, space)
    split = predicted(compiled(INPUTS / "mv.cu"), sizes, space)
    assert split.seconds * 3 < naive.seconds
    assert split.bound == "dram"
    # the naive kernel has 64 blocks for 132 SMs and one uncoalesced row per thread
    assert naive.detail["grid"] == [64, 1]
    assert split.detail["work_per_thread"]["requests"][0]["sectors"] == 4     # a warp reads 128 bytes of a row


def test_conv_with_more_outputs_per_thread_ranks_first():
    sizes, space = {"width": 4096, "height": 4096}, (4096, 4096)
    times = {m: predicted(compiled(INPUTS / "conv.cu", passes=None if m else "none", merge=m, restrict=True),
                          sizes, space).seconds for m in (None, "y=2", "y=4")}
    assert times["y=4"] < times["y=2"] < times[None]


def test_a_program_not_tuned_for_predicts_near_bandwidth():
    """The STREAM triad as people write it: three arrays of n floats at DRAM bandwidth, left as written."""
    n = 1 << 24
    k = compiled(PROGRAMS / "stream_triad.cu")
    p = predict(k.optimized, SM90, {"n": n, "scalar": 3.0}, None, (n, 1), tuple(k.context.facts.naive_block))
    ideal = 3 * 4 * n / (SM90.memory_bandwidth_gbs * 1e9 * SM90.dram_efficiency)
    assert p.bound == "dram" and ideal <= p.seconds <= 1.25 * ideal


def test_gesummv_ranks_the_warp_per_row_first():
    rows = rank_variants(str(PROGRAMS / "gesummv.cu"), SM90, {"n": 4096, "alpha": 0.75, "beta": 1.5},
                         [Variant("naive", "none"), Variant("default")], global_space=(4096, 1), use_ptxas=False)
    naive, default = (r.prediction.seconds for r in rows)
    assert default < naive


# -- the rank command ------------------------------------------------------------------------------------
def test_rank_prints_predictions_and_the_correlation_with_measured_times(tmp_path, capsys):
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({"naive": 2.2, "default": 0.27, "passes coalesce": 1.45}))  # made-up times
    rank_main([str(INPUTS / "mv.cu"), "--size", "rows=16384", "--size", "cols=16384", "--global", "16384",
               "--passes", "coalesce", "--no-ptxas", "--measured", str(measured)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["variant", "predicted", "ms"]
    assert [line.split()[0] for line in lines[1:4]] == ["default", "passes", "naive"]
    assert "spearman(predicted, measured) = 1.000" in out


@requires_nvcc
def test_resources_from_ptxas_for_the_register_tile():
    k = compiled(INPUTS / "mm.cu")
    from gpgpu_opt.codegen import kernel_source

    headers = "".join(f"#include <{h}>\n" for h in k.optimized.includes)    # cp.async stages: cuda_pipeline.h
    used = resources(headers + k.optimized.with_launch_bounds(kernel_source(k.optimized.funcdef)), SM90, "mm")
    assert used is not None and used.source == "ptxas"
    assert used.registers <= 128                     # __launch_bounds__(256, 2)
    stages = 2 if k.optimized.includes else 1
    assert used.shared_bytes == stages * (16 * 132 + 16 * 128) * 4
    assert occupancy(SM90, 256, used.registers, used.shared_bytes).blocks_per_sm == 2
