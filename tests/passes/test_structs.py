"""Structs and arrays of arrays as parameters: `const Particle *p` read as `p[i].x`, a struct of pointers
passed by value (`s.a[i]`), pointers to pointers, `double c[][Y][X]` and `float a[N][M]`. The front end
accepts them, the analyses record their accesses (flattened for arrays of arrays, member stores as
stores), the emulator runs arrays of arrays, and a kernel with a struct pointer whose layout is not certain or
a pointer to pointers is left as written with a note (arrays of arrays and structs of arrays passed by value
are given to the passes flat: test_flat_arrays.py, test_member_arrays.py); the other kernels of the file are
still optimized."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
import sympy

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, iterator_symbol
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import default_cases, run_case

STRUCTS = """
typedef struct { float x, y, z, w; } Particle;
typedef struct { const float *a; const float *b; int n; } Params;
struct Cell { float heat; int kind; };

__global__ void advance(Particle *p, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i].x = p[i].x + dt * p[i].w;
}

__global__ void add(Params s, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < s.n)
        out[i] = s.a[i] + s.b[i];
}

__global__ void cells(struct Cell *c, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = c[i].heat;
}

__global__ void rows(float **r, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = r[i][0];
}

__global__ void scale(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = 2.0f * in[i];
}

int main(int argc, char **argv)
{
    int n = argc << 16;    /* known at run time: the widened kernel is chosen by size there */
    float *in, *out;
    cudaMalloc(&in, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(in, out, n);
    return 0;
}
"""

ARRAYS = """
#define Y 8
#define X 32
__global__ void planes(const double c[][Y][X], double out[][Y][X], int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < X && y < Y)
        for (int z = 0; z < nz; z++)
            out[z][y][x] = 2.0 * c[z][y][x] + c[z][y][(x + 1) % X];
}

__global__ void fixed(float a[16][64], float *o)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 64 && y < 16)
        o[y * 64 + x] = a[y][x];
}
"""


def load(tmp_path, source: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def compiled(tmp_path, source: str):
    program = load(tmp_path, source)
    diagnostics = Diagnostics(quiet=True)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=True)
    return program, {k.naive.name: k for k in result.kernels}, diagnostics


@pytest.mark.parametrize("kernel, why", [
    ("cells", "the parameter 'c' is a pointer to a struct,"),
    ("rows", "the parameter 'r' is a pointer to pointers"),
])
def test_a_kernel_with_a_struct_or_pointer_to_pointers_parameter_is_left_as_written(tmp_path, kernel, why):
    _, kernels, diagnostics = compiled(tmp_path, STRUCTS)
    result = kernels[kernel]
    assert not result.transformed
    assert kernel_source(result.optimized.funcdef) == kernel_source(result.naive.funcdef)
    assert any(f"'{kernel}' left as written: {why}" in n.message for n in diagnostics.notes), \
        [n.message for n in diagnostics.notes]


def test_a_struct_of_arrays_passed_by_value_reaches_the_passes(tmp_path):
    """Its fields are split for the passes (test_member_arrays.py); with no launch here none pays."""
    _, kernels, diagnostics = compiled(tmp_path, STRUCTS)
    assert not any("'add' left as written" in n.message for n in diagnostics.notes)
    assert kernel_source(kernels["add"].optimized.funcdef) == kernel_source(kernels["add"].naive.funcdef)


def test_the_other_kernels_of_the_file_are_still_optimized(tmp_path):
    program, kernels, _ = compiled(tmp_path, STRUCTS)
    assert kernels["scale"].transformed
    assert kernels["scale"].validation.as_dict()["status"] == "passed"


def test_a_member_store_is_a_store(tmp_path):
    program = load(tmp_path, """
        __global__ void setx(float4 *a, const float *b, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                a[i].x = b[i];
                a[i].y += b[i];
                a[i].z++;
            }
        }
    """)
    modes = [(a.mode, a.index_text) for a in collect_accesses(program.kernels[0]) if a.array == "a"]
    assert modes == [("write", "i"), ("write", "i"), ("read", "i"), ("read", "i"), ("write", "i")]


def test_struct_elements_are_analysed_fields_or_unresolved_accesses_with_a_reason(tmp_path):
    program = load(tmp_path, STRUCTS)
    advance = next(k for k in program.kernels if k.name == "advance")
    accesses = [a for a in collect_accesses(advance) if a.array == "p"]
    assert {a.mode for a in accesses} == {"read", "write"}
    # four floats, no padding: field k of p[i] is float 4 * i + k, which no pass rewrites
    i = BID["x"] * BDIM["x"] + TID["x"]
    assert {sympy.expand(a.analysis_index - 4 * i) for a in accesses} == {0, 3}
    assert all(a.kind == "struct-field" and a.index is None for a in accesses)
    cells = next(k for k in program.kernels if k.name == "cells")  # a float and an int: no certain layout
    accesses = [a for a in collect_accesses(cells) if a.array == "c"]
    assert accesses and all(a.kind == "unresolved" and a.index is None and a.analysis_index is None
                            for a in accesses)
    assert all("struct type" in a.why_unresolved for a in accesses)


def test_array_of_arrays_parameters_record_their_inner_dimensions(tmp_path):
    program = load(tmp_path, ARRAYS)
    planes, fixed = program.kernels
    assert [p.inner_dims for p in planes.arrays] == [(8, 32), (8, 32)]
    assert [p.inner_dims for p in fixed.arrays] == [(64,), ()]
    assert not any(p.indirect for p in planes.arrays + fixed.arrays)


def test_array_of_arrays_accesses_are_flattened(tmp_path):
    program = load(tmp_path, ARRAYS)
    planes = program.kernels[0]
    x = BID["x"] * BDIM["x"] + TID["x"]
    y = BID["y"] * BDIM["y"] + TID["y"]
    z = iterator_symbol("z")
    by_text = {(a.array, a.mode, a.index_text): a for a in collect_accesses(planes)}
    out = by_text[("out", "write", "z][y][x")]
    assert out.kind == "array-of-arrays" and out.index is None and not out.understood
    assert sympy.expand(out.analysis_index - ((z * 8 + y) * 32 + x)) == 0
    assert by_text[("c", "read", "z][y][x")].kind == "array-of-arrays"
    assert by_text[("c", "read", "z][y][(x + 1) % 32")].kind == "quasi-affine"
    analysis = analyze_kernel(planes, get_target("sm_90"), block=(32, 8))
    report = next(r for r in analysis.reports if r.access.array == "c" and r.access.index_text == "z][y][x")
    assert report.coalescing.coalesced and report.access.kind == "array-of-arrays"


def test_the_emulator_runs_array_of_arrays_parameters(tmp_path):
    program = load(tmp_path, ARRAYS)
    planes = program.kernels[0]
    nz = 3
    c = np.random.default_rng(0).uniform(size=nz * 8 * 32)
    out = np.zeros(nz * 8 * 32)
    run_kernel(planes, (1, 1), (32, 8), {"c": c, "out": out, "nz": nz})
    grid = c.reshape(nz, 8, 32)
    np.testing.assert_allclose(out.reshape(nz, 8, 32), 2.0 * grid + np.roll(grid, -1, axis=2))


def test_arrays_of_arrays_no_pass_pays_for_stay_as_written_and_the_check_runs(tmp_path):
    """Flattened for the passes (tests/passes/test_flat_arrays.py), but with no launch in the file no pass
    rewrites them: the kernels are written as the user wrote them, with no note that they could not be."""
    program, kernels, diagnostics = compiled(tmp_path, ARRAYS)
    for name in ("planes", "fixed"):
        assert not kernels[name].transformed
        assert kernel_source(kernels[name].optimized.funcdef) == kernel_source(kernels[name].naive.funcdef)
        assert not any(f"'{name}' left as written" in n.message for n in diagnostics.notes)
    fixed = kernels["fixed"]
    for case in default_cases(fixed.naive, program, {}, None):
        outcome = run_case(fixed.naive, fixed.naive.copy(), fixed.context.facts.naive_block, case, seed=1,
                           device_functions=program.device_functions)
        assert outcome.ok and outcome.elements == 16 * 64, (outcome.error, outcome.mismatches)
