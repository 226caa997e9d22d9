"""A struct a thread reads whole and updates in one block (passes/vectorize/whole_structs.py): loaded as the
8- or 16-byte vectors that tile it, the fields kept in locals, the written ones stored back once. Emulated
against the naive kernels at sizes no block divides, built with nvcc; each refusal says why."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

#: An explicit Euler step on particles stored as an array of structs, and bodies of four floats whose mass
#: is renormalized: the styles of n-body and particle codes.
STRUCTS = """
struct Particle { float x, y, z; float vx, vy, vz; };
struct Body { float x, y, z, m; };

__global__ void drift(Particle *p, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i].x += p[i].vx * dt;
        p[i].y += p[i].vy * dt;
        p[i].z += p[i].vz * dt;
    }
}

__global__ void shrink(Body *b, float scale, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float r = sqrtf(b[i].x * b[i].x + b[i].y * b[i].y + b[i].z * b[i].z);
        b[i].m = b[i].m / (1.0f + scale * r);
    }
}

int main(int argc, char **argv)
{
    int n = argc << 20;
    Particle *p;
    Body *b;
    cudaMalloc(&p, n * sizeof(Particle));
    cudaMalloc(&b, n * sizeof(Body));
    drift<<<(n + 255) / 256, 256>>>(p, 0.01f, n);
    shrink<<<(n + 127) / 128, 128>>>(b, 0.5f, n);
    return 0;
}
"""


@pytest.fixture(scope="module")
def structs(tmp_path_factory):
    return compile_source(tmp_path_factory, "whole_structs", STRUCTS, passes="restrict,vectorize")


def test_a_24_byte_struct_moves_as_three_float2_and_its_written_fields_go_back_once(structs):
    drift = structs.kernels[0]
    text = kernel_source(drift.optimized.funcdef)
    assert "// vectorize: p[i] (6 floats of 'Particle') moved as 3 float2: 6 loads and 3 stores -> 3 and 2" in text
    assert "const float2 p_1 = ((const float2 *) p)[3 * i + 1];" in text and "float p_vz = p_2.y;" in text
    assert "p_x += p_vx * dt;" in text
    assert "((float2 *) p)[3 * i] = make_float2(p_x, p_y);\n        p[i].z = p_z;\n" in text
    assert "p[i].vx" not in text and drift.validation.status == "passed"


def test_a_16_byte_struct_moves_as_one_float4(structs):
    shrink = structs.kernels[1]
    text = kernel_source(shrink.optimized.funcdef)
    assert "const float4 b_0 = ((const float4 *) b)[i];" in text
    assert "b[i].m = b_m;" in text      # one field written of the four: a scalar store
    assert "float r = sqrtf(b_x * b_x + b_y * b_y + b_z * b_z);" in text
    assert shrink.validation.status == "passed"


@pytest.mark.parametrize("n", [37, 5, 256 * 3 + 7])
def test_the_vector_moves_match_the_naive_kernels(structs, n):
    drift, shrink = structs.kernels
    assert_equivalent(drift, {"n": n, "dt": 0.01}, (n, 1), seed=n)
    assert_equivalent(shrink, {"n": n, "scale": 0.5}, (n, 1), seed=n + 1)


def test_the_vector_moves_build(structs, tmp_path_factory):
    assert_builds(structs, tmp_path_factory)


@pytest.mark.parametrize("struct, body, why", [
    ("struct S { float x, y, z, vx, vy, vz; };", "s[i].x += s[i].vx;",
     "the block does not read every field (the vectors would load bytes the kernel does not)"),
    ("struct S { float x, y; };", "s[i].x = 1.0f; s[i].y = 2.0f;",         # written only: no load to save
     "the block does not read every field"),
    ("struct S { float x, y, z; };", "s[i].x += s[i].y * s[i].z;",
     "'S' is 12 bytes, not a whole number of 8-byte vectors of float"),
    ("struct S { float x, y; };", "s[i].x = s[i].y; if (s[i].x > 0.0f) s[i].y = 0.0f;",
     "a statement between its accesses is not a declaration or an assignment"),
    ("struct S { float x, y; };", "s[i].x = s[i].y + 1.0f; out[i] = s[i].x; s[i].y = s[i].x * s[i].y;",
     "the block also accesses out[i], which may alias the struct's memory"),
])
def test_a_block_that_is_not_a_whole_struct_update_is_left_as_written(tmp_path_factory, struct, body, why):
    source = f"""
        {struct}
        __global__ void k(S *s, float *out, int n)
        {{
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {{
                {body}
            }}
        }}
        int main() {{
            S *s; cudaMalloc(&s, 1000 * sizeof(S));
            float *out = (float *)s; k<<<8, 128>>>(s, out, 1000); return 0;
        }}
    """
    result = compile_source(tmp_path_factory, "kept", source, passes="restrict,vectorize")
    kernel = result.kernels[0]
    assert "vectorize: s[i]" not in kernel_source(kernel.optimized.funcdef)
    assert any(why in note for note in vectorize_notes(kernel, "skipped")), vectorize_notes(kernel, "skipped")


def test_a_local_pointer_into_the_structs_is_not_covered_by_the_parameters_proof(tmp_path_factory):
    """`q` is `s` itself: the parameters are proved not to alias (cudaMalloc'd), but a store through `q` between
    the block's loads and its stores would be missed by locals of `s[i]` (y ends 0 in the naive kernel)."""
    result = compile_source(tmp_path_factory, "local_alias", """
        struct S { float x, y; };
        __global__ void k(S *s, float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            S *q = s;
            if (i < n) {
                s[i].x = s[i].y + 1.0f;
                q[i].y = 0.0f;
                s[i].y = s[i].x * s[i].y;
                out[i] = s[i].y;
            }
        }
        int main() {
            S *s; float *out;
            cudaMalloc(&s, 1000 * sizeof(S)); cudaMalloc(&out, 1000 * sizeof(float));
            k<<<8, 128>>>(s, out, 1000);
            return 0;
        }
    """, passes="restrict,vectorize")
    kernel = result.kernels[0]
    assert kernel.context.facts.aliasing.restrict
    assert "vectorize: s[i]" not in kernel_source(kernel.optimized.funcdef)
    assert any("the block also accesses q[i], not through a parameter" in note
               for note in vectorize_notes(kernel, "skipped")), vectorize_notes(kernel, "skipped")
    assert_equivalent(kernel, {"n": 37}, (37, 1), seed=3)
