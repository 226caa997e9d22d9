"""`bool` flags widened as `int` lanes (passes/vectorize/bool_lanes.py): a flag that only holds 0/1 values and is
only tested becomes an `int4` of lanes; a flag used in arithmetic or given a float stays bool, and widen says
why it cannot widen. Emulated against the naive kernel with the flag parameter false and true, at sizes no
vector divides; built with nvcc."""
from __future__ import annotations

import textwrap

import pytest
from pycparser import c_ast

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes.vectorize.bool_lanes import bool_locals_as_int
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

#: A flag computed per element and a flag parameter, in the style of signal-processing kernels.
FLAGS = """
__global__ void clip(float *out, const float *in, int n, bool mirror)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i];
        bool high = v > 1.0f;
        bool low = !high && v < -1.0f;
        bool outside = high || low;
        if (mirror && outside)
            v = -v;
        out[i] = outside == true ? 0.5f * v : v;
    }
}

void run(float *out, const float *in, int n, bool mirror)
{
    clip<<<(n + 255) / 256, 256>>>(out, in, n, mirror);
}
"""


@pytest.fixture(scope="module")
def flags(tmp_path_factory):
    return compile_source(tmp_path_factory, "flags", FLAGS, passes="vectorize", vector_width=4)


def test_flags_that_are_only_tested_become_int_lanes(flags):
    clip = flags.kernels[0]
    text = kernel_source(clip.optimized.funcdef)
    assert "int4 high = make_int4(v.x > 1.0f, v.y > 1.0f, v.z > 1.0f, v.w > 1.0f);" in text
    assert "int4 outside = make_int4(high.x || low.x," in text
    assert "int high = v > 1.0f;" in text           # the scalar path's lanes too
    assert clip.validation.status == "passed"


@pytest.mark.parametrize("n", [37, 6, 4 * 50 + 3])
@pytest.mark.parametrize("mirror", [0, 1])
def test_the_int_lanes_match_the_bool_flags(flags, n, mirror):
    assert_equivalent(flags.kernels[0], {"n": n, "mirror": mirror}, (n, 1), seed=n + mirror)


def test_the_int_lanes_build(flags, tmp_path_factory):
    assert_builds(flags, tmp_path_factory)


@pytest.mark.parametrize("body, kept", [
    ("bool big = v > 1.0f; out[i] = v + big;", "big"),          # arithmetic: bool's own conversion
    ("bool some = v; out[i] = some ? v : 0.0f;", "some"),       # a float given to it: not 0/1
    ("bool a = v > 0.0f; bool b = a; out[i] = b ? v : 0.0f;", None),   # a flag from a flag
])
def test_only_flags_that_hold_and_are_tested_as_0_or_1_are_retyped(tmp_path, body, kept):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(f"""
        __global__ void k(float *out, const float *in, int n)
        {{
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            float v = in[i];
            {body}
        }}
    """))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    retyped = bool_locals_as_int(kernel.funcdef.body)
    declared = {d.name: d.type.type.names for d in kernel.funcdef.body.block_items if isinstance(d, c_ast.Decl)}
    if kept is None:
        assert retyped == ["a", "b"] and declared["b"] == ["int"]
    else:
        assert retyped == [] and declared[kept] == ["bool"]


def test_a_flag_in_arithmetic_keeps_the_kernel_narrow_with_a_note(tmp_path_factory):
    result = compile_source(tmp_path_factory, "arith", """
        __global__ void k(float *out, const float *in, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                bool big = in[i] > 1.0f;
                out[i] = in[i] + big;
            }
        }
    """, passes="vectorize", vector_width=4)
    assert "'big' depends on x and is not a scalar of a vector type's element" in \
        " ".join(vectorize_notes(result.kernels[0], "skipped"))
