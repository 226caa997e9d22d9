"""Loops that count down through the pipeline: the coalesce pass skips a read whose unrolled loop would
count down (with a note saying so) and still stages what it can around it; the emulator runs down loops
right; naive and compiled kernels agree at ragged sizes."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.pipeline import compile_program
from gpgpu_opt.targets import get_target

PASSES = ["normalize", "coalesce"]

BACKSUB = """
    __global__ void backsub(const float *U, const float *B, float *X, int n, int m)
    {
        int col = blockIdx.x * blockDim.x + threadIdx.x;
        if (col < m) {
            for (int i = n - 1; i >= 0; i--) {
                float s = B[i * m + col];
                for (int k = n - 1; k > i; k--)
                    s -= U[i * n + k] * X[k * m + col];
                X[i * m + col] = s / U[i * n + i];
            }
        }
    }
"""

MV_REVERSED = """
    __global__ void mv_rev(const float *A, const float *x, float *y, int n)
    {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row < n) {
            float sum = 0.0f;
            for (int k = n - 1; k >= 0; k -= STEP)
                sum += A[row * n + k] * x[k];
            y[row] = sum;
        }
    }
"""

# The staged 'k' loop holds a loop that counts down: staging goes on around it.
MV_TAPS = """
    __global__ void mv_taps(const float *A, const float *w, float *y, int n)
    {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row < n) {
            float sum = 0.0f;
            for (int k = 0; k < n; k++)
                for (int j = 3; j > 0; j = j - 2)
                    sum += A[row * n + k] * w[j];
            y[row] = sum;
        }
    }
"""


def compile_source(tmp_path, source: str, target: str = "sm_90"):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_program(program, get_target(target), PASSES, diagnostics, {}, block_override=(64, 1))
    return result.kernels[0]


def coalesce_decisions(kr, action: str) -> list:
    return [d for d in kr.context.decisions if d.pass_name == "coalesce" and d.action == action]


def run_both(kr, args: dict, global_x: int) -> tuple[dict, dict]:
    """The naive kernel on its block and the compiled one on its launch, on copies of the same arguments."""
    runs = []
    for kernel in (kr.naive, kr.optimized):
        block = kernel.launch.block if kernel.launch else kr.context.naive_block
        per = kernel.launch.outputs_per_block if kernel.launch else block
        copy = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        run_kernel(kernel, (math.ceil(global_x / per[0]), 1), block, copy)
        runs.append(copy)
    return runs[0], runs[1]


def random(rng, count: int) -> np.ndarray:
    return (rng.uniform(0.5, 1.5, count) * rng.choice([-1, 1], count)).astype(np.float32)


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_back_substitution_is_solved_and_left_unstaged_with_a_note(tmp_path, target):
    kr = compile_source(tmp_path, BACKSUB, target)
    assert not coalesce_decisions(kr, "applied")
    if target == "g80":  # the broadcast U reads are uncoalesced there, and their loops count down
        notes = {d.subject: d.reason for d in coalesce_decisions(kr, "skipped")}
        assert "counts down" in notes["U[i * n + k]"] and "counts down" in notes["U[i * n + i]"]
    n, m = 13, 37
    rng = np.random.default_rng(1)
    upper = np.triu(rng.uniform(-1, 1, (n, n))) + n * np.eye(n)
    rhs = rng.uniform(-1, 1, (n, m))
    args = {"U": upper.astype(np.float32).ravel(), "B": rhs.astype(np.float32).ravel(),
            "X": np.full(n * m, np.nan, np.float32), "n": n, "m": m}
    naive, compiled = run_both(kr, args, m)
    np.testing.assert_allclose(naive["X"].reshape(n, m), np.linalg.solve(upper, rhs), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(compiled["X"], naive["X"])


@pytest.mark.parametrize("step", [1, 2, 3])
def test_reversed_dot_product_is_skipped_with_a_note_and_computes_the_same(tmp_path, step):
    kr = compile_source(tmp_path, MV_REVERSED.replace("STEP", str(step)))
    notes = [d.reason for d in coalesce_decisions(kr, "skipped") if d.subject == "A[row * n + k]"]
    assert notes == ["not staged: the 'k' loop counts down (only upward loops are unrolled around tiles)"]
    assert kr.optimized.launch is None
    n = 37
    rng = np.random.default_rng(step)
    args = {"A": random(rng, n * n), "x": random(rng, n), "y": np.full(n, np.nan, np.float32), "n": n}
    naive, compiled = run_both(kr, args, n)
    k = np.arange(n - 1, -1, -step)
    expected = args["A"].reshape(n, n)[:, k].astype(np.float64) @ args["x"][k]
    np.testing.assert_allclose(naive["y"], expected, rtol=1e-4)
    np.testing.assert_array_equal(compiled["y"], naive["y"])


def test_a_loop_counting_down_inside_a_staged_loop_is_kept_and_equivalent(tmp_path):
    kr = compile_source(tmp_path, MV_TAPS)
    assert {d.subject for d in coalesce_decisions(kr, "applied")} >= {"A[row * n + k]"}
    n = 45                                   # not a multiple of the 32-iteration step nor the 64-row tile
    rng = np.random.default_rng(3)
    args = {"A": random(rng, n * n), "w": random(rng, 4), "y": np.full(n, np.nan, np.float32), "n": n}
    naive, compiled = run_both(kr, args, n)
    expected = args["A"].reshape(n, n).astype(np.float64).sum(axis=1) * (args["w"][3] + args["w"][1])
    np.testing.assert_allclose(naive["y"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(compiled["y"], naive["y"])     # the same sums in the same order
