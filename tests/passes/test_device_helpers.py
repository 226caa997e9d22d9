"""`__device__` helpers are looked into: a pure one (a function of its arguments only) blocks no pass, an
impure one makes the coalesce pass skip the kernel with a note saying exactly why."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest
from pycparser import c_ast, c_parser

from gpgpu_opt.analysis.calls import pure_calls, why_impure
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import registered_passes
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

# -- purity ---------------------------------------------------------------------------------------------
HELPERS = """
    float g[4];
    float total;
    float atomicAdd(float *, float);
    float fmaxf(float, float);
    extern struct { unsigned int x; } threadIdx;
    float sq(float v) { return v * v; }
    float quad(float v) { return sq(sq(v)); }
    float poly(float v) {
        float c[3][2];
        for (int i = 0; i < 3; i++) c[i][0] = i;
        float s = 0;
        for (int i = 0; i < 3; i++) s += c[i][0] * sq(v);
        return fmaxf(s, 0.0f);
    }
    float shadows(float v) { float total = v; total += 1; return total; }
    float load(const float *p, int i) { return p[i]; }
    float read_g(int i) { return g[i]; }
    void write_g(int i, float v) { g[i] = v; }
    void add_total(float v) { total += v; }
    float out_of_scope(float v) { { float total = v; } return total; }
    float lane(float v) { return v + threadIdx.x; }
    float accumulate(float v) { return atomicAdd(&total, v); }
    int countdown(int x) { return x <= 0 ? 0 : countdown(x - 1); }
    int ping(int x);
    int pong(int x) { return x <= 0 ? 0 : ping(x - 1); }
    int ping(int x) { return pong(x); }
    float twice_g(int i) { return 2 * read_g(i); }
    float kept(float v) { static float s; s = v; return s; }
    float through(float v) { float a = v; float *q = &a; return *q; }
"""


@pytest.fixture(scope="module")
def helpers() -> dict[str, c_ast.FuncDef]:
    ast = c_parser.CParser().parse(textwrap.dedent(HELPERS))
    return {e.decl.name: e for e in ast.ext if isinstance(e, c_ast.FuncDef)}


@pytest.mark.parametrize("name, why", [
    ("sq", None),
    ("quad", None),
    ("poly", None),
    ("shadows", None),
    ("load", "load takes a pointer parameter 'p'"),
    ("read_g", "read_g reads global array g"),
    ("write_g", "write_g writes global array g"),
    ("add_total", "add_total writes the global variable total"),
    ("out_of_scope", "out_of_scope uses the global variable total"),
    ("lane", "lane uses threadIdx"),
    ("accumulate", "accumulate calls atomicAdd (atomicAdd touches memory or other threads)"),
    ("countdown", "countdown is recursive"),
    ("pong", "pong calls ping (ping calls pong recursively)"),
    ("twice_g", "twice_g calls read_g (read_g reads global array g)"),
    ("kept", "kept declares the static variable 's'"),
    ("through", "through declares the pointer 'q'"),
])
def test_helper_purity_and_why_not(helpers, name, why):
    assert why_impure(name, helpers) == why


def test_pure_calls_are_the_pure_builtins_and_helpers(helpers):
    pure = pure_calls(helpers)
    assert {"sqrtf", "fmaxf", "min", "make_float2", "sq", "quad", "poly"} <= pure
    assert not {"atomicAdd", "__syncthreads", "__shfl_down_sync", "__ldg", "load", "countdown"} & pure


# -- through the passes ---------------------------------------------------------------------------------
SQ = "__device__ float sq(float v) { return v * v; }\n"
LOAD = "__device__ float load(const float *p, int i) { return p[i]; }\n"

MV = """
__global__ void mv(const float *A, const float *x, float *y, int n)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; k++)
            sum += TERM * x[k];
        y[row] = sum;
    }
}
"""
WITH_SQ = SQ + MV.replace("TERM", "sq(A[row * n + k])")
INLINED = MV.replace("TERM", "(A[row * n + k] * A[row * n + k])")
WITH_LOAD = LOAD + MV.replace("TERM", "A[row * n + k] * load(x, k)")


def compile_source(tmp_path, source: str, target: str, passes=("normalize", "coalesce")):
    path = tmp_path / f"k{abs(hash(source)) % 10**8}.cu"
    path.write_text(source)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target(target), list(passes), diagnostics, {},
                             block_override=(64, 1))
    return program, result.kernels[0]


def decisions(kr) -> list[tuple]:
    return [(d.pass_name, d.action, d.subject, d.reason) for d in kr.context.log.decisions]


def coalesce_skips(kr) -> list[str]:
    return [d.reason for d in kr.context.log.decisions if d.pass_name == "coalesce" and d.action == "skipped"]


def test_normalize_hoists_loads_out_of_a_pure_helper_call(tmp_path):
    """What normalize leaves for the later passes (the last tidy step folds the copies back when no pass
    after it stages them)."""
    _, kr = compile_source(tmp_path, WITH_SQ, "sm_90", passes=("normalize",))
    out = kernel_source(registered_passes()["normalize"](kr.naive.copy(), kr.context).funcdef)
    assert "const float A_val = A[row * n + k];" in out and "sum += sq(A_val) * x_val;" in out
    assert "sum += sq(A_val) * x_val;" in kernel_source(kr.optimized.funcdef)   # a form alone: no last tidy


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_a_pure_helper_is_staged_as_its_inlined_body(tmp_path, target):
    program, kr = compile_source(tmp_path, WITH_SQ, target)
    _, inlined = compile_source(tmp_path, INLINED, target)
    assert ("coalesce", "applied", "A[row * n + k]") in {d[:3] for d in decisions(kr)}
    assert decisions(kr) == decisions(inlined)
    assert kr.optimized.launch.block == inlined.optimized.launch.block
    staged = kernel_source(kr.optimized.funcdef)
    assert "sq(tile_A[" in staged
    n = 45                                   # ragged: neither the tile rows nor the unrolled step divide it
    rng = np.random.default_rng(5)
    args = {"A": rng.uniform(0.5, 1.5, n * n).astype(np.float32),
            "x": (rng.uniform(0.5, 1.5, n) * rng.choice([-1, 1], n)).astype(np.float32),
            "y": np.full(n, np.nan, np.float32), "n": n}
    runs = []
    for kernel, block in ((kr.naive, kr.context.facts.naive_block), (kr.optimized, kr.optimized.launch.block)):
        copy = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        per = kernel.launch.outputs_per_block if kernel.launch else block
        run_kernel(kernel, (math.ceil(n / per[0]), 1), block, copy, device_functions=program.device_functions)
        runs.append(copy["y"])
    expected = (args["A"].reshape(n, n).astype(np.float64) ** 2) @ args["x"]
    np.testing.assert_allclose(runs[0], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(runs[1], runs[0])


def test_an_impure_helper_skips_the_kernel_with_the_precise_reason(tmp_path):
    _, kr = compile_source(tmp_path, WITH_LOAD, "sm_90")
    assert coalesce_skips(kr) == ["no access staged: the kernel calls load, which may access memory "
                                  "(load takes a pointer parameter 'p')"]
    assert kr.optimized.launch is None


def test_a_helper_using_the_thread_index_skips_the_kernel(tmp_path):
    lane = "__device__ float lane(float v) { return v + threadIdx.x; }\n"
    _, kr = compile_source(tmp_path, lane + MV.replace("TERM", "lane(A[row * n + k])"), "sm_90")
    assert coalesce_skips(kr) == ["no access staged: the kernel calls lane, which may access memory "
                                  "(lane uses threadIdx)"]
