"""Induction variables read in closed form (analysis/induction.py): a 2-D grid of threads marching a
z loop, its center and clamped neighbours stepped a plane at a time, as 3-D heat stencils write them. The rewrite
restates the kernel for the later passes: alone it is no transformation (the output keeps the user's text, so
compile has nothing to check), and each rewrite is emulated here against the naive kernel, with a z extent
where the loop runs and ones where it does not."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source

#: A plane-marching stencil: the center `at` and four clamped neighbours stepped by a plane before, in and
#: after the z loop, a rolling window of three planes in registers, no guard (the grid tiles the plane).
MARCH = """
__global__ void march(const float *pw, const float *src, float *dst, int nx, int ny, int nz, float a, float b)
{
    int x = blockDim.x * blockIdx.x + threadIdx.x;
    int y = blockDim.y * blockIdx.y + threadIdx.y;
    int at = x + y * nx;
    int plane = nx * ny;
    int west = (x == 0) ? at : at - 1;
    int east = (x == nx - 1) ? at : at + 1;
    int north = (y == 0) ? at : at - nx;
    int south = (y == ny - 1) ? at : at + nx;
    float lo, mid, hi;
    lo = mid = src[at];
    hi = src[at + plane];
    dst[at] = a * mid + b * (src[west] + src[east] + src[north] + src[south]) + lo + hi + pw[at];
    at += plane;
    west += plane;
    east += plane;
    north += plane;
    south += plane;
    for (int z = 1; z < nz - 1; z++) {
        lo = mid;
        mid = hi;
        hi = src[at + plane];
        dst[at] = a * mid + b * (src[west] + src[east] + src[north] + src[south]) + lo + hi + pw[at];
        at += plane;
        west += plane;
        east += plane;
        north += plane;
        south += plane;
    }
    lo = mid;
    mid = hi;
    dst[at] = a * mid + b * (src[west] + src[east] + src[north] + src[south]) + lo + hi + pw[at];
    return;
}

void run(int nx, int ny, int nz)
{
    float *pw, *src, *dst;
    cudaMalloc(&pw, nx * ny * nz * sizeof(float));
    cudaMalloc(&src, nx * ny * nz * sizeof(float));
    cudaMalloc(&dst, nx * ny * nz * sizeof(float));
    dim3 block(32, 4);
    dim3 grid(nx / 32, ny / 4);
    march<<<grid, block>>>(pw, src, dst, nx, ny, nz, 0.5f, 0.125f);
}
"""


def _kernel(source_body: str) -> str:
    """A kernel `k` over a 1-D row of threads with `body`, launched on n threads."""
    return f"""
__global__ void k(const float *src, float *dst, int n, int m, int d)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
{source_body}
    }}
}}

void run(int n, int m, int d)
{{
    float *src, *dst;
    cudaMalloc(&src, 64 * n * sizeof(float));
    cudaMalloc(&dst, 64 * n * sizeof(float));
    k<<<(n + 127) / 128, 128>>>(src, dst, n, m, d);
}}
"""


def _notes(kernel, action: str) -> list[str]:
    return [f"{d.subject}: {d.reason}" for d in kernel.context.log.decisions
            if d.pass_name == "normalize" and d.action == action]


@pytest.fixture(scope="module")
def march(tmp_path_factory):
    return compile_source(tmp_path_factory, "march", MARCH, passes="normalize")


def test_a_plane_marching_stencil_reads_its_steps_in_closed_form(march):
    """Before: `at` was assigned more than once (every pass left its accesses as written). Now one definition,
    `at + z * plane` in the loop, `at + (nz - 1) * plane` after it where the loop ran, `at + plane` where not."""
    (k,) = march.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "+= plane" not in text
    assert "dst[at + z * plane] = " in text and "src[at + z * plane + plane]" in text
    assert "src[west + z * plane]" in text and "src[south + z * plane]" in text
    assert "if (1 < nz - 1) {" in text
    assert "dst[at + (nz - 1) * plane] = " in text and "dst[at + plane] = " in text
    # the statements after the loop that read no stepped local are written once, before the test (and the
    # chained `lo = mid = src[at];` is two statements)
    assert "mid = src[at];\n    lo = mid;" in text
    assert text.count("lo = mid;") == 3 and text.count("mid = hi;") == 2
    assert sorted(_notes(k, "applied")) == [f"{v}: induction variable read in closed form (steps of plane)"
                                            for v in ("at", "east", "north", "south", "west")]
    assert not k.transformed        # a restatement alone: the user's text is written


@pytest.mark.parametrize("nz", [1, 2, 3, 7])
def test_the_closed_form_matches_the_steps_whether_the_loop_runs_or_not(march, nz):
    (k,) = march.kernels
    assert "if (1 < nz - 1)" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"nx": 36, "ny": 12, "nz": nz, "a": 0.5, "b": 0.125}, (36, 12), seed=nz)


def test_the_plane_marching_stencil_builds(march, tmp_path_factory):
    assert_builds(march, tmp_path_factory)


def test_a_loop_that_provably_runs_needs_no_test(tmp_path_factory):
    """Straight-line steps add up (two before the loop), in a guard's block, and a loop with a constant trip
    count needs no test whether it ran."""
    body = """
        int p = i;
        dst[p] = src[p];
        p += n;
        p += n;
        for (int r = 0; r < 4; r++) {
            dst[p] = src[p] + 1.0f;
            p += n;
        }
        dst[p] = src[p] * 2.0f;
"""
    (k,) = compile_source(tmp_path_factory, "adds_up", _kernel(body), passes="normalize").kernels
    text = kernel_source(k.optimized.funcdef)
    assert "dst[p + (r + 2) * n] = src_val + 1.0f;" in text and "src[p + (r + 2) * n]" in text
    assert "dst[p + 6 * n] = src_val2 * 2.0f;" in text and "if (0 < 4)" not in text
    assert_equivalent(k, {"n": 37, "m": 5, "d": 3}, (37, 1), seed=3)
    assert_equivalent(k, {"n": 45, "m": 3, "d": 2}, (45, 1), seed=3)


@pytest.mark.parametrize("name, body, why", [
    ("under_if", """
        int p = i;
        for (int r = 0; r < m; r++) {
            dst[p] = src[p];
            if (r > 1)
                p += n;
        }
""", "p: not read in closed form: 'p' is stepped at line 11 under an 'if' or in a nested or 'while' loop"),
    ("two_steps", """
        int p = i;
        for (int r = 0; r < m; r++) {
            p += n;
            dst[p] = src[p];
            p += n;
        }
""", "p: not read in closed form: 'p' is stepped 2 times in the body of the loop at line 8"),
    ("written_step", """
        int p = i;
        int s = n;
        for (int r = 0; r < m; r++) {
            dst[p] = src[p];
            p += s;
            s += 1;
        }
""", "p: not read in closed form: 'p' is stepped by 's', and the kernel writes 's'"),
    ("not_at_end", """
        int p = i;
        for (int r = 0; r < m; r++) {
            p += n;
            dst[p] = src[p];
        }
""", "p: not read in closed form: 'p' is stepped at line 9, not at the end of its loop's body"),
    ("bound_not_affine", """
        int p = i;
        for (int r = 0; r < m % 5; r++) {
            dst[p] = src[p];
            p += n;
        }
""", "p: not read in closed form: the loop at line 8 has a bound that is not integer arithmetic"),
])
def test_a_step_outside_the_whitelist_leaves_the_local_as_written(name, body, why, tmp_path_factory):
    (k,) = compile_source(tmp_path_factory, name, _kernel(body), passes="normalize").kernels
    assert why in [n.split(" (only")[0] if "under an 'if'" in n else n for n in _notes(k, "skipped")], \
        _notes(k, "skipped")
    assert not [n for n in _notes(k, "applied") if n.startswith("p:")]
    text = kernel_source(k.optimized.funcdef)
    assert "p += " in text or "p++" in text


def test_a_chained_assignment_is_split_into_statements(tmp_path_factory):
    """`lo = mid = hi = src[p];` is three statements, the innermost first: one effect per statement, which
    the hoisting of loads and widening read (normalize/chains.py)."""
    body = """
        float lo, mid;
        int hi;
        lo = mid = hi = src[i] * 3.0f;
        dst[i] = lo + mid + hi;
"""
    (k,) = compile_source(tmp_path_factory, "chain", _kernel(body), passes="normalize").kernels
    text = kernel_source(k.optimized.funcdef)
    assert "hi = src_val * 3.0f;\n        mid = hi;\n        lo = mid;" in text
    assert_equivalent(k, {"n": 45, "m": 1, "d": 1}, (45, 1), seed=7)     # `hi`'s int truncation included
