"""The prefetch pass: the paper's register form (g80: mv, tmv), double buffering with cp.async (sm_90: the
register tile of mm), the paper's skip when thread merging needs the registers (g80 mm), `--passes`
without it, and emulated equivalence (race check on) at ragged sizes, one step and no step."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"


def compile_input(name: str, target: str, passes: str | None = None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / name), diagnostics=diagnostics)
    result = compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, {})
    return result, next(k for k in result.kernels if k.naive.name == name[:-3])


def decisions(kernel, action):
    return [d.reason for d in kernel.context.log.decisions if d.pass_name == "prefetch" and d.action == action]


def check_equivalent(kernel, sizes: dict, space: tuple[int, int]):
    case = Case(sizes=sizes, global_space=space)
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5, device_functions={})
    assert result.ok, result.error or result.mismatches


@pytest.fixture(scope="module")
def g80_mv():
    # partition left out: it rotates this loop and prefetches it again (tests/passes/test_partition.py)
    return compile_input("mv.cu", "g80", "vectorize,coalesce,merge,prefetch")


@pytest.fixture(scope="module")
def sm90_mm():
    return compile_input("mm.cu", "sm_90")


def test_g80_mv_prefetches_the_next_step_into_registers(g80_mv):
    result, kernel = g80_mv
    text = result.output
    assert "float A_next[16];" in text and "float x_next;" in text
    assert "tile_A[rr + threadIdx.x / 16][threadIdx.x % 16] = A_next[rr / 2];" in text
    assert "const int c0_next = c0 + 16;" in text
    assert "if (c0_next < cols) {" in text                   # no load past the last step
    assert "if (0 < cols) {" in text                         # nor before a loop of no step
    assert text.count("__syncthreads();") == 2
    assert decisions(kernel, "applied")


@pytest.mark.parametrize("rows, cols", [(37, 29), (45, 16), (33, 1), (20, 0)])
def test_g80_mv_prefetch_is_equivalent(g80_mv, rows, cols):
    _, kernel = g80_mv
    check_equivalent(kernel, {"rows": rows, "cols": cols}, (rows, 1))


def test_sm90_mm_double_buffers_with_cp_async_one_barrier_per_step(sm90_mm):
    result, kernel = sm90_mm
    text = result.output
    assert text.startswith("#include <cuda_pipeline.h>") or "\n#include <cuda_pipeline.h>\n" in text
    assert "__shared__ __align__(16) float tile_A[2][16][132];" in text
    assert "__shared__ __align__(16) float tile_B[2][16][128];" in text
    assert "for (int k0 = 0, stage = 0; k0 < n; k0 += 16, stage ^= 1) {" in text
    assert text.count("__syncthreads();") == 1                # one barrier per stage
    assert "__pipeline_wait_prior(0);\n        __syncthreads();" in text
    assert text.count("__pipeline_commit();") == 2
    assert "if (k0_next < n) {" in text                       # no copy past the last step
    assert "&tile_A[stage ^ 1][e % 16][e / 16]" in text and "tile_A[stage][kk]" in text
    assert "in_range ? 0 : (sizeof(float))" in text          # predicated-off elements are zero-filled
    assert "A_staged" not in text                             # cp.async needs no staging registers
    assert decisions(kernel, "applied") and "double buffering" in decisions(kernel, "applied")[0]


@pytest.mark.parametrize("n", [37, 16, 1])
def test_sm90_mm_double_buffering_is_equivalent(sm90_mm, n):
    _, kernel = sm90_mm
    check_equivalent(kernel, {"n": n}, (n, n))


def test_g80_mm_leaves_the_registers_to_thread_merging():
    result, kernel = compile_input("mm.cu", "g80")
    (why,) = decisions(kernel, "skipped")
    assert "thread merging keeps 16 outputs per thread" in why
    assert "_next" not in result.output


def test_passes_without_prefetch_keep_the_staged_loop():
    result, kernel = compile_input("mm.cu", "sm_90", "restrict,normalize,coalesce,merge")
    assert "__pipeline" not in result.output and "cuda_pipeline.h" not in result.output
    assert result.output.count("__syncthreads();") == 2
    assert not decisions(kernel, "applied")


def test_sm90_mm_with_prefetch_builds_without_spills(sm90_mm, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    result, _ = sm90_mm
    out = tmp_path / "mm.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "/dev/null", "--resource-usage", f"-I{INPUTS}",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "0 bytes spill stores" in proc.stdout + proc.stderr
