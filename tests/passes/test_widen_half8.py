"""Halves widened by 8: one 16-byte access a thread (`half8`, a vector the output defines where CUDA has none,
rewriting/vector.py), each lane computed by the same half intrinsics as the naive kernel. The definition is
written once before the kernels that use it, under an include guard; a program that names `half8` itself
keeps `__half2`. Every rewrite is emulated against the naive kernel at sizes no 8 divides, on the vector and
the scalar paths, and built with nvcc."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

#: An axpy on half data and a half-precision ReLU with a per-element branch, in the style of mixed-precision
#: code: storage and arithmetic in __half, launched with a run-time element count.
HALF_KERNELS = """
#include <cuda_fp16.h>
__global__ void haxpy(int n, __half alpha, const __half *x, __half *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __hadd(__hmul(alpha, x[i]), y[i]);
}

__global__ void hrelu(int n, const __half *in, __half *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __half v = in[i];
        if (__hlt(v, __float2half(0.0f)))
            v = __float2half(0.0f);
        out[i] = v;
    }
}

void run(int n, const __half *x, __half *y, __half *z)
{
    haxpy<<<(n + 255) / 256, 256>>>(n, __float2half(0.5f), x, y);
    hrelu<<<(n + 255) / 256, 256>>>(n, y, z);
}
"""


@pytest.fixture(scope="module")
def halves(tmp_path_factory):
    return compile_source(tmp_path_factory, "halves", HALF_KERNELS, passes="restrict,vectorize")


def test_halves_alone_are_widened_by_eight_in_one_16_byte_access(halves):
    haxpy, hrelu = halves.kernels
    text = kernel_source(haxpy.optimized.funcdef)
    assert "int i = 8 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    assert "const half8 x_val = ((const half8 *) x)[i / 8];" in text
    assert "((half8 *) y)[i / 8] = make_half8(__hadd(__hmul(alpha, x_val.h0), y_val.h0), " in text
    assert "__hadd(__hmul(alpha, x_val.h7), y_val.h7));" in text
    assert "(half8)" in next(n for n in vectorize_notes(haxpy, "applied") if n.startswith("kernel: widened"))
    relu = kernel_source(hrelu.optimized.funcdef)
    assert "half8 v = ((const half8 *) in)[i / 8];" in relu and "v.h7 = __float2half(0.0f);" in relu
    assert haxpy.validation.status == "passed" and hrelu.validation.status == "passed"


def test_the_definition_is_written_once_before_the_kernels(halves):
    out = halves.output
    assert out.count("struct __align__(16) half8 {") == 1 and out.count("#ifndef GPGPU_OPT_HALF8") == 1
    assert "    __half h0, h1, h2, h3, h4, h5, h6, h7;" in out
    assert out.index("half8 make_half8(") < out.index("__global__ void haxpy(")


@pytest.mark.parametrize("n", [8 * 37 + 3, 5, 64, 8 * 300 + 7])
def test_the_widened_halves_match_the_naive_kernels(halves, n):
    """n = 5: every element on the scalar path; 64: every one on the vector path."""
    haxpy, hrelu = halves.kernels
    assert_equivalent(haxpy, {"n": n, "alpha": 0.75}, (n, 1), seed=n)
    assert_equivalent(hrelu, {"n": n}, (n, 1), seed=n + 1)


def test_the_widened_halves_build(halves, tmp_path_factory):
    assert_builds(halves, tmp_path_factory)


def test_a_program_that_names_half8_keeps_half2(tmp_path_factory):
    """The output's `half8` would clash with the program's own: the widest CUDA vector of halves instead."""
    source = HALF_KERNELS.replace("#include <cuda_fp16.h>", "#include <cuda_fp16.h>\ntypedef uint4 half8;")
    result = compile_source(tmp_path_factory, "halves_named", source, passes="restrict,vectorize")
    text = kernel_source(result.kernels[0].optimized.funcdef)
    assert "const __half2 x_val = ((const __half2 *) x)[i / 2];" in text
    assert "GPGPU_OPT_HALF8" not in result.output


def test_a_comment_or_string_naming_half8_leaves_the_name_free(tmp_path_factory):
    source = HALF_KERNELS.replace("#include <cuda_fp16.h>", '#include <cuda_fp16.h>\n// half8 would be faster\n'
                                  'static const char *how = "half8";')
    result = compile_source(tmp_path_factory, "halves_comment", source, passes="restrict,vectorize")
    assert "half8" in kernel_source(result.kernels[0].optimized.funcdef)


def test_eight_asked_for_floats_is_a_note(tmp_path_factory):
    source = HALF_KERNELS.replace("__half", "float").replace("__hadd(__hmul(alpha, x[i]), y[i])", "alpha * x[i] + y[i]")
    source = source.replace("__hlt(v, __float2half(0.0f))", "v < 0.0f").replace("__float2half(0.0f)", "0.0f")
    result = compile_source(tmp_path_factory, "floats8", source, passes="restrict,vectorize", vector_width=8)
    assert result.kernels[0].optimized.launch is None
    assert any("no 8-element vector type of float (--vector-width 8)" in n
               for n in vectorize_notes(result.kernels[0], "skipped"))
