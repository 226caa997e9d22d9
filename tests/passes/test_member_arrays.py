"""A struct of arrays passed by value (`ParticlesSoA s` read as `s.x[i]`) split into its fields for the passes
(rewriting/member_arrays.py): the output keeps the struct parameter and binds each field it reads to a local.
Nothing is known of where the fields point, so no pass may assume they do not alias. Widened, emulated
against the naive kernel at sizes no vector divides (the emulator sees both with the fields as parameters),
built with nvcc; a struct used otherwise than field by field keeps the kernel as written."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.rewriting import member_arrays
from gpgpu_opt.check.cases import Case, run_case
from tests.passes.vectorize_kit import assert_builds, compile_source, compile_with_notes

#: Parameters gathered in a struct, in the style of simulation codes: arrays, a count and a constant.
SOA = """
struct Fields {
    float *u;
    const float *v;
    const float *w;
    float scale;
};

__global__ void combine(Fields f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        f.u[i] = f.scale * f.u[i] + f.v[i] * f.w[i];
}

int main(int argc, char **argv)
{
    int n = argc << 20;
    Fields f;
    cudaMalloc(&f.u, n * sizeof(float));
    cudaMalloc((void **)&f.v, n * sizeof(float));
    cudaMalloc((void **)&f.w, n * sizeof(float));
    f.scale = 0.5f;
    combine<<<(n + 255) / 256, 256>>>(f, n);
    return 0;
}
"""


@pytest.fixture(scope="module")
def soa(tmp_path_factory):
    return compile_source(tmp_path_factory, "soa", SOA, passes=None)


def test_the_fields_are_bound_to_locals_and_the_struct_stays_a_parameter(soa):
    combine = soa.kernels[0]
    text = kernel_source(combine.optimized.funcdef)
    assert "void combine(Fields f, int n)" in text
    assert ("    // the struct's fields read through locals: f.u, f.v, f.w, f.scale\n"
            "    float *f_u = f.u;\n    const float *f_v = f.v;\n    const float *f_w = f.w;\n"
            "    float f_scale = f.scale;\n") in text
    assert "float4" in text and "__restrict__" not in text
    assert combine.validation.status == "passed"
    aliasing = combine.context.facts.aliasing
    assert not aliasing.restrict and "struct passed by value" in aliasing.why_not


@pytest.mark.parametrize("n", [4 * 37 + 3, 5, 64, 4 * 300 + 1])
def test_the_split_kernel_matches_the_naive_one(soa, n):
    combine = soa.kernels[0]
    naive, optimized = member_arrays.emulated(combine.naive), member_arrays.emulated(combine.optimized)
    assert [p.name for p in naive.params] == ["f__u", "f__v", "f__w", "f__scale", "n"]
    result = run_case(naive, optimized, combine.context.facts.naive_block,
                      Case(sizes={"n": n, "f__scale": 0.5}, global_space=(n, 1)), seed=n, device_functions={})
    assert result.ok and result.elements == n, result.error or result.mismatches


def test_the_split_kernel_builds(soa, tmp_path_factory):
    assert_builds(soa, tmp_path_factory)


@pytest.mark.parametrize("body, why", [
    ("f.u = f.u + 1; if (i < n) f.u[i] = 0.0f;", "the field 'f.u' is assigned or its address taken"),
    ("if (i < n) reset(f, i);", "the struct 'f' is used whole, not field by field"),
    ("float f_u = 2.0f; if (i < n) f.u[i] = f_u;", None),   # a name of the kernel's own: the field gets another
])
def test_a_struct_used_otherwise_than_field_by_field_keeps_the_kernel_as_written(tmp_path_factory, body, why):
    source = SOA.replace("    if (i < n)\n        f.u[i] = f.scale * f.u[i] + f.v[i] * f.w[i];", f"    {body}") \
        .replace("__global__ void combine", "__device__ void reset(Fields f, int i) { f.u[i] = 0.0f; }\n\n"
                                            "__global__ void combine")
    result, notes = compile_with_notes(tmp_path_factory, "soa_kept", source)
    combine = next(k for k in result.kernels if k.naive.name == "combine")
    if why is None:
        assert combine.transformed and "float *f_u2 = f.u;" in kernel_source(combine.optimized.funcdef)
        return
    assert not combine.transformed
    assert kernel_source(combine.optimized.funcdef) == kernel_source(combine.naive.funcdef)
    assert f"'combine' left as written: its struct of arrays is not read field by field ({why})" in notes
