"""Quasi-affine subscripts (`/`, `%`, `>>`, `&` by constants) with C's semantics: truncating division of
signed values, unsigned wrap-around, masks; the access analysis reports them (not warp-uniform, sectors
counted from the real addresses) and every pass leaves them as written, so the compiled kernel computes
what the naive one does, on the paper's GPU and today's."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
import sympy
from pycparser import c_parser

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.symbolic import (BDIM, BID, TID, NotAffine, c_div, c_mod, coefficient, cuda_text,
                                         param_symbol, to_sympy)
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import default_cases, run_case
from tests.cli_in_process import run_cli

GLOBAL_X = BID["x"] * BDIM["x"] + TID["x"]
_PARSER = c_parser.CParser()


def translate(expr: str, types: dict | None = None) -> sympy.Expr:
    node = _PARSER.parse(f"int f() {{ return {expr}; }}").ext[0].body.block_items[0].expr
    env = {"i": GLOBAL_X, "n": param_symbol("n"), "u": param_symbol("u"), "s": param_symbol("s")}
    return to_sympy(node, env, types)


def at_thread(expr: sympy.Expr, i: int, **values) -> int:
    """The value for global thread i (block 0, as many threads as needed) and other symbols' values."""
    subs = {BID["x"]: 0, BDIM["x"]: 1024, TID["x"]: i, **{param_symbol(k): v for k, v in values.items()}}
    return int(expr.subs(subs))


# -- the translation -----------------------------------------------------------------------------------

def test_signed_division_of_a_value_of_unknown_sign_truncates_as_c_does():
    div, rem = translate("(i - 3) / 2"), translate("(i - 3) % 2")
    assert not div.has(sympy.floor) and not rem.has(sympy.Mod)   # floor would say -2 and 1 at i = 0
    assert [at_thread(div, i) for i in range(6)] == [-1, -1, 0, 0, 0, 1]
    assert [at_thread(rem, i) for i in range(6)] == [-1, 0, -1, 0, 1, 0]
    assert at_thread(translate("(i - 3) / 2 + 1"), 0) == 0


def test_division_of_a_non_negative_value_is_floor_and_mod():
    assert translate("i / 2") == sympy.floor(GLOBAL_X / 2)
    assert translate("i % 7") == sympy.Mod(GLOBAL_X, 7)
    assert translate("-7 / 2") == -3 and translate("-7 % 2") == -1


def test_shift_right_is_floor_division_only_for_non_negative_values():
    assert translate("i >> 1") == sympy.floor(GLOBAL_X / 2)
    assert translate("i << 3") == 8 * GLOBAL_X
    for expr in ("(i - 3) >> 1", "i >> s", "n >> 1"):
        with pytest.raises(NotAffine):
            translate(expr)


def test_a_low_bits_mask_is_a_remainder_for_any_sign_and_other_bitwise_operators_are_not_affine():
    assert translate("i & 31") == sympy.Mod(GLOBAL_X, 32)
    assert at_thread(translate("(i - 3) & 7"), 0) == 5          # -3 & 7 in two's complement
    assert translate("31 & i") == sympy.Mod(GLOBAL_X, 32)
    for expr in ("i & 6", "i & n", "i ^ 1", "i | 1", "i & -1"):
        with pytest.raises(NotAffine):
            translate(expr)


def test_unsigned_values_that_may_wrap_are_not_divided_shifted_or_widened():
    unsigned = {"u": "unsigned int"}
    assert translate("u / 2", unsigned).has(sympy.floor)       # an unsigned variable is its own, >= 0 value
    assert translate("u - 3", unsigned) == param_symbol("u") - 3  # wrap-around agrees modulo 2^32
    for expr in ("(u - 3) / 2", "(u - 3) % 7", "(u - 3) >> 1", "(long)(u - 3)", "(threadIdx.x - 1) / 2",
                 "(i - 3) / 2u"):
        with pytest.raises(NotAffine):
            translate(expr, unsigned)
    assert isinstance(translate("(int)(threadIdx.x - 1) / 2"), c_div)
    assert at_thread(translate("(u - 3) & 7", unsigned), 0, u=1) == 6   # (2^32 - 2) & 7


def test_c_division_prints_and_evaluates_as_c():
    x = sympy.Symbol("x", integer=True)
    assert cuda_text(c_div(x - 3, 2)) == "(x - 3) / 2" and cuda_text(c_mod(x, 7)) == "(x) % 7"
    assert cuda_text(translate("(n - 3) & 7")) == "(n + 5) & 7"   # not %: n + 5 may be negative
    values = np.arange(-4, 5)
    assert sympy.lambdify([x], c_div(x, 2), "numpy")(values).tolist() == [int(v / 2) for v in values]
    assert sympy.lambdify([x], c_mod(x, 3), "numpy")(values).tolist() == [int(np.fmod(v, 3)) for v in values]


def test_a_quasi_affine_term_has_no_coefficient():
    with pytest.raises(NotAffine):
        coefficient(sympy.floor(TID["x"] / 2) + TID["x"], TID["x"])
    assert coefficient(sympy.floor(param_symbol("n") / 2) + 3 * TID["x"], TID["x"]) == 3


# -- programs ------------------------------------------------------------------------------------------

HOST_1D = """
int main()
{{
    int n = 1000;
    float *da, *db;
    cudaMalloc(&da, n * sizeof(float));
    cudaMalloc(&db, n * sizeof(float));
    {name}<<<(n + 255) / 256, 256>>>(da, db, n);
    cudaFree(da);
    cudaFree(db);
    return 0;
}}
"""

KERNEL_1D = """
#include <cuda_runtime.h>
#define M 7
__global__ void {name}(const float *in, float *out, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if ({guard})
        out[i] = in[{subscript}];
}}
"""

PROGRAMS_1D = {
    "shift_guarded": ("i >= 3 && i < n", "(i - 3) / 2"),
    "shift_truncating": ("i < n", "(i - 3) / 2 + 1"),     # in[0] at i = 0 in C, in[-1] with floor
    "wrap": ("i < n", "i % M"),
    "halve": ("i < n", "i >> 1"),
    "lanes": ("i < n", "i & 31"),
    "swap": ("i < n", "i ^ 1"),
}

HALF_ROWS = """
#include <cuda_runtime.h>
__global__ void half_rows(const float *A, const float *B, float *C, int n)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && j < n)
        C[i * n + j] = A[(i / 2) * n + j] * B[j];
}
int main()
{
    int n = 512;
    float *dA, *dB, *dC;
    cudaMalloc(&dA, n * n * sizeof(float));
    cudaMalloc(&dB, n * sizeof(float));
    cudaMalloc(&dC, n * n * sizeof(float));
    dim3 block(16, 16);
    dim3 grid(n / 16, n / 16);
    half_rows<<<grid, block>>>(dA, dB, dC, n);
    return 0;
}
"""


def program_text(name: str) -> str:
    if name == "half_rows":
        return HALF_ROWS
    guard, subscript = PROGRAMS_1D[name]
    return KERNEL_1D.format(name=name, guard=guard, subscript=subscript) + HOST_1D.format(name=name)


ALL = [*PROGRAMS_1D, "half_rows"]


def write(tmp_path, name: str):
    path = tmp_path / f"{name}.cu"
    path.write_text(textwrap.dedent(program_text(name)))
    return path


@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("name", ALL)
def test_the_raw_passes_leave_quasi_affine_reads_as_written_and_match_the_naive_kernel(tmp_path, name, target):
    path = write(tmp_path, name)
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target(target), parse_pass_list(None), Diagnostics(quiet=True),
                             validate=False)
    (kernel,) = result.kernels
    text = kernel_source(kernel.optimized.funcdef)
    if name == "half_rows":     # merged in y on sm_90: each of a thread's rows reads its own row of A
        assert "A[i / 2 * n + j]" in text or "A[(i + 8 * r) / 2 * n + j]" in text
    else:
        assert f"in[{PROGRAMS_1D[name][1].replace('M', '7')}]" in text     # the kernel as parsed
    extents = {"in": 1024} if name == "swap" else {}     # `i ^ 1` is no subscript the sizing can bound
    for case in default_cases(kernel.naive, program, {}, None, extents=extents):
        outcome = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5,
                           device_functions=program.device_functions, check_races=True)
        assert outcome.ok, outcome.error or outcome.mismatches


@pytest.mark.parametrize("name", ["wrap", "half_rows", "shift_guarded", "halve", "lanes"])
def test_a_quasi_affine_read_is_analysed_as_moving_with_the_thread(tmp_path, name):
    program = load_program(str(write(tmp_path, name)), diagnostics=Diagnostics(quiet=True))
    read = next(a for a in collect_accesses(program.kernels[0]) if a.mode == "read" and a.array in ("in", "A"))
    assert read.kind == "quasi-affine" and read.index is None and not read.understood
    assert "quasi-affine" in read.why_unresolved


def test_analyze_counts_the_sectors_of_a_remainder_read_and_finds_it_not_uniform(tmp_path):
    program = load_program(str(write(tmp_path, "wrap")), diagnostics=Diagnostics(quiet=True))
    reports = {r.access.array: r for r in analyze_kernel(program.kernels[0], get_target("g80")).reports}
    wrap = reports["in"].coalescing
    assert not wrap.broadcast and not wrap.coalesced     # 7 elements over 16 threads of a half-warp
    assert reports["in"].as_dict()["quasi_affine"] == "(blockDim.x*blockIdx.x + threadIdx.x) % 7"
    assert reports["in"].partition is None


@pytest.mark.parametrize("name", ["halve", "lanes", "swap", "shift_truncating"])
def test_analyze_and_compile_end_without_a_traceback(tmp_path, name):
    path = write(tmp_path, name)
    for target in ("g80", "sm_90"):
        for command in (["analyze", str(path)], ["compile", str(path), "-o", str(tmp_path / "out.cu")]):
            proc = run_cli(*command, "--target", target)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    subscript = PROGRAMS_1D[name][1]
    assert f"in[{subscript}]" in (tmp_path / "out.cu").read_text()


def test_a_quasi_affine_store_that_ignores_a_launched_dimension_is_a_race_of_the_launch(tmp_path):
    from gpgpu_opt.analysis.launch_races import launch_races
    path = tmp_path / "k.cu"
    path.write_text("__global__ void halves(float *out, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "    if (i < n)\n        out[i / 2] += 1.0f;\n}\n")
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    (race,) = launch_races(kernel, (32, 8), (4, 1))
    assert race.subject == "out[i / 2]" and race.dimension == "threadIdx.y"
