"""Edge clamps (`(i == 0) ? c : c - 1`, `min(i + 1, n - 1)`, `max(i - 1, 0)`, `i < n - 1 ? i + 1 : i`) are
piecewise-affine subscripts: the analyses see the interior piece (kind `clamped`), the passes leave the
access as written, and the rest of the kernel is still optimized and checked by emulation."""
from __future__ import annotations

import textwrap

import pytest
import sympy
from pycparser import c_parser

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.clamps import interior
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, NotAffine, iterator_symbol, param_symbol
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

I = BID["x"] * BDIM["x"] + TID["x"]
N = param_symbol("n")
ENV = {"i": I, "n": N, "c": I + 7 * N, "y": iterator_symbol("y")}
MOVING = {TID["x"], BID["x"], iterator_symbol("y")}


def expression(text: str):
    return c_parser.CParser().parse(f"int e = {text};").ext[0].init


@pytest.mark.parametrize("text, expected", [
    ("(i == 0) ? c : c - 1", I + 7 * N - 1),
    ("(i == n - 1) ? c : c + 1", I + 7 * N + 1),
    ("(i != 0) ? i - 1 : i", I - 1),
    ("min(i + 1, n - 1)", I + 1),
    ("max(i - 1, 0)", I - 1),
    ("max(0, i - 1)", I - 1),
    ("i < n - 1 ? i + 1 : i", I + 1),
    ("i >= n - 1 ? i : i + 1", I + 1),
    ("i > 0 ? i - 1 : i", I - 1),
    ("i < 1 ? i : i - 1", I - 1),
    ("(i < 0) ? 0 : i", I),
    ("(i > n - 1) ? n - 1 : i", I),
    ("min(y + 1, n - 1) * n + i", (iterator_symbol("y") + 1) * N + I),
    ("max(min(i, n - 1), 0)", I),
])
def test_the_interior_piece_of_each_clamp_shape(text, expected):
    value, clamps = interior(expression(text), ENV, {}, MOVING)
    assert sympy.expand(value - expected) == 0
    assert clamps


@pytest.mark.parametrize("text", [
    "(i < n) ? 2 * i : i",          # pieces that move by different steps
    "(n > 4) ? i : i + 1",          # a condition that does not move
    "min(i, i + 1)",                # both arguments move
    "max(n, 4)",                    # neither moves
    "(i & 1) ? i : i + 1",          # not a comparison
    "min(i)",
])
def test_what_is_not_a_clamp(text):
    with pytest.raises(NotAffine):
        interior(expression(text), ENV, {}, MOVING)


def test_an_expression_without_clamps_has_none():
    value, clamps = interior(expression("i + 1"), ENV, {}, MOVING)
    assert value == I + 1 and clamps == []


STENCIL = """
__global__ void diffuse(const float *t, float *out, int nx, int ny, float k)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < nx && y < ny) {
        int c = y * nx + x;
        int w = (x == 0) ? c : c - 1;
        int e = min(x + 1, nx - 1) + y * nx;
        int n = (y == 0) ? c : c - nx;
        int s = y < ny - 1 ? c + nx : c;
        int moved = (x == 0) ? c : c - 1;
        moved = moved + 1;
        out[c] = t[c] + k * (t[w] + t[e] + t[n] + t[s] + t[moved] - 4.0f * t[c]);
        out[(x == 0) ? c : c - 1] += 1.0f;
    }
}
"""


def kernel_of(tmp_path, source: str, index: int = 0):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    return program, program.kernels[index]


def test_clamped_reads_are_classified_with_their_interior(tmp_path):
    _, kernel = kernel_of(tmp_path, STENCIL)
    reads = {a.index_text: a for a in collect_accesses(kernel) if a.array == "t"}
    x = BID["x"] * BDIM["x"] + TID["x"]
    y = BID["y"] * BDIM["y"] + TID["y"]
    nx = param_symbol("nx")
    expected = {"w": y * nx + x - 1, "e": y * nx + x + 1, "n": y * nx + x - nx, "s": y * nx + x + nx}
    for name, interior_index in expected.items():
        access = reads[name]
        assert access.kind == "clamped" and access.index is None and not access.understood
        assert sympy.expand(access.analysis_index - interior_index) == 0
        assert "edge clamp" in access.why_unresolved
    assert reads["c"].kind == "thread" and reads["c"].understood
    # reassigned (`moved = moved + 1`): its reaching definition is still a clamp, interior `c - 1 + 1`
    assert reads["moved"].kind == "clamped" and not reads["moved"].understood
    assert sympy.expand(reads["moved"].analysis_index - (y * nx + x)) == 0


def test_a_clamped_store_stays_unresolved(tmp_path):
    _, kernel = kernel_of(tmp_path, STENCIL)
    clamped_out = [a for a in collect_accesses(kernel) if a.array == "out" and "?" in a.index_text]
    assert {a.mode for a in clamped_out} == {"read", "write"}
    assert {a.kind for a in clamped_out if a.mode == "write"} == {"unresolved"}


def test_coalescing_is_reported_from_the_interior(tmp_path):
    _, kernel = kernel_of(tmp_path, STENCIL)
    analysis = analyze_kernel(kernel, get_target("sm_90"), block=(16, 16))
    by_text = {r.access.index_text: r for r in analysis.reports if r.access.array == "t"}
    assert by_text["n"].coalescing.coalesced and by_text["s"].coalescing.coalesced
    assert not by_text["w"].coalescing.coalesced and not by_text["e"].coalescing.coalesced
    assert by_text["w"].as_dict()["sectors_per_request"] > by_text["n"].as_dict()["sectors_per_request"]
    assert by_text["w"].as_dict()["interior"] == "blockDim.x*blockIdx.x + blockDim.y*blockIdx.y*nx + " \
                                                 "nx*threadIdx.y + threadIdx.x - 1"
    assert by_text["moved"].coalescing.coalesced  # a clamp with interior `c` (its reaching definition)


MV_CLAMP = """
__global__ void mv_clamp(const float *m, const float *v, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; k++)
            sum += m[i * n + k] * v[k];
        out[i] = sum + v[max(i - 1, 0)];
    }
}

int main()
{
    int n = 4096;
    float *m, *v, *out;
    cudaMalloc(&m, n * n * sizeof(float));
    cudaMalloc(&v, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    mv_clamp<<<(n + 255) / 256, 256>>>(m, v, out, n);
    return 0;
}
"""


def test_a_kernel_with_a_clamp_is_optimized_checked_and_keeps_the_clamp(tmp_path):
    """The emulated check sizes `v` from the clamp's interior: it runs, and the kernel is written transformed
    (before, it could not size `v` and kept only what needs no check)."""
    program, _ = kernel_of(tmp_path, MV_CLAMP)
    diagnostics = Diagnostics(quiet=True)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=True)
    (kernel,) = result.kernels
    assert kernel.transformed
    assert kernel.validation.as_dict()["status"] == "passed", kernel.validation.as_dict()
    text = kernel_source(kernel.optimized.funcdef)
    assert "v[max(i - 1, 0)]" in text
    assert any("edge clamp" in n.message and "left as written" in n.message for n in diagnostics.notes)
