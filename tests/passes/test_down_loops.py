"""Loops that count down through the pipeline: the coalesce pass unrolls them around their tiles in their
own order (steps from the first value down, each step's iterations from its top), so that the compiled
kernels compute bitwise what the naive ones do, at ragged sizes, steps of -1, -2 and -3, and bounds that
make the loop run zero times; a down loop inside a staged loop is kept; `verify` passes; the output
compiles with nvcc."""
from __future__ import annotations

import math
import shutil
import textwrap

import numpy as np
import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.command import run_verify
from tests.nvcc_batch import build_device_only

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

# A window of A's rows, from hi down to lo (exclusive): no iteration when lo >= hi.
WINDOW = """
    __global__ void window(const float *A, float *y, int n, int lo, int hi)
    {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row < n) {
            float sum = 0.0f;
            for (int k = hi; k > lo; k--)
                sum = sum * 0.5f + A[row * n + k];
            y[row] = sum;
        }
    }
"""

# Parts of interleaved complex numbers, read two elements apart: A's last row ends with the first read.
INTERLEAVED = """
    __global__ void cross_dot(const float *A, const float *x, float *y, int n)
    {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row < n) {
            float sum = 0.0f;
            for (int k = n - 1; k >= 0; k--)
                sum += A[row * 2 * n + 2 * k + 1] * x[2 * k];
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


def compile_source(tmp_path, source: str, target: str = "sm_90", output: bool = False):
    """The compiled kernel (with `output`: the whole compiled file's text)."""
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target(target), PASSES, diagnostics, {}, block_override=(64, 1))
    return result.output if output else result.kernels[0]


def coalesce_decisions(kr, action: str) -> list:
    return [d for d in kr.context.log.decisions if d.pass_name == "coalesce" and d.action == action]


def staged(kr) -> set[str]:
    """What the coalesce pass staged, in a kernel that kept it (compile's own check did not roll it back)."""
    assert kr.optimized.launch is not None
    return {d.subject for d in coalesce_decisions(kr, "applied")}


def run_both(kr, args: dict, global_x: int) -> tuple[dict, dict]:
    """The naive kernel on its block and the compiled one on its launch, on copies of the same arguments."""
    runs = []
    for kernel in (kr.naive, kr.optimized):
        block = kernel.launch.block if kernel.launch else kr.context.facts.naive_block
        per = kernel.launch.outputs_per_block if kernel.launch else block
        copy = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        run_kernel(kernel, (math.ceil(global_x / per[0]), 1), block, copy)
        runs.append(copy)
    return runs[0], runs[1]


def random(rng, count: int) -> np.ndarray:
    return (rng.uniform(0.5, 1.5, count) * rng.choice([-1, 1], count)).astype(np.float32)


@pytest.mark.parametrize("n, m", [(37, 45), (32, 64), (1, 5)])   # ragged, dividing, no inner iteration
@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_back_substitution_is_staged_where_uncoalesced_and_bitwise_equal(tmp_path, target, n, m):
    kr = compile_source(tmp_path, BACKSUB, target)
    if target == "g80":  # the broadcast U reads are uncoalesced there; the inner 'k' loop's are staged
        assert staged(kr) == {"U[i * n + k]", "launch"}
        source = kernel_source(kr.optimized.funcdef)
        for shape in ("for (int k0 = n - 1; k0 > i; k0 -= 16)", "for (int k = k0; k > k0 - 16 && k > i; k--)",
                      "tile_U[k - (k0 - 15)]"):
            assert shape in source, source
    else:                # a broadcast is one request there: nothing to stage
        assert not coalesce_decisions(kr, "applied") and not coalesce_decisions(kr, "skipped")
    rng = np.random.default_rng(n)
    upper = np.triu(rng.uniform(-1, 1, (n, n))) + n * np.eye(n)
    rhs = rng.uniform(-1, 1, (n, m))
    args = {"U": upper.astype(np.float32).ravel(), "B": rhs.astype(np.float32).ravel(),
            "X": np.full(n * m, np.nan, np.float32), "n": n, "m": m}
    naive, compiled = run_both(kr, args, m)
    np.testing.assert_allclose(naive["X"].reshape(n, m), np.linalg.solve(upper, rhs), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(compiled["X"], naive["X"])


@pytest.mark.parametrize("n", [37, 45, 64])
@pytest.mark.parametrize("step", [1, 2, 3])
@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_reversed_dot_product_is_staged_and_bitwise_equal(tmp_path, target, step, n):
    kr = compile_source(tmp_path, MV_REVERSED.replace("STEP", str(step)), target)
    assert "A[row * n + k]" in staged(kr)
    assert not coalesce_decisions(kr, "skipped")
    rng = np.random.default_rng(step)
    args = {"A": random(rng, n * n), "x": random(rng, n), "y": np.full(n, np.nan, np.float32), "n": n}
    naive, compiled = run_both(kr, args, n)
    k = np.arange(n - 1, -1, -step)
    expected = args["A"].reshape(n, n)[:, k].astype(np.float64) @ args["x"][k]
    np.testing.assert_allclose(naive["y"], expected, rtol=1e-4)
    np.testing.assert_array_equal(compiled["y"], naive["y"])


@pytest.mark.parametrize("n", [37, 64])
@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_reads_two_apart_in_a_down_loop_load_no_element_past_the_first_read(tmp_path, target, n):
    # A tile starts one element below its step's lowest read (A[2 * n * n] does not exist), and an element
    # below the loop's last read (x[-1]) is not loaded.
    kr = compile_source(tmp_path, INTERLEAVED, target)
    expected = {"A[row * 2 * n + 2 * k + 1]"} | ({"x[2 * k]"} if target == "g80" else set())
    assert staged(kr) == expected | {"launch"}
    rng = np.random.default_rng(n)
    args = {"A": random(rng, 2 * n * n), "x": random(rng, 2 * n), "y": np.full(n, np.nan, np.float32), "n": n}
    naive, compiled = run_both(kr, args, n)
    np.testing.assert_array_equal(compiled["y"], naive["y"])
    assert not np.isnan(naive["y"]).any()


@pytest.mark.parametrize("lo, hi", [(-1, 36), (4, 30), (7, 7), (20, 3)])   # whole, ragged, no iteration
def test_a_down_loop_bounded_by_parameters_may_not_run(tmp_path, lo, hi):
    kr = compile_source(tmp_path, WINDOW)
    assert "A[row * n + k]" in staged(kr)
    n = 37
    rng = np.random.default_rng(hi)
    args = {"A": random(rng, n * n), "y": np.full(n, np.nan, np.float32), "n": n, "lo": lo, "hi": hi}
    naive, compiled = run_both(kr, args, n)
    if lo >= hi:
        assert (naive["y"] == 0).all()
    np.testing.assert_array_equal(compiled["y"], naive["y"])


def test_a_down_loop_to_an_unordered_bound_is_left_with_a_note(tmp_path):
    kr = compile_source(tmp_path, MV_REVERSED.replace("k >= 0", "k != -1").replace("STEP", "1"))
    notes = [d.reason for d in coalesce_decisions(kr, "skipped") if d.subject == "A[row * n + k]"]
    assert notes == ["not staged: the 'k' loop does not count up or down by a fixed step to a bound it "
                     "approaches (<, <= up; >, >= down)"]
    assert kr.optimized.launch is None


@pytest.mark.parametrize("iterator", ["unsigned int k = n - 1; k > 0", "size_t k = n - 1; k > 0"])
def test_a_down_loop_with_an_unsigned_iterator_is_left_with_a_note(tmp_path, iterator):
    kr = compile_source(tmp_path, MV_REVERSED.replace("int k = n - 1; k >= 0", iterator).replace("STEP", "1"))
    notes = [d.reason for d in coalesce_decisions(kr, "skipped") if d.subject == "A[row * n + k]"]
    assert notes == ["not staged: the 'k' loop counts down with an iterator that is not a signed integer (its "
                     "steps end below the last value, which would wrap around)"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_the_staged_down_loops_compile(tmp_path, target):
    sources = [BACKSUB, WINDOW, INTERLEAVED] + [MV_REVERSED.replace("STEP", str(s)) for s in (1, 2, 3)]
    files = {}
    for number, source in enumerate(sources):
        out = tmp_path / f"out{number}.cu"
        out.write_text(compile_source(tmp_path, source, target, output=True))
        files[out] = []
    for out, error in build_device_only(files, tmp_path).items():
        assert error is None, error


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_verify_passes_on_the_down_loops(tmp_path, capsys, target):
    path = tmp_path / "down.cu"
    path.write_text("\n".join(textwrap.dedent(s) for s in (BACKSUB, WINDOW, INTERLEAVED,
                                                            MV_REVERSED.replace("STEP", "2"))))
    ok = run_verify(load_program(str(path)), get_target(target), None, {}, None, 1, None, Diagnostics(),
                    {}, {}, [])
    out = capsys.readouterr().out
    compared = [line for line in out.splitlines() if " elements " in line]
    # two cases per kernel, then (no launch in the file) the naive launch shapes verify fuzzes
    assert ok and len(compared) >= 8 and all(" ok" in line for line in compared), out
    assert "FAIL" not in out and out.rstrip().endswith("PASS"), out


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
