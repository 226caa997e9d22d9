"""The merge pass's tensor-core tiles (passes/merge/mma_tile.py): which products take them (doubles by default,
floats at `--matmul-precision tf32x3|tf32`, on targets that have the instruction), the shape of the output
(a ring of cp.async stages, inline mma.sync in the PTX fragment layouts, one guarded store per output),
equivalence in the emulator at sizes no tile divides for both operand layouts, the launch helpers' dynamic
shared memory, what is left alone and why, and nvcc's registers and spills."""
from __future__ import annotations

import re

import pytest

import textwrap

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.check.cases import Case, run_case
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.passes.merge.mma_tile import OPS, TF32_TOLERANCE
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from tests.passes.test_split_loop import assert_nvcc_compiles, merge_decisions, only

PRODUCT = """
__global__ void product({T} const *A, {T} const *B, {T} *C, int M, int N, int K, {T} alpha, {T} beta)
{{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {{
        {T} sum = 0;
        for (int k = 0; k < K; k++)
            sum += A[{a}] * B[{b}];
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }}
}}
"""
ROW_MAJOR_A, COLUMN_MAJOR_A = "row * K + k", "k * M + row"
ROW_MAJOR_B, TRANSPOSED_B = "k * N + col", "col * K + k"


def compile_text(tmp_path, source: str, target: str = "sm_90", result: bool = False, **options):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics, target=get_target(target))
    compiled = compile_with(program, get_target(target), parse_pass_list(None), diagnostics, {}, **options)
    return compiled if result else only(compiled)


def product(tmp_path, element="double", a=ROW_MAJOR_A, b=ROW_MAJOR_B, **options):
    return compile_text(tmp_path, PRODUCT.format(T=element, a=a, b=b), assume_restrict=True, **options)


def assert_equivalent(kernel, sizes: dict) -> None:
    case = Case(sizes={"alpha": 1.5, "beta": -0.5, **sizes}, global_space=(sizes["N"], sizes["M"]))
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=3,
                      device_functions={})
    assert result.ok, result.error or result.mismatches
    assert result.elements >= sizes["M"] * sizes["N"]


@pytest.fixture(scope="module")
def dgemm(tmp_path_factory):
    return product(tmp_path_factory.mktemp("dgemm"))


def test_a_double_product_runs_on_fp64_tensor_cores_by_default(dgemm):
    text = kernel_source(dgemm.optimized.funcdef)
    # CHECK: the ring of stages in dynamic shared memory, filled by asynchronous copies, zero outside A and B
    assert "extern __shared__ double tiles[];" in text
    # (each copy's sizes constants: a run-time size is a switch over every size in <cuda_pipeline.h>)
    assert re.search(r"if \(in_range\)\s*__pipeline_memcpy_async\(&tile_A\[\(stage \* 64 \+ e / 16\) \* 20 \+ e % 16\], "
                     r"&A\[K \* load_row \+ load_k\], sizeof\(double\)\);\s*else\s*"
                     r"__pipeline_memcpy_async\(&tile_A\[[^;]*\], &A\[0\], sizeof\(double\), sizeof\(double\)\);", text)
    assert "__pipeline_wait_prior(2);" in text and text.count("__syncthreads();") == 1
    # CHECK: the fragments in the PTX layout of m16n8k8 (rows g, g + 8; columns t, t + 4), one mma per pair
    assert "A_frag[i][v] = tile_A[(stage * 64 + warp_row + i * 16 + group + v % 2 * 8) * 20 + kk + quad + v / 2 * 4];" \
        in text
    assert 'asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, ' \
           '{%0,%1,%2,%3};" : "+d"(sum[i][j][0])' in text
    # CHECK: every output keeps its guard and its own epilogue
    assert re.search(r"if \(row < M && col < N\) \{\s*"
                     r"C\[row \* N \+ col\] = alpha \* sum\[i\]\[j\]\[r\] \+ beta \* C\[row \* N \+ col\];", text)
    # CHECK: 16-byte copies where the operand is aligned and its rows whole vectors, else element copies
    assert "const int vectors_a = (((size_t) A) & 15) == 0 && K % 2 == 0;" in text
    assert "const int vectors_b = (((size_t) B) & 15) == 0 && N % 2 == 0;" in text
    assert re.search(r"if \(valid == 2\)\s*__pipeline_memcpy_async\(&tile_B\[[^;]*\], &B\[N \* load_k \+ load_col\], 16\);"
                     r"\s*else\s*__pipeline_memcpy_async\(&tile_B\[[^;]*\], &B\[\(valid > 0\) \? \(N \* load_k \+ load_col\) : "
                     r"0\], 16, 16 - valid \* sizeof\(double\)\);", text)
    # CHECK: the blocks take their tiles in bands of rows (L2 reuse between the blocks running together)
    assert "const int tile_row = band * 8 + linear % (8 * gridDim.x) % band_rows;" in text
    launch = dgemm.optimized.launch
    assert (launch.block, launch.outputs_per_block, launch.dynamic_shared_bytes) == ((128, 1), (128, 64), 108544)
    assert any("tensor cores: FP64 mma.sync.m16n8k8" in r for r in merge_decisions(dgemm, "applied"))


@pytest.mark.parametrize("sizes", [{"M": 37, "N": 45, "K": 29}, {"M": 70, "N": 131, "K": 33},
                                   {"M": 5, "N": 3, "K": 0}, {"M": 64, "N": 128, "K": 64},
                                   {"M": 38, "N": 46, "K": 30}, {"M": 200, "N": 300, "K": 18}])
def test_the_fp64_tile_matches_the_naive_kernel(dgemm, sizes):
    assert_equivalent(dgemm, sizes)


@pytest.mark.parametrize("a, b", [(COLUMN_MAJOR_A, ROW_MAJOR_B), (ROW_MAJOR_A, TRANSPOSED_B),
                                  (COLUMN_MAJOR_A, TRANSPOSED_B)])
def test_both_operand_layouts_are_copied_along_their_contiguous_dimension(tmp_path, a, b):
    k = product(tmp_path, a=a, b=b)
    text = kernel_source(k.optimized.funcdef)
    assert "mma.sync.aligned.m16n8k8.row.col.f64" in text
    if a == COLUMN_MAJOR_A:     # consecutive threads take consecutive rows of a column of A
        assert "const int load_row = tile_row * 64 + e % 64;" in text
    if b == TRANSPOSED_B:
        assert "const int load_col = tile_col * 128 + e / 16;" in text
    assert_equivalent(k, {"M": 37, "N": 45, "K": 29})


def test_both_operands_from_one_array(tmp_path):
    """A^T A (syrk's shape): each operand a column of the same array, contiguous along its output axis."""
    from tests.passes.test_register_tile import SYRK_T

    k = compile_text(tmp_path, SYRK_T)
    assert "mma.sync.aligned.m16n8k8.row.col.f64" in kernel_source(k.optimized.funcdef)
    case = Case(sizes={"n": 37, "m": 21}, global_space=(37, 37))
    result = run_case(k.naive, k.optimized, k.context.facts.naive_block, case, seed=4, device_functions={})
    assert result.ok, result.error or result.mismatches


def test_the_launch_asks_for_its_dynamic_shared_memory(tmp_path):
    source = PRODUCT.format(T="double", a=ROW_MAJOR_A, b=ROW_MAJOR_B) + """
void run(const double *A, const double *B, double *C, int M, int N, int K, cudaStream_t stream)
{
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    product<<<grid, block, 0, stream>>>(A, B, C, M, N, K, 1.0, 0.0);
}
"""
    result = compile_text(tmp_path, source, result=True, assume_restrict=True)
    assert "product<<<product_grid(grid, block), product_block(grid, block), " \
           "product_shared_bytes((const void *)product), stream>>>" in result.output
    assert "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 108544);" in result.output
    assert_nvcc_compiles(result, tmp_path)


def test_the_fp64_tile_builds_without_spills(dgemm, tmp_path):
    from gpgpu_opt.nvcc import nvcc_available, resource_usage

    if not nvcc_available():
        pytest.skip("nvcc not installed")
    source = "#include <cuda_pipeline.h>\n" + dgemm.optimized.with_launch_bounds(kernel_source(dgemm.optimized.funcdef))
    usage = resource_usage(source, get_target("sm_90"))["product"]
    assert usage["spill_store_bytes"] == 0 and usage["registers"] <= 255


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_a_float_product_takes_tensor_cores_at_the_precision_asked(tmp_path, precision):
    k = product(tmp_path, "float", matmul_precision=precision)
    text = kernel_source(k.optimized.funcdef)
    assert "cvt.rna.tf32.f32" in text and "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text
    if precision == "tf32x3":
        # CHECK: high and low parts, three products, each step's products summed apart then added in FP32
        assert text.count("mma.sync.aligned") == 3 and "A_frag_lo" in text and "B_frag_lo" in text
        assert "sum[i][j][r] += part[i][j][r];" in text
        assert k.optimized.tolerance is None            # FP32-class: checked at the usual tolerance
    else:
        assert text.count("mma.sync.aligned") == 1 and k.optimized.tolerance == TF32_TOLERANCE
    assert_equivalent(k, {"M": 37, "N": 45, "K": 29})
    assert_equivalent(k, {"M": 130, "N": 129, "K": 17})


def test_float_stays_on_cuda_cores_unless_asked(tmp_path):
    k = product(tmp_path, "float")
    assert "sum[8][8]" in kernel_source(k.optimized.funcdef) and "mma.sync" not in kernel_source(k.optimized.funcdef)


@pytest.mark.parametrize("target", ["g80", "gt200", "fermi", "sm_80"])
def test_targets_without_the_instruction_keep_the_register_tile(tmp_path, target):
    k = product(tmp_path, target=target)
    assert "mma.sync" not in kernel_source(k.optimized.funcdef)


def test_tf32_on_a_target_without_tensor_cores_says_so(tmp_path):
    k = product(tmp_path, "float", target="fermi", matmul_precision="tf32")
    assert "mma.sync" not in kernel_source(k.optimized.funcdef)
    assert any("fermi has no such tensor-core instruction" in r for r in merge_decisions(k, "skipped"))


@pytest.mark.parametrize("body, why", [
    ("sum += A[row * K + k] * B[k * N + col] + 1.0;", "is not '"),
    ("sum += A[row * K + k] * B[k * N + col] * B[k * N + col + 1];", "operand arrays"),
    ("sum += A[row * K + k] * B[k * N + col] * A[row * K + k];", "is not the product"),
])
def test_a_loop_that_is_not_one_product_keeps_the_register_tile(tmp_path, body, why):
    source = PRODUCT.format(T="double", a=ROW_MAJOR_A, b=ROW_MAJOR_B).replace(
        "sum += A[row * K + k] * B[k * N + col];", body)
    k = compile_text(tmp_path, source, assume_restrict=True)
    assert "mma.sync" not in kernel_source(k.optimized.funcdef)
    assert any("mma tile not used" in r and why in r for r in merge_decisions(k, "skipped")), \
        merge_decisions(k, "skipped")


def test_each_op_fits_the_shared_memory_of_the_targets_that_have_it():
    from gpgpu_opt.targets import TARGETS

    for target in TARGETS.values():
        for name in target.tensor_cores:
            assert OPS[name].shared_bytes <= target.shared_per_block_optin, (target.name, name)


HALF_PRODUCT = """
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void product(const {T} *A, const {T} *B, float *C, int M, int N, int K, float alpha, float beta)
{{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {{
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += {widen}(A[{a}]) * {widen}(B[{b}]);
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }}
}}
"""
WIDEN = {"__half": "__half2float", "__nv_bfloat16": "__bfloat162float"}


def half_product(tmp_path, element="__half", a=ROW_MAJOR_A, b=ROW_MAJOR_B, widen=None, **options):
    source = HALF_PRODUCT.format(T=element, a=a, b=b, widen=widen if widen is not None else WIDEN[element])
    return compile_text(tmp_path, source, assume_restrict=True, **options)


@pytest.fixture(scope="module")
def hgemm(tmp_path_factory):
    return half_product(tmp_path_factory.mktemp("hgemm"))


def test_a_half_product_runs_on_hmma_by_default(hgemm):
    text = kernel_source(hgemm.optimized.funcdef)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in text
    # CHECK: 16-byte copies of 8 halves where the rows are whole vectors; else loads and stores (cp.async moves
    # no fewer than 4 bytes)
    assert "const int vectors_a = (((size_t) A) & 15) == 0 && K % 8 == 0;" in text
    assert "16 - valid * sizeof(__half));" in text
    assert re.search(r"tile_A\[[^;]*\] = in_range \? A\[K \* load_row \+ load_k\]\s*: __float2half\(0\.0f\);", text)
    assert "sizeof(__half), in_range" not in text
    # CHECK: two halves of the tiles packed into each fragment register: A's along k, B's down a column
    assert "A_frag[i][v] = ((unsigned int) __half_as_ushort(tile_A[at])) | " \
           "((unsigned int) __half_as_ushort(tile_A[at + 1])) << 16;" in text
    assert "B_frag[j][v] = ((unsigned int) __half_as_ushort(tile_B[at])) | " \
           "((unsigned int) __half_as_ushort(tile_B[at + 136])) << 16;" in text
    assert hgemm.optimized.tolerance is None
    assert any("FP16 mma.sync.m16n8k16" in r and "another order" in r for r in merge_decisions(hgemm, "applied"))


@pytest.mark.parametrize("sizes", [{"M": 37, "N": 45, "K": 29}, {"M": 70, "N": 136, "K": 40},
                                   {"M": 5, "N": 3, "K": 0}, {"M": 130, "N": 131, "K": 48}])
def test_the_hmma_tile_matches_the_naive_kernel(hgemm, sizes):
    assert_equivalent(hgemm, sizes)


@pytest.mark.parametrize("element", ["__half", "__nv_bfloat16"])
@pytest.mark.parametrize("a, b", [(ROW_MAJOR_A, TRANSPOSED_B), (COLUMN_MAJOR_A, ROW_MAJOR_B)])
def test_16_bit_tiles_are_laid_out_as_their_operands_are_in_memory(tmp_path, element, a, b):
    k = half_product(tmp_path, element, a, b)
    text = kernel_source(k.optimized.funcdef)
    kind = "f16" if element == "__half" else "bf16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32" in text
    if b == TRANSPOSED_B:       # rows of B^T along k: 16-byte copies, pairs side by side
        assert "const int vectors_b = (((size_t) B) & 15) == 0 && K % 8 == 0;" in text
        assert "tile_B[at + 1]" in text
    else:                       # A by columns: pairs 128 + 8 apart
        assert "const int vectors_a = (((size_t) A) & 15) == 0 && M % 8 == 0;" in text
        assert "tile_A[at + 136]" in text
    assert_equivalent(k, {"M": 37, "N": 45, "K": 29})
    assert_equivalent(k, {"M": 72, "N": 48, "K": 40})


def test_a_bf16_product_runs_on_bf16_mma(tmp_path):
    k = half_product(tmp_path, "__nv_bfloat16")
    text = kernel_source(k.optimized.funcdef)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in text and "__bfloat16_as_ushort" in text
    assert_equivalent(k, {"M": 37, "N": 45, "K": 29})
    assert_equivalent(k, {"M": 70, "N": 136, "K": 40})


@pytest.mark.parametrize("target", ["g80", "gt200", "fermi"])
def test_a_half_product_on_a_target_without_hmma_keeps_its_cuda_core_form(tmp_path, target):
    k = half_product(tmp_path, target=target)
    assert "mma.sync" not in kernel_source(k.optimized.funcdef)
    assert not any("mma" in r for r in merge_decisions(k, "skipped"))     # not a choice on this target
    assert any("operands are of type __half" in r for r in merge_decisions(k, "skipped"))


@pytest.mark.parametrize("widen, why", [("", "is not the product"), ("(float) __hmul", "is not the product")])
def test_a_half_product_not_widened_exactly_stays_off_hmma(tmp_path, widen, why):
    source = HALF_PRODUCT.format(T="__half", a=ROW_MAJOR_A, b=ROW_MAJOR_B, widen="__half2float")
    if widen == "":            # the product taken in half precision, then widened: not an exact product
        source = source.replace("__half2float(A[row * K + k]) * __half2float(B[k * N + col])",
                                "__half2float(A[row * K + k] * B[k * N + col])")
    else:
        source = source.replace("__half2float(A[row * K + k]) * __half2float(B[k * N + col])",
                                "(float) __hmul(A[row * K + k], B[k * N + col])")
    k = compile_text(tmp_path, source, assume_restrict=True)
    assert "mma.sync" not in kernel_source(k.optimized.funcdef)
    assert any("mma tile not used" in r for r in merge_decisions(k, "skipped")), merge_decisions(k, "skipped")


def test_the_hmma_tile_builds_without_spills(hgemm):
    from gpgpu_opt.nvcc import nvcc_available, resource_usage

    if not nvcc_available():
        pytest.skip("nvcc not installed")
    source = "#include <cuda_fp16.h>\n#include <cuda_pipeline.h>\n" + \
        hgemm.optimized.with_launch_bounds(kernel_source(hgemm.optimized.funcdef))
    usage = resource_usage(source, get_target("sm_90"))["product"]
    assert usage["spill_store_bytes"] == 0 and usage["registers"] <= 255


def test_a_cast_to_float_widens_exactly_too(tmp_path):
    k = half_product(tmp_path, widen="(float)")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"M": 37, "N": 45, "K": 29})
