"""Canonical loops up and down: direction, trip count and value range, and the access analyses (kind,
coalescing, reuse) of subscripts in loops that count down."""
import textwrap

import pytest
import sympy
from pycparser import c_parser

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.loops import canonical_loop
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target

n, m = param_symbol("n"), param_symbol("m")


def loop_of(header: str):
    ast = c_parser.CParser().parse(f"void f(int n, int m) {{ int k; {header} ; }}")
    node = ast.ext[0].body.block_items[-1]
    return canonical_loop(node, {"n": n, "m": m})


@pytest.mark.parametrize("header, trips, first, last", [
    ("for (int k = n - 1; k >= 0; k--)", n, n - 1, 0),
    ("for (k = n; k > 0; --k)", n, n, 1),
    ("for (int k = 10; k > 0; k -= 3)", 4, 10, 1),
    ("for (int k = 10; k > 0; k = k - 2)", 5, 10, 2),
    ("for (int k = 9; 0 <= k; k--)", 10, 9, 0),
    ("for (int k = 9; k != 3; k--)", 6, 9, 4),
    ("for (int k = n - 1; k >= 0 && k >= m; k--)", n - sympy.Max(0, m), n - 1, sympy.Max(0, m)),
])
def test_downward_loops_count_their_trips_and_values(header, trips, first, last):
    loop = loop_of(header)
    assert loop.is_downward and not loop.is_upward
    assert sympy.simplify(loop.trip_count() - trips) == 0
    lo_hi = loop.value_range()
    assert sympy.simplify(lo_hi[0] - first) == 0 and sympy.simplify(lo_hi[1] - last) == 0
    assert loop.end_exclusive is None        # an upward-only notion


@pytest.mark.parametrize("header, trips, last", [
    ("for (int k = 0; k < n; k++)", n, n - 1),
    ("for (int k = 0; k <= n; k++)", n + 1, n),
    ("for (int k = 0; k < 10; k += 4)", 3, 8),
    ("for (int k = 2; k < n && k < m; k = k + 1)", sympy.Min(n, m) - 2, sympy.Min(n, m) - 1),
])
def test_upward_loops_keep_their_trip_counts(header, trips, last):
    loop = loop_of(header)
    assert loop.is_upward and not loop.is_downward
    assert sympy.simplify(loop.trip_count() - trips) == 0
    assert sympy.simplify(loop.value_range()[1] - last) == 0


@pytest.mark.parametrize("header", [
    "for (int k = 0; k > 5; k++)",          # compared the wrong way for its direction
    "for (int k = n; k < 0; k--)",
    "for (int k = 1; k < n; k *= 2)",       # multiplicative
    "for (int k = n; k > 0; k = n - k)",    # not a step
])
def test_loops_without_an_analysable_range_say_so(header):
    loop = loop_of(header)
    assert loop is None or (loop.trip_count() is None and loop.value_range() is None)


def analyse(tmp_path, source, target, block):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    kernel = load_program(str(path)).kernels[0]
    return {(a["array"], a["mode"]): a
            for a in analyze_kernel(kernel, get_target(target), block).as_dict()["accesses"]}


MV = """
    __global__ void mv(const float *A, const float *x, float *y, int n) {
        int row = blockIdx.x * blockDim.x + threadIdx.x;
        if (row < n) {
            float sum = 0.0f;
            for (LOOP)
                sum += A[row * n + k] * x[k];
            y[row] = sum;
        }
    }
"""


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_a_reversed_loop_reads_like_the_forward_one(tmp_path, target):
    up = analyse(tmp_path, MV.replace("LOOP", "int k = 0; k < n; k++"), target, (64, 1))
    down = analyse(tmp_path, MV.replace("LOOP", "int k = n - 1; k >= 0; k--"), target, (64, 1))
    for key in (("A", "read"), ("x", "read")):
        a, b = up[key], down[key]
        assert a["kind"] == b["kind"] == "loop" and b["loops"] == ["k"]
        for field in ("coalesced", "sectors_per_request", "efficiency", "broadcast", "load_path"):
            assert a[field] == b[field], (key, field)
        assert {r["kind"] + r["scope"] for r in a["reuse"]} == {r["kind"] + r["scope"] for r in b["reuse"]}
    assert down[("A", "read")]["load_path"] == "G2S"


def test_a_strided_downward_loop_has_spatial_reuse_by_its_step(tmp_path):
    src = MV.replace("LOOP", "int k = n - 1; k >= 0; k -= 2")
    a = analyse(tmp_path, src, "sm_90", (64, 1))[("A", "read")]
    spatial = [r for r in a["reuse"] if r["kind"] == "spatial" and r["scope"] == "loop"]
    assert spatial and "holds 4 iterations of 'k'" in spatial[0]["description"]
