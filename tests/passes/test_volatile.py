"""`volatile` arrays: every load and store of one happens as written. No pass widens, merges, stages,
prefetches, hoists, promotes or requalifies them (`a[i] + a[i]` stays two loads), each says why in a note,
and the plain arrays of the same kernel are still optimized."""
from __future__ import annotations

import re
import textwrap

import pytest

from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import default_cases, run_case

HOST_1D = """
int main()
{{
    int n = 1 << 16;
    float *da, *db, *dc;
    cudaMalloc(&da, 2 * n * sizeof(float));
    cudaMalloc(&db, 2 * n * sizeof(float));
    cudaMalloc(&dc, 2 * n * sizeof(float));
    {name}<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    return 0;
}}
"""

TWICE = """
__global__ void twice(volatile float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + a[i] + b[i];
}
"""

PAIRS = """
__global__ void pairs(volatile float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float lo = a[2 * i];
        float hi = a[2 * i + 1];
        c[2 * i] = hi + b[2 * i];
        c[2 * i + 1] = lo + b[2 * i + 1];
    }
}
"""

LOCAL_POINTER = """
__global__ void local_pointer(float *a, const float *b, float *c, int n)
{
    volatile float *p = a;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = p[i] + p[i] + b[i];
}
"""

ACCUMULATE = """
__global__ void accumulate(const float *a, const float *b, volatile float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = 0.0f;
        for (int k = 0; k < 64; k++)
            c[i] += a[k * n + i] * b[k];
    }
}
"""

MATMUL_HOST = """
int main()
{{
    int n = 512;
    float *dA, *dB, *dC;
    cudaMalloc(&dA, n * n * sizeof(float));
    cudaMalloc(&dB, n * n * sizeof(float));
    cudaMalloc(&dC, n * n * sizeof(float));
    dim3 block(16, 16);
    dim3 grid(n / 16, n / 16);
    {name}<<<grid, block>>>(dA, dB, dC, n);
    return 0;
}}
"""

#: mm with one operand volatile: A's row (uncoalesced, reused) is what coalesce stages and prefetch
#: double-buffers, B's column what thread merge shares between rows.
MATMUL = """
__global__ void {name}({a}float *A, {b}float *B, float *C, int n)
{{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {{
        float sum = 0.0f;
        for (int k = 0; k < n; k++)
            sum += A[row * n + k] * B[k * n + col];
        C[row * n + col] = sum;
    }}
}}
"""


def matmul(name: str, volatile: str) -> str:
    quals = {"a": "volatile " if volatile == "A" else "const ", "b": "volatile " if volatile == "B" else "const "}
    return MATMUL.format(name=name, **quals) + MATMUL_HOST.format(name=name)


def compiled(tmp_path, source: str, target: str, passes: str | None = None):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target(target), parse_pass_list(passes), Diagnostics(quiet=True),
                             validate=False)
    (kernel,) = result.kernels
    return program, kernel


def text_of(kernel) -> str:
    return kernel_source(kernel.optimized.funcdef)


def loads(text: str, array: str) -> list[str]:
    """The subscripts of the array's accesses in the kernel text."""
    return re.findall(rf"\b{array}\[([^\]]*)\]", text)


def notes(kernel) -> list[str]:
    return [f"{d.pass_name}: {d.subject}: {d.reason}" for d in kernel.context.log.decisions if d.action == "skipped"]


def assert_matches_naive(program, kernel) -> None:
    for case in default_cases(kernel.naive, program, {}, None):
        outcome = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=2,
                           device_functions=program.device_functions, check_races=True)
        assert outcome.ok, outcome.error or outcome.mismatches


def test_the_parameter_knows_it_is_volatile(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(TWICE.replace("int n)", "int n, float * volatile q)"))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    params = {p.name: p for p in kernel.params}
    assert params["a"].is_volatile and not params["q"].is_volatile and not params["b"].is_volatile
    accesses = {(a.array, a.mode): a for a in collect_accesses(kernel)}
    assert accesses[("a", "read")].kind == "volatile" and accesses[("a", "read")].index is None
    assert accesses[("b", "read")].understood


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_normalize_keeps_both_loads_of_a_volatile_element(tmp_path, target):
    program, kernel = compiled(tmp_path, TWICE + HOST_1D.format(name="twice"), target)
    text = text_of(kernel)
    assert loads(text, "a") == ["i", "i"], text
    assert "volatile float *a" in text and "float4" not in text and "float2" not in text
    assert_matches_naive(program, kernel)


def test_normalize_alone_still_hoists_the_plain_load(tmp_path):
    _, kernel = compiled(tmp_path, TWICE + HOST_1D.format(name="twice"), "sm_90", "normalize")
    text = text_of(kernel)
    assert loads(text, "a") == ["i", "i"] and "const float b_val = b[i];" in text


def test_vectorize_does_not_widen_a_kernel_with_a_volatile_array(tmp_path):
    _, kernel = compiled(tmp_path, TWICE + HOST_1D.format(name="twice"), "sm_90", "vectorize")
    assert kernel.optimized.launch is None and "float4" not in text_of(kernel)
    assert any("vectorize" in n and "volatile" in n for n in notes(kernel)), notes(kernel)


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_pairs_of_a_volatile_array_stay_scalar_and_the_plain_pairs_become_vectors(tmp_path, target):
    program, kernel = compiled(tmp_path, PAIRS + HOST_1D.format(name="pairs"), target, "vectorize")
    text = text_of(kernel)
    assert loads(text, "a") == ["2 * i", "2 * i + 1"], text
    assert "float2" in text and not loads(text, "b")     # b's pair is one float2 load
    assert_matches_naive(program, kernel)


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_a_volatile_local_pointer_is_left_as_written(tmp_path, target):
    program, kernel = compiled(tmp_path, LOCAL_POINTER + HOST_1D.format(name="local_pointer"), target)
    text = text_of(kernel)
    assert loads(text, "p") == ["i", "i"], text
    assert any("merge" in n and "volatile" in n for n in notes(kernel)) or kernel.optimized.launch is None
    assert_matches_naive(program, kernel)


def test_a_volatile_accumulator_is_not_promoted_to_a_register(tmp_path):
    program, kernel = compiled(tmp_path, ACCUMULATE + HOST_1D.format(name="accumulate"), "sm_90", "normalize")
    text = text_of(kernel)
    assert "c[i] +=" in text and "c_acc" not in text, text
    assert any("volatile" in n for n in notes(kernel)), notes(kernel)
    assert_matches_naive(program, kernel)


@pytest.mark.parametrize("target", ["g80"])      # A's row is a broadcast, coalesced already, on sm_90
def test_coalesce_and_prefetch_leave_a_volatile_operand_and_stage_the_plain_one(tmp_path, target):
    program, kernel = compiled(tmp_path, matmul("mm_vb", "B"), target, "coalesce,prefetch")
    text = text_of(kernel)
    assert "tile_A" in text                                   # the plain operand is staged
    assert loads(text, "B") == ["k * n + col"], text          # the volatile one: one load per iteration
    assert "tile_B" not in text and "B_next" not in text
    assert "volatile float *B" in text and "__restrict__ B" not in text
    assert_matches_naive(program, kernel)


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_merge_leaves_a_kernel_with_a_volatile_array_unmerged(tmp_path, target):
    program, kernel = compiled(tmp_path, matmul("mm_va", "A"), target, "merge")
    text = text_of(kernel)
    assert loads(text, "A") == ["row * n + k"] and loads(text, "B") == ["k * n + col"], text
    assert any("merge" in n and "A is volatile" in n for n in notes(kernel)), notes(kernel)


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_the_default_pipeline_keeps_each_volatile_load(tmp_path, target):
    program, kernel = compiled(tmp_path, matmul("mm_va", "A"), target)
    text = text_of(kernel)
    assert loads(text, "A") == ["row * n + k"] and "tile_A" not in text and "A_next" not in text, text
    assert_matches_naive(program, kernel)


MV_VOLATILE_X = """
__global__ void mv(const float *A, volatile float *x, float *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0;
        for (int c = 0; c < cols; c++)
            sum += A[r * cols + c] * x[c];
        y[r] = sum;
    }
}
"""


def test_partition_does_not_rotate_a_loop_that_reads_a_volatile_array(tmp_path):
    """mv on g80: A's staged rows camp, and rotating the loop's steps would fix it, but that would read x's
    elements in another order."""
    _, kernel = compiled(tmp_path, MV_VOLATILE_X, "g80")
    text = text_of(kernel)
    assert "tile_A" in text and "_steps" not in text and loads(text, "x") == ["c"], text
    assert any("partition" in n and "volatile x" in n for n in notes(kernel)), notes(kernel)
    assert not any(d.pass_name == "partition" and d.action == "applied" for d in kernel.context.log.decisions)
