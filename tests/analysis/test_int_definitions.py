"""Integer locals assigned more than once (analysis/definitions.py): a local declared and then assigned once
is defined at its assignment; any other reassigned local has its reaching definition followed for the
analysis (kind `redefined`, or `clamped` through an edge clamp, left as written by the passes); induction
variables of canonical loops are in closed form; what the analysis does not follow stays unresolved."""
from __future__ import annotations

import textwrap

import pytest
import sympy

from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.launch_races import launch_races
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, iterator_symbol, param_symbol
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

X = BID["x"] * BDIM["x"] + TID["x"]
Y = BID["y"] * BDIM["y"] + TID["y"]
N, NX, NY = param_symbol("n"), param_symbol("nx"), param_symbol("ny")
K = iterator_symbol("k")


def load(tmp_path, source: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def accesses_of(tmp_path, body: str, params: str = "const float *in, float *out, int n"):
    program = load(tmp_path, f"__global__ void k({params})\n{{\n{textwrap.dedent(body)}\n}}\n")
    return collect_accesses(program.kernels[0])


def same(a, b) -> bool:
    return sympy.expand(a - b) == 0


MV_DECLARED = """
__global__ void mv(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c, int n)
{
    int i;
    float sum = 0.0f;
    i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        for (int k = 0; k < n; k++)
            sum += a[i * n + k] * b[k];
        c[i] = sum;
    }
}
"""


def test_a_local_declared_then_assigned_once_is_defined_at_its_assignment(tmp_path):
    (kernel,) = load(tmp_path, MV_DECLARED).kernels
    reads = {a.index_text: a for a in collect_accesses(kernel)}
    assert reads["i * n + k"].kind == "loop" and reads["i * n + k"].understood
    assert same(reads["i * n + k"].index, X * N + K)
    assert reads["i"].kind == "thread" and same(reads["i"].index, X)


def test_a_single_definition_is_merged_by_normalize_and_the_kernel_is_merged_and_checked(tmp_path):
    """Before: `a[i * n + k]` was unresolved and no pass applied. Now normalize writes `int i = ...;` and the
    merge pass splits the loop over a warp, checked by emulation."""
    program = load(tmp_path, MV_DECLARED)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                             validate=True)
    (kernel,) = result.kernels
    assert kernel.transformed
    assert kernel.validation.as_dict()["status"] == "passed", kernel.validation.as_dict()
    text = kernel_source(kernel.optimized.funcdef)
    assert "int i = " in text and "int i;" not in text


@pytest.mark.parametrize("body", [
    # the assignment is not in the declaration's block: on the other path i has no value
    "int i;\nif (n > 0) i = threadIdx.x;\nout[i] = in[0];",
    # used before its assignment
    "int i;\nout[0] = in[0];\nout[1] = i;\ni = threadIdx.x;\nout[i] = in[0];",
])
def test_what_is_not_a_single_dominating_definition_is_not_one(tmp_path, body):
    stores = [a for a in accesses_of(tmp_path, body) if a.array == "out" and a.index_text == "i"]
    assert stores and all(not a.understood for a in stores)


def test_the_reaching_definition_of_a_reassigned_local(tmp_path):
    body = """
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int c = i;
    out[c] = in[c];
    c = i + n;
    out[c] = in[c + 1];
    c += n;
    out[c] = 0.0f;
    """
    found = [a for a in accesses_of(tmp_path, body) if a.array == "out"]
    assert [a.kind for a in found] == ["redefined"] * 3
    assert not any(a.understood for a in found)
    for access, value in zip(found, (X, X + N, X + 2 * N)):
        assert same(access.analysis_index, value)
    assert "`c` is assigned more than once" in found[0].why_unresolved


@pytest.mark.parametrize("else_branch, agrees", [("c = i + 1;", True), ("c = i + 2;", False), ("", False)])
def test_an_if_keeps_the_definition_both_branches_agree_on(tmp_path, else_branch, agrees):
    body = f"""
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int c = i;
    if (n > 4) {{ c = i + 1; }} else {{ {else_branch} }}
    out[c] = 1.0f;
    """
    (store,) = [a for a in accesses_of(tmp_path, body) if a.array == "out"]
    if agrees:
        assert store.kind == "redefined" and same(store.analysis_index, X + 1)
    else:
        assert store.kind == "unresolved"


HOTSPOT_STYLE = """
__global__ void planes(const float *tIn, float *tOut, int nx, int ny, int nz, float cc, float cw)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    int j = blockDim.y * blockIdx.y + threadIdx.y;
    int c = i + j * nx;
    int xy = nx * ny;
    int W = (i == 0) ? c : c - 1;
    tOut[c] = cc * tIn[c] + cw * tIn[W];
    c += xy;
    W += xy;
    for (int k = 1; k < nz - 1; ++k) {
        tOut[c] = cc * tIn[c + xy] + cw * tIn[W];
        c += xy;
        W += xy;
        tOut[c] = 0.5f * tIn[c];
    }
    tOut[c] = cc * tIn[c] + cw * tIn[W];
}
"""


def test_induction_variables_of_a_canonical_loop_in_closed_form(tmp_path):
    """`c += xy` once per iteration: at the top of iteration k (from 1), c = c1 + (k - 1) * xy, where c1 is
    its value entering the loop; after its increment, one xy more. The clamped W moves likewise."""
    (kernel,) = load(tmp_path, HOTSPOT_STYLE).kernels
    found = collect_accesses(kernel)
    xy, c0 = NX * NY, X + Y * NX
    in_loop = [a for a in found if a.loops]
    by_text = {(a.array, a.index_text, a.mode): a for a in in_loop[:3]}
    assert same(by_text["tOut", "c", "write"].analysis_index, c0 + K * xy)
    assert same(by_text["tIn", "c + xy", "read"].analysis_index, c0 + (K + 1) * xy)
    assert by_text["tIn", "W", "read"].kind == "clamped"
    assert same(by_text["tIn", "W", "read"].analysis_index, c0 - 1 + K * xy)
    after_increment = [a for a in in_loop[3:] if a.array == "tIn"]
    assert same(after_increment[0].analysis_index, c0 + (K + 1) * xy)
    assert all(a.kind in ("redefined", "clamped") and not a.understood for a in in_loop)
    before = [a for a in found if not a.loops and a.location.line == 9]
    assert {a.kind for a in before} == {"redefined", "clamped"}
    after = [a for a in found if not a.loops and a.location.line == 18]
    assert after and all(a.kind == "unresolved" for a in after)  # the exit value is not followed


@pytest.mark.parametrize("loop_body", [
    "out[c] = 1.0f; if (out[0] > 0.0f) continue; c += n;",   # a jump may skip the increment
    "out[c] = 1.0f; if (k > 2) c += n;",                      # not every iteration
    "out[c] = 1.0f; c += n; c += n;",                          # two increments
    "out[c] = 1.0f; c += k;",                                  # a step that changes in the loop
])
def test_what_is_not_an_induction_variable_stays_unresolved_in_the_loop(tmp_path, loop_body):
    body = f"""
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < n; k++) {{ {loop_body} }}
    """
    first = [a for a in accesses_of(tmp_path, body) if a.array == "out"][0]
    assert first.kind == "unresolved"


@pytest.mark.parametrize("body", [
    "int c = threadIdx.x;\nout[c++] = 1.0f;\nout[c] = 2.0f;",                 # assigned inside an expression
    "int c = threadIdx.x;\nc = c + 1;\nint *p = &c;\nout[c] = 2.0f;",         # address taken
    "int c = threadIdx.x;\nswitch (n) { case 1: c = 4; }\nout[c] = 2.0f;",    # a switch
    "int c = threadIdx.x;\nwhile (c < n) c += 32;\nout[c] = 2.0f;",            # after a loop
    "int c = threadIdx.x;\nc = in[c] > 0.0f ? 1 : 2;\nout[c] = 2.0f;",        # a loaded value
])
def test_what_the_analysis_does_not_follow_stays_unresolved(tmp_path, body):
    last = [a for a in accesses_of(tmp_path, body) if a.array == "out" and a.mode == "write"][-1]
    assert last.kind == "unresolved" and not last.understood


def test_a_reassigned_parameter_is_not_the_value_it_was_passed(tmp_path):
    """Before, `off` stayed the parameter's symbol after `off += 1`: `out[off]` read as `out[off]`, a
    wrong affine subscript a pass could rely on."""
    body = "off += 1;\nout[off + threadIdx.x] = in[threadIdx.x];"
    (store,) = [a for a in accesses_of(tmp_path, body, "const float *in, float *out, int off")
                if a.array == "out"]
    assert not store.understood and store.kind == "redefined"
    assert same(store.analysis_index, param_symbol("off") + 1 + TID["x"])


def test_an_unresolved_store_is_not_taken_for_a_race_of_the_naive_launch(tmp_path):
    """`tOut[c]` after the loop is unresolved (`?c`): that says nothing of which threads store where. Before,
    it was read as a subscript free of threadIdx.y, a race of every 64x4 launch."""
    (kernel,) = load(tmp_path, HOTSPOT_STYLE).kernels
    assert launch_races(kernel, (64, 4), (None, 1)) == []


def test_a_loop_whose_start_is_not_known_has_no_closed_form(tmp_path):
    """The trip index `k - s` with `s` redefined is not one known expression: the clamped W in the loop gets no
    interior (an interior with an opaque part would be no value at all)."""
    body = """
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int W = (c == 0) ? c : c - 1;
    int s = 0;
    s = n;
    for (int k = s; k < n + 4; k++) { out[c] = in[W]; W += 4; }
    """
    (read,) = [a for a in accesses_of(tmp_path, body) if a.array == "in"]
    assert read.kind == "unresolved"


def test_a_local_shadowed_in_a_block_is_not_followed(tmp_path):
    body = """
    int c = threadIdx.x;
    c = c + 1;
    { int c = 5; out[c] = 0.0f; }
    out[c] = 1.0f;
    """
    last = [a for a in accesses_of(tmp_path, body) if a.array == "out"][-1]
    assert last.kind == "unresolved"
