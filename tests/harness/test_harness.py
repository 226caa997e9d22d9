"""The GPU run harness: generation for the benchmark inputs, and the generated .cu compiles with nvcc."""
import copy
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.gpu import benchmarks
from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.harness import generate_harness, renamed_source
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"
requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

#: Declarations of the few cuBLAS entry points the harness uses, for compiling where cuBLAS is not installed
#: (the signatures are cuBLAS's own; the GPU machine builds against the real header).
CUBLAS_STUB = """#pragma once
#include <library_types.h>
typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const double *alpha, const double *A, int lda, const double *B, int ldb,
                           const double *beta, double *C, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float *alpha, const float *A, int lda,
                                         long long int strideA, const float *B, int ldb, long long int strideB,
                                         const float *beta, float *C, int ldc, long long int strideC,
                                         int batchCount);
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, const float *alpha,
                           const float *A, int lda, const float *x, int incx, const float *beta, float *y, int incy);
cublasStatus_t cublasSger(cublasHandle_t handle, int m, int n, const float *alpha, const float *x, int incx,
                          const float *y, int incy, float *A, int lda);
"""


def _bench_module():
    return benchmarks


def _compile(name: str, passes=None):
    program = load_program(str(INPUTS / name), include_dirs=[str(INPUTS)])
    result = compile_with(program, get_target("sm_90"), parse_pass_list(passes), Diagnostics(quiet=True))
    return program, result


def _nvcc_compile(tmp_path: Path, text: str, name: str, extra=(), mode="-c"):
    """Compile a harness: whole (`-c`), or device-only (`-cubin`: nvcc's front end still checks its host code)."""
    src = tmp_path / f"{name}.cu"
    src.write_text(text)
    include = []
    if "cublas_v2.h" in text and "-DHARNESS_NO_REFERENCE" not in extra:
        probe = subprocess.run(["nvcc", "-arch=sm_90", "-E", "-x", "cu", "-", "-o", "/dev/null"],
                               input="#include <cublas_v2.h>\n", capture_output=True, text=True)
        if probe.returncode != 0:
            stub = tmp_path / "stub"
            stub.mkdir(exist_ok=True)
            (stub / "cublas_v2.h").write_text(CUBLAS_STUB)
            include = [f"-I{stub}"]
    proc = subprocess.run(["nvcc", "-arch=sm_90", mode, str(src), "-o", str(tmp_path / f"{name}.o"),
                           *include, *extra], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]


BENCH = ["mv", "tmv", "transpose", "mm"]


@pytest.mark.parametrize("bench", BENCH)
def test_benchmark_harness_generates(bench):
    text, notes = _bench_module().generate(bench, "sm_90", None, 30)
    assert f"__global__ void {bench}_naive(" in text
    assert re.search(rf"__global__ (__launch_bounds__\(\d+(, \d+)?\) )?void {bench}_opt\(", text)
    assert f"__global__ void {bench}(" not in text
    assert "RESULT %s %s" in text and "cudaEventElapsedTime" in text and "cudaMemsetAsync(flush" in text
    assert "0xFF" in text  # outputs poisoned
    label = {"mv": "cublasSgemv", "tmv": "cublasSgemv", "transpose": "copy", "mm": "cublasSgemm"}[bench]
    assert f'result_line("{label}"' in text
    if bench == "tmv":
        assert "16384" in text and "4096" not in text.split("/* ---- host side")[0].split("naive kernel")[1]
        assert "CUBLAS_OP_N" in text
    if bench == "mv":
        assert "CUBLAS_OP_T" in text and "const size_t n_A = 268435456ULL" in text
    if bench == "mm":
        assert "cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, d_B, N" in text


@requires_nvcc
@pytest.mark.parametrize("bench", BENCH)
def test_benchmark_harness_compiles(bench, tmp_path):
    text, _ = _bench_module().generate(bench, "sm_90", None, 30)
    _nvcc_compile(tmp_path, text, bench)


@requires_nvcc
def test_harness_compiles_without_cublas(tmp_path):
    text, _ = _bench_module().generate("mm", "sm_90", None, 5)
    _nvcc_compile(tmp_path, text, "mm_noref", extra=("-DHARNESS_NO_REFERENCE",))


@requires_nvcc
@pytest.mark.parametrize("file,kernel,sizes", [
    ("conv.cu", "conv", {"width": 64, "height": 48}),
    ("demosaic.cu", "demosaic", {"width": 64, "height": 48}),
    ("strsm.cu", "strsm", {"n": 64, "m": 32}),
    ("strsm.cu", "residual", {"n": 64, "m": 32}),
    ("mm.cu", "scale_matrix", {"count": 1000}),
])
def test_other_inputs_compile(file, kernel, sizes, tmp_path):
    """Device-only: the harness's host side is the same template as the benchmarks' above, which are built
    whole; what differs here (the kernel's arguments, scalars, sizes) nvcc's front end type-checks."""
    program, result = _compile(file)
    text = generate_harness(program, result, kernel, sizes, runs=5)
    _nvcc_compile(tmp_path, text, kernel, mode="-cubin")


def test_float_scalar_and_in_out_array():
    program, result = _compile("mm.cu")
    text = generate_harness(program, result, "scale_matrix", {"count": 1000})
    assert "const float s_alpha = 0.75f;" in text
    # C is read and written: restored from the host copy before each check, never poisoned, and no
    # after-timing recheck (the timed runs keep scaling it)
    assert "cudaMemcpy(d_C, h_C" in text and "cudaMemset(d_C, 0xFF" not in text
    assert "optimized-after-timing" not in text


def test_rename_leaves_kernel_alone():
    program, result = _compile("mv.cu")
    kernel = result.kernels[0].naive
    before = kernel_source(copy.deepcopy(kernel.funcdef))
    text = renamed_source(kernel, "mv_naive")
    assert text.startswith("__global__ void mv_naive(")
    assert kernel_source(kernel.funcdef) == before


def test_errors():
    program, result = _compile("mv.cu")
    with pytest.raises(ValueError, match="unknown reference"):
        generate_harness(program, result, "mv", {"rows": 64, "cols": 64}, reference="cusparse_spmv")
    with pytest.raises(CompileError, match="cannot use the 'sgemm' reference"):
        generate_harness(program, result, "mv", {"rows": 64, "cols": 64}, (64, 1), reference="sgemm")
    with pytest.raises(CompileError, match="no kernel 'nope'"):
        generate_harness(program, result, "nope", {})
    with pytest.raises(CompileError, match="no value for parameter 'cols'"):
        generate_harness(program, result, "mv", {"rows": 64}, (64, 1))


@requires_nvcc
def test_vv_harness_updates_c_in_place_against_cublas_sger(tmp_path):
    """C is read and written: the reference starts from the kernels' C; cuBLAS is column-major, so x and y swap."""
    text, _ = _bench_module().generate("vv", "sm_90", None, 30)
    assert 'result_line("cublasSger"' in text
    assert "cublasSger(handle, width, height, &one, d_B, 1, d_A, 1, d_ref," in text
    assert "CHECK(cudaMemcpy(d_ref, h_C, ref_n * sizeof(float), cudaMemcpyHostToDevice));" in text
    assert "const int height = 4096, width = 4096;" in text
    _nvcc_compile(tmp_path, text, "vv")


def test_harness_refuses_a_launch_the_helpers_refuse(tmp_path):
    """An unguarded kernel with no launch in the file, widened to several elements per thread, serves only
    thread spaces that are whole tiles: the harness stops with the helpers' message instead of timing a
    launch that reads past the arrays."""
    src = tmp_path / "add.cu"
    src.write_text("__global__ void add(float *a, float *b, float *c)\n{\n"
                   "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    c[i] = a[i] + b[i];\n}\n")
    program = load_program(str(src))
    # (a width asked for: a kernel the file does not launch is not widened by size, launch_dispatch.py)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                          vector_width=4)
    tile = result.kernels[0].optimized.launch.outputs_per_block[0]
    assert tile > 1
    context = result.kernels[0].context   # the harness's naive launch: 96-thread blocks (facts are frozen)
    context.facts = dataclasses.replace(context.facts, naive_block=(96, 1))
    with pytest.raises(CompileError, match="cannot serve the naive launch"):
        generate_harness(program, result, "add", {}, global_space=(96, 1))
    assert "add_opt" in generate_harness(program, result, "add", {}, global_space=(96 * tile, 1))


@requires_nvcc
def test_a_half_kernel_has_a_harness(tmp_path):
    """__half arrays are filled and compared through double (cuda_fp16.h's host conversions), a __half scalar
    is constructed from a double, and the header that declares them is included. Built whole: the host side is
    where the conversions are."""
    program = load_program(str(ROOT / "bench/half8/half_axpy.cu"))
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True))
    text = generate_harness(program, result, "haxpy", {"n": 5000}, runs=5)
    assert "#include <cuda_fp16.h>" in text and "const __half s_alpha = 0.75;" in text
    assert "fill_real(h_x, n_x);" in text and "half8" in text
    _nvcc_compile(tmp_path, text, "haxpy")


CEIL_GRID = """\
#include <cmath>
#define N 100000
__global__ void add(float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] + b[i];
}
int main()
{
    float *a, *b;
    cudaMalloc(&a, N * sizeof(float));
    cudaMalloc(&b, N * sizeof(float));
    dim3 block(256);
    dim3 grid(ceil((float)N / block.x));
    add<<<grid, block>>>(a, b, N);
    return 0;
}
"""


def test_the_harness_takes_the_programs_own_launch_and_arguments(tmp_path):
    """A classic suite's `dim3 grid(ceil((float)N / block.x))` and `add<<<grid, block>>>(a, b, N)`: the harness
    runs what the program runs (run --build-only said it could not tell how many threads the launch covers)."""
    path = tmp_path / "add.cu"
    path.write_text(CEIL_GRID)
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True))
    text = generate_harness(program, result, "add", {})
    assert "const int s_n = 100000;" in text
    assert "naive_grid(391, 1), naive_block(256, 1)" in text        # 391 blocks of 256 cover 100000
    assert "const int s_n = 4096;" in generate_harness(program, result, "add", {"n": 4096})  # --size wins


#: Benchmarks of the generalization set that use what the paper's do not: the other cuBLAS products, the copy of
#: as many bytes as the kernel moves, arrays of float4; each with a line its harness must hold.
NEW_REFERENCES = {
    "g_sgemm_nt": "cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, d_B, K,",
    "g_dgemm": "cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, d_B, N,",
    "g_half_matmul": "d_A, CUDA_R_16F, K, &zero, d_ref, CUDA_R_32F, N,",
    "g_stream_triad": "cudaMemcpyAsync(d_ref + 402653184ULL, d_ref, 402653184ULL",   # 3 arrays of 2^26 floats
    "g_nbody": "nbody_accel_opt<<<opt_grid, opt_block>>>((float4 *)d_pos, (float4 *)d_accel, s_n, s_softening)",
}


@pytest.mark.parametrize("bench", sorted(NEW_REFERENCES))
def test_new_references_generate(bench):
    text, _ = _bench_module().generate(bench, "sm_90", None, 5)
    assert NEW_REFERENCES[bench] in text
    if bench == "g_nbody":      # held as floats, 4 a body
        assert "const size_t n_pos = 262144ULL;" in text and "float *d_pos" in text


@requires_nvcc
@pytest.mark.parametrize("bench", sorted(NEW_REFERENCES))
def test_new_references_compile(bench, tmp_path):
    text, _ = _bench_module().generate(bench, "sm_90", None, 5)
    _nvcc_compile(tmp_path, text, bench)


def test_a_batched_product_counts_its_batches_from_the_result():
    from gpgpu_opt.harness import _reference

    def array(name, extent, written=False):
        return {"name": name, "ctype": "float", "extent": extent, "read": not written, "written": written,
                "item": 4}
    m, n, k, batches = 48, 80, 24, 3
    arrays = [array("A", batches * m * k), array("B", batches * k * n), array("C", batches * m * n, True)]
    ref = _reference("sgemm_batched", arrays, (n, m), "bmm")
    assert (ref["M"], ref["N"], ref["K"], ref["batch"]) == (m, n, k, batches)
    arrays[1]["extent"] += 1
    with pytest.raises(CompileError, match="not M\\*K, K\\*N, M\\*N"):
        _reference("sgemm_batched", arrays, (n, m), "bmm")
    with pytest.raises(CompileError, match="two double inputs"):
        _reference("dgemm", arrays, (n, m), "bmm")
