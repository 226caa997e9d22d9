"""Batched kernels: blockIdx.z as an independent batch index (rewriting/batches.py). Each pass that applies to
one batch applies per batch: a register tile and a tensor-core tile per matrix of a batched product, a warp
per row of a batched row sum, the widening of a batched elementwise kernel; each emulated against the naive
kernel at ragged sizes with several batches. Batches that overlap are refused with a note, and the `run`
harness launches and sizes every batch."""
from __future__ import annotations

import textwrap

import pytest
from pycparser import c_ast

from gpgpu_opt.ast_util import transform
from gpgpu_opt.check.cases import Case, run_case
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.harness import generate_harness
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.rewriting.batch_loop import BatchLoop
from gpgpu_opt.rewriting.cbuild import text
from gpgpu_opt.targets import get_target
from tests.passes.test_split_loop import assert_nvcc_compiles, merge_decisions, only

#: The style of most batched products: each batch's matrices as pointers offset by the batch.
SLICED = """
__global__ void batched_matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    int batch = blockIdx.z;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    const float *a = A + (size_t)batch * M * K;
    const float *b = B + (size_t)batch * K * N;
    float *c = C + (size_t)batch * M * N;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k)
            sum += a[row * K + k] * b[k * N + col];
        c[row * N + col] = sum;
    }
}
"""

#: The batch in the subscripts, blockIdx.z itself; doubles (the FP64 tensor-core tile).
INLINE = """
__global__ void bmm(const {T} *A, const {T} *B, {T} *C, int M, int N, int K)
{{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) {{
        {T} acc = 0;
        for (int k = 0; k < K; k++)
            acc += A[blockIdx.z * M * K + i * K + k] * B[blockIdx.z * K * N + k * N + j];
        C[blockIdx.z * M * N + i * N + j] = acc;
    }}
}}
"""

ROW_SUM = """
__global__ void batched_row_sum(const float *x, float *out, int rows, int cols)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.z;
    if (row < rows) {
        float s = 0.0f;
        for (int j = 0; j < cols; ++j)
            s += x[((size_t)b * rows + row) * cols + j];
        out[b * rows + row] = s;
    }
}
"""

#: Batched elementwise, launched from the file: a grid of (n + 255) / 256 x 1 x batches.
AXPY = """
__global__ void batched_axpy(const float *x, float *y, const float *alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float *xb = x + blockIdx.z * n;
    float *yb = y + blockIdx.z * n;
    if (i < n)
        yb[i] = alpha[blockIdx.z] * xb[i] + yb[i];
}

void axpy(const float *x, float *y, const float *alpha, int n, int batches)
{
    dim3 grid((n + 255) / 256, 1, batches);
    batched_axpy<<<grid, 256>>>(x, y, alpha, n);
}
"""

#: Each batch's output starts N elements after the previous one's, but a batch writes M * N: they overlap.
OVERLAP = """
__global__ void bmm_overlap(const float *A, const float *B, float *C, int M, int N, int K)
{
    int z = blockIdx.z;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[z * M * K + i * K + k] * B[k * N + j];
        C[z * N + i * N + j] = acc;
    }
}
"""


def compile_text(tmp_path, source: str, **options):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics, target=get_target("sm_90"))
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, {}, validate=True,
                          **options)
    return program, result, diagnostics


def assert_equivalent(kernel, sizes: dict, space: tuple[int, int], batches: int) -> None:
    """Every batch's outputs match the naive kernel's (the elements compared are all batches')."""
    case = Case(sizes=sizes, global_space=space, batches=batches)
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=9,
                      device_functions={})
    assert result.ok, result.error or result.mismatches
    assert result.elements >= space[0] * space[1] * batches


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    return compile_text(tmp_path_factory.mktemp("sliced"), SLICED, assume_restrict=True)


def test_a_batched_product_gets_a_register_tile_per_batch(sliced):
    _, result, _ = sliced
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert any("8x8 outputs per thread" in r for r in merge_decisions(k, "applied"))
    assert k.validation.status == "passed", k.validation
    # CHECK: the batch and its slices bound as the user bound them, the tile reading the slices
    assert "int batch = blockIdx.z;" in text
    assert "const float *__restrict__ a = A + ((size_t) batch) * M * K;" in text
    assert "float *__restrict__ c = C + ((size_t) batch) * M * N;" in text
    assert "c[row * N + col] = sum[r][c2];" in text
    # CHECK: the launch helper keeps the naive grid's z: one plane of blocks per batch
    assert "(global_y + 127) / 128, naive_grid.z);" in result.output
    for sizes, batches in (({"M": 37, "N": 45, "K": 29}, 3), ({"M": 130, "N": 67, "K": 17}, 2)):
        assert_equivalent(k, sizes, (sizes["N"], sizes["M"]), batches)


def test_the_check_compares_every_batch(sliced):
    """A version that computes batch 0 for every batch matches on one batch and fails on several."""
    _, result, _ = sliced
    k = only(result)
    wrong = k.optimized.copy()
    transform(wrong.funcdef.body, lambda n: c_ast.Constant("int", "0") if text(n) == "blockIdx.z" else None)
    assert "blockIdx.z" not in kernel_source(wrong.funcdef)
    case = Case(sizes={"M": 37, "N": 45, "K": 29}, global_space=(45, 37), batches=1)
    assert run_case(k.naive, wrong, k.context.facts.naive_block, case, seed=9, device_functions={}).ok
    case.batches = 3
    assert not run_case(k.naive, wrong, k.context.facts.naive_block, case, seed=9, device_functions={}).ok


def test_a_batched_product_builds(sliced, tmp_path):
    assert_nvcc_compiles(sliced[1], tmp_path)


def test_a_double_batched_product_gets_the_tensor_core_tile_per_batch(tmp_path):
    _, result, _ = compile_text(tmp_path, INLINE.format(T="double"), assume_restrict=True)
    k = only(result)
    assert any("tensor" in r.lower() or "mma" in r.lower() for r in merge_decisions(k, "applied")), \
        merge_decisions(k, "applied") + merge_decisions(k, "skipped")
    assert k.validation.status == "passed", k.validation
    text = kernel_source(k.optimized.funcdef)
    assert "K * M * blockIdx.z + load_k" in text      # blockIdx.z where the batch index was
    assert_equivalent(k, {"M": 45, "N": 37, "K": 21}, (37, 45), 3)
    assert_nvcc_compiles(result, tmp_path)


def test_a_batched_row_sum_takes_a_warp_per_row_of_each_batch(tmp_path):
    _, result, _ = compile_text(tmp_path, ROW_SUM, assume_restrict=True)
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert any("split over one warp of 32 lanes per output" in r for r in merge_decisions(k, "applied"))
    assert "int b = blockIdx.z;" in text and "__shfl_down_sync" in text
    assert k.validation.status == "passed", k.validation
    assert_equivalent(k, {"rows": 29, "cols": 75}, (29, 1), 4)
    assert_nvcc_compiles(result, tmp_path)


def test_a_batched_elementwise_kernel_is_widened_per_batch(tmp_path):
    _, result, diagnostics = compile_text(tmp_path, AXPY, assume_restrict=True)
    k = only(result)
    assert k.transformed and k.validation.status == "passed", \
        (k.validation, [n.message for n in diagnostics.notes])
    assert any(d.pass_name == "vectorize" and d.applied for d in k.context.log.decisions)
    text = kernel_source(k.optimized.funcdef)
    assert "float *__restrict__ yb = y + blockIdx.z * n;" in text
    assert "naive_grid.z);" in result.output
    # the launch site passes its grid, z and all, to the helper
    assert "batched_axpy_grid(grid, 256)" in result.output
    assert_equivalent(k, {"n": 1001}, (1001, 1), 3)
    assert_nvcc_compiles(result, tmp_path)


def test_batches_that_overlap_are_refused_with_a_note(tmp_path):
    _, result, diagnostics = compile_text(tmp_path, OVERLAP, assume_restrict=True)
    k = only(result)
    said = "\n".join(n.message for n in diagnostics.notes)
    assert "bmm_overlap: its batches not optimized apart: the batches may overlap: " \
           "C[z * N + i * N + j] may reach past its batch's N elements" in said
    assert not k.transformed


@pytest.mark.parametrize("write, why", [
    ("out[i] = s;", "the batches overlap: every batch accesses out[i]"),
    ("out[z * n + i + 1] = s;", "may reach past its batch's n elements"),
    ("out[z * n + i - 1] = s;", "may be below its batch's start"),
])
def test_each_way_batches_can_meet_is_refused(tmp_path, write, why):
    source = f"""
    __global__ void k(const float *x, float *out, int n)
    {{
        int z = blockIdx.z;
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {{
            float s = x[z * n + i];
            {write}
        }}
    }}
    """
    _, result, diagnostics = compile_text(tmp_path, source, assume_restrict=True)
    said = "\n".join(n.message for n in diagnostics.notes)
    assert why in said, said


def test_the_harness_launches_and_sizes_every_batch(sliced):
    program, result, _ = sliced
    sizes = {"M": 300, "N": 200, "K": 100}
    text = generate_harness(program, result, "batched_matmul", sizes, (200, 300, 5))
    assert "const dim3 naive_grid(13, 19, 5)" in text
    assert "const dim3 opt_grid(2, 3, 5)" in text
    assert "n_A = 150000ULL" in text and "n_B = 100000ULL" in text and "n_C = 300000ULL" in text
    # without a third component: the default number of batches, said in the header
    default = generate_harness(program, result, "batched_matmul", sizes)
    assert "naive_grid(13, 19, 8)" in default and "8 batches (the naive grid's z)" in default


#: One thread does its element of every batch in turn.
LOOP_PRODUCT = """
__global__ void batched_gemm(const float *A, const float *B, float *C, int M, int N, int K, int batch)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    for (int b = 0; b < batch; ++b) {
        if (row < M && col < N) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k)
                acc += A[b * M * K + row * K + k] * B[b * K * N + k * N + col];
            C[b * M * N + row * N + col] = acc;
        }
    }
}
"""


def test_a_loop_over_batches_gets_the_register_tile_inside_it(tmp_path):
    _, result, _ = compile_text(tmp_path, LOOP_PRODUCT, assume_restrict=True)
    k = only(result)
    assert any("8x8 outputs per thread" in r for r in merge_decisions(k, "applied"))
    assert k.validation.status == "passed", k.validation
    text = kernel_source(k.optimized.funcdef)
    body = text[text.index("{") + 1:]
    assert body.lstrip().startswith("for (int b = 0; b < batch; ++b) {")    # the loop around everything
    # CHECK: a barrier ends each batch: no thread refills the tiles while another still reads them
    assert text.rstrip().endswith("__syncthreads();\n    }\n}")
    for sizes in ({"M": 37, "N": 45, "K": 29, "batch": 3}, {"M": 130, "N": 20, "K": 9, "batch": 2}):
        case = Case(sizes=sizes, global_space=(sizes["N"], sizes["M"]))
        found = run_case(k.naive, k.optimized, k.context.facts.naive_block, case, seed=9, device_functions={})
        assert found.ok, found.error or found.mismatches
    assert_nvcc_compiles(result, tmp_path)


@pytest.mark.parametrize("before, loop", [
    ("int i = blockIdx.x * blockDim.x + threadIdx.x; out[0] = 1.0f;", "out[b * n + i] = 2.0f * x[b * n + i];"),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x; float first = x[i];", "out[b * n + i] = first * x[b * n + i];"),
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "out[i] += x[b * n + i];"),          # every batch adds to out[i]
    ("int i = blockIdx.x * blockDim.x + threadIdx.x;", "out[b * n + i + 1] = x[b * n + i];"),  # past its batch
])
def test_loops_that_are_not_over_independent_batches_are_not_taken_apart(tmp_path, before, loop):
    """Work before the loop (it would run once per batch), batches that meet: the kernel as it is."""
    source = f"""
    __global__ void k(const float *x, float *out, int n, int batches)
    {{
        {before}
        for (int b = 0; b < batches; ++b) {{
            if (i < n)
                {loop}
        }}
    }}
    """
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    assert BatchLoop.of(kernel) is None
    good = source.replace(before, "int i = blockIdx.x * blockDim.x + threadIdx.x;").replace(
        loop, "out[b * n + i] = 2.0f * x[b * n + i];")
    path.write_text(textwrap.dedent(good))
    assert BatchLoop.of(load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]) is not None


def test_the_harness_gives_a_tensor_core_tile_its_dynamic_shared_memory(tmp_path):
    program, result, _ = compile_text(tmp_path, INLINE.format(T="double"), assume_restrict=True)
    text = generate_harness(program, result, "bmm", {"M": 512, "N": 512, "K": 512}, (512, 512, 4))
    shared = only(result).optimized.launch.dynamic_shared_bytes
    assert shared > 48 * 1024
    assert f"cudaFuncSetAttribute(bmm_opt, cudaFuncAttributeMaxDynamicSharedMemorySize, {shared})" in text
    assert f"bmm_opt<<<opt_grid, opt_block, {shared}>>>" in text


def test_a_pointer_given_to_a_helper_keeps_the_batches_together(tmp_path):
    source = """
    __device__ void store(float *c, int i, float v) { c[i] = v; }
    __global__ void k(const float *x, float *out, int n)
    {
        int z = blockIdx.z;
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
            store(out, i, expf(x[z * n + i]));
    }
    """
    _, _, diagnostics = compile_text(tmp_path, source, assume_restrict=True)
    said = "\n".join(n.message for n in diagnostics.notes)
    assert "k: its batches not optimized apart: store is given out, and what it accesses is not seen" in said


def test_a_batch_that_returns_is_not_one_batch_of_a_loop(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
    __global__ void k(const float *x, float *out, int n, int batches)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        for (int b = 0; b < batches; ++b) {
            if (x[b * n + i] < 0.0f)
                return;
            out[b * n + i] = x[b * n + i];
        }
    }
    """))
    assert BatchLoop.of(load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]) is None
