"""Pure calls are arithmetic to every pass (analysis/calls.py, the one table): conversions, the Math API and
`__ldg` of const data in a loop's term no longer stop the row reduction, the register tile or staging; the
result matches the naive kernel in the emulator at sizes no tile divides. A call the table does not list
as pure (a helper that stores, an atomic, the clock) still stops them; printf is not in the front end's
prelude: a kernel that calls it is refused whole."""
from __future__ import annotations

import pytest

from gpgpu_opt.check.cases import Case, run_case
from gpgpu_opt.codegen import kernel_source
from tests.passes.test_mma_tile import compile_text
from tests.passes.test_split_loop import merge_decisions

ROW_SUM = """
#include <cuda_fp16.h>
__global__ void rows(const {T} *__restrict__ x, const float *__restrict__ m, float *__restrict__ out,
                     int rows, int cols)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {{
        float sum = 0.0f;
        for (int j = 0; j < cols; j++)
            sum += {term};
        out[i] = sum;
    }}
}}
"""

PRODUCT = """
#include <cuda_fp16.h>
{helper}
__global__ void product(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                        int M, int N, int K)
{{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {{
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += {term};
        C[row * N + col] = acc;
    }}
}}
"""


def _equivalent(kernel, sizes: dict, space: tuple[int, int]) -> None:
    case = Case(sizes=sizes, global_space=space)
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=5,
                      device_functions=dict(kernel.context.facts.device_functions))
    assert result.ok, result.error or result.mismatches


@pytest.mark.parametrize("element, term", [
    ("float", "expf(x[i * cols + j] - m[i])"),
    ("float", "__expf(x[i * cols + j]) * rsqrtf(fabsf(m[i]) + 1.0f)"),
    ("__half", "__half2float(x[i * cols + j]) * m[i]"),
    ("float", "(float) __float2int_rn(x[i * cols + j] * 8.0f) + __half2float(__float2half_rn(m[i]))"),
    ("__nv_bfloat16", "__bfloat162float(x[i * cols + j]) * __bfloat162float(__float2bfloat16(m[i]))"),
    ("float", "__ldg(&x[i * cols + j]) * m[i]"),
])
def test_a_row_reduction_with_pure_calls_takes_a_warp_per_row(tmp_path, element, term):
    source = ROW_SUM.format(T=element, term=term)
    if "bfloat16" in element:
        source = "#include <cuda_bf16.h>\n" + source
    k = compile_text(tmp_path, source)
    text = kernel_source(k.optimized.funcdef)
    assert "__shfl_down_sync" in text, merge_decisions(k, "skipped")
    assert "__ldg" not in text
    _equivalent(k, {"rows": 37, "cols": 45}, (37, 1))


@pytest.mark.parametrize("term", [
    "fabsf(A[row * K + k] - B[k * N + col])",
    "fmaxf(A[row * K + k], 0.0f) * B[k * N + col]",
    "__ldg(&A[row * K + k]) * __ldg(&B[k * N + col])",
    "(float) __double2float_rn((double) A[row * K + k] * B[k * N + col])",
])
def test_a_product_with_pure_calls_takes_the_register_tile(tmp_path, term):
    k = compile_text(tmp_path, PRODUCT.format(helper="", term=term))
    text = kernel_source(k.optimized.funcdef)
    assert "acc[8][8]" in text, merge_decisions(k, "skipped")
    _equivalent(k, {"M": 37, "N": 45, "K": 29}, (45, 37))


STORING_HELPER = """
__device__ float counted(float *__restrict__ hits, float x) { hits[0] = x; return x; }
"""


@pytest.mark.parametrize("helper, term, why", [
    (STORING_HELPER, "counted(C, A[row * K + k]) * B[k * N + col]", "has side effects"),
    ("", "atomicAdd(C, A[row * K + k]) * B[k * N + col]", "atomicAdd"),
    ("", "A[row * K + k] * B[k * N + col] + (float) (clock64() & 1)", "has side effects"),
])
def test_a_call_the_table_does_not_call_pure_still_blocks(tmp_path, helper, term, why):
    k = compile_text(tmp_path, PRODUCT.format(helper=helper, term=term))
    text = kernel_source(k.optimized.funcdef)
    assert "acc[8][8]" not in text and "mma.sync" not in text
    assert any(why in r for r in merge_decisions(k, "skipped")), merge_decisions(k, "skipped")


def test_other_cache_hints_stay_as_written(tmp_path):
    """`__ldcv` (fetch again) says how the access happens: it is not read as a plain load."""
    k = compile_text(tmp_path, PRODUCT.format(helper="", term="__ldcv(&A[row * K + k]) * B[k * N + col]"))
    assert "acc[8][8]" not in kernel_source(k.optimized.funcdef)
