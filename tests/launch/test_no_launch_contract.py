"""Kernels whose launch is not in the file: the output gives the naive results for every launch under which
the naive kernel is valid, or its launch helpers refuse the launch (gpgpu_opt/launch_contract.py). The three
cases found by the held-out programs (an unguarded matrix product run as 200x200 threads in 8x8 blocks, an unguarded
elementwise kernel widened 4 per thread run `<<<3, 32>>>`, the paper's reduction run with 512-thread blocks)
are refused; launches the helpers accept give the naive results in the emulator; the helpers compile and
print the same refusal the Python side computes."""
from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from gpgpu_opt.check import validate as validate_module
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.contract import guarded_axes, helper_launch, launch_assumptions
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import CaseResult, default_cases
from gpgpu_opt.check.launches import check_launch, launch_cases, odd_launch_check
from tests.cli_in_process import run_cli
from tests.conftest import INPUTS, ROOT, requires_nvcc

MM_200 = """
#define N 200
__global__ void mm(float *A, float *B, float *C)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    for (int k = 0; k < N; k++)
        sum += A[row * N + k] * B[k * N + col];
    C[row * N + col] = sum;
}
"""

ADD = """
__global__ void add(float *a, float *b, float *c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
"""

GUARDED_MM = """
__global__ void mmg(float *A, float *B, float *C, int n)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; k++)
            sum += A[row * n + k] * B[k * n + col];
        C[row * n + col] = sum;
    }
}
"""

GUARDED_ADD = """
__global__ void addg(float *a, float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
"""

GUARDED_BY_RETURN = """
__global__ void addr(float *a, float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    c[i] = a[i] + b[i];
}
"""

LAUNCHED_ADD = ADD + """
#define N (8192 * 256)
int main()
{
    float *a, *b, *c;
    cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&c, N * 4);
    add<<<8192, 256>>>(a, b, c);
    return 0;
}
"""

#: Elementwise kernels the file does not launch: their launch cannot choose the widened kernel by size
#: (launch_dispatch.py), so they are widened only where a width is asked for.
ELEMENTWISE = (ADD, GUARDED_ADD, GUARDED_BY_RETURN)


def compiled(tmp_path, source: str | None = None, path=None, vector_width=None):
    if vector_width is None and source in ELEMENTWISE:
        vector_width = 4
    if path is None:
        path = tmp_path / "k.cu"
        path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, {},
                             vector_width=vector_width)
    (kernel,) = result.kernels
    return program, kernel, result


def contract_of(program, kernel):
    return launch_assumptions(program, kernel.naive, kernel.optimized, kernel.context.facts.naive_block)


def run_launch(program, kernel, contract, block, grid, sizes=None):
    """The naive launch `<<<grid, block>>>` through the helpers' logic, in the emulator."""
    (case,) = default_cases(kernel.naive, program, sizes or {}, None, block, grid)
    return check_launch(kernel.naive, kernel.optimized, contract, kernel.context.facts.naive_block, case, 5,
                        program.device_functions)


# -- the three cases of the issue ----------------------------------------------------------------------------
def test_unguarded_matrix_product_refuses_200x200_threads_in_8x8_blocks(tmp_path):
    program, kernel, _ = compiled(tmp_path, MM_200)
    assert kernel.rewritten and kernel.optimized.launch.outputs_per_block == (16, 16)
    contract = contract_of(program, kernel)
    refusal = contract.refusal((25, 25, 1), (8, 8, 1))
    assert refusal is not None and "'mm'" in refusal and "200x200 threads" in refusal
    assert "a multiple of 16 threads in x" in refusal
    refused = run_launch(program, kernel, contract, (8, 8), (25, 25))
    assert refused.refusal == refusal and refused.result is None
    # the launch the helpers refuse is one the optimized kernel gets wrong: it reads A past its end
    (case,) = default_cases(kernel.naive, program, {}, None, (8, 8), (25, 25))
    from gpgpu_opt.check.cases import run_case
    wrong = run_case(kernel.naive, kernel.optimized, (8, 8), case, 5, {},
                     launch=helper_launch(kernel.optimized, (25, 25), (8, 8)))
    assert not wrong.ok and "out-of-bounds" in wrong.error
    # launches of whole tiles with other blocks are served
    for block, grid in [((8, 8), (4, 4)), ((16, 4), (2, 8)), ((32, 2), (1, 16))]:
        accepted = run_launch(program, kernel, contract, block, grid)
        assert accepted.refusal is None and accepted.result.ok, accepted.result


def test_widened_elementwise_kernel_refuses_3_blocks_of_32(tmp_path):
    program, kernel, _ = compiled(tmp_path, ADD)
    assert kernel.optimized.launch.outputs_per_block[0] > 32      # 4 per thread: whole tiles of 256 threads
    contract = contract_of(program, kernel)
    refused = run_launch(program, kernel, contract, (32,), (3,))
    assert refused.refusal and "'add'" in refused.refusal and "96x1 threads" in refused.refusal
    for block, grid in [((32,), (8,)), ((96,), (8,)), ((64,), (12,))]:
        accepted = run_launch(program, kernel, contract, block, grid)
        assert accepted.refusal is None and accepted.result.ok, accepted.result


def test_reduction_refuses_512_thread_blocks(tmp_path):
    program, kernel, _ = compiled(tmp_path, path=INPUTS / "reduction.cu")
    contract = contract_of(program, kernel)
    assert contract.block == (256, 1)                              # its tree is the block's
    sizes = {"n": 1000, "segSize": 4}
    refused = run_launch(program, kernel, contract, (512,), (2,), sizes)
    assert refused.refusal and "naive blocks of 256x1 threads" in refused.refusal
    accepted = run_launch(program, kernel, contract, (256,), (3,), sizes)
    assert accepted.refusal is None and accepted.result.ok, accepted.result


# -- kernels with a guard, and kernels the file launches -----------------------------------------------------
@pytest.mark.parametrize("source", [GUARDED_MM, GUARDED_ADD, GUARDED_BY_RETURN])
def test_guarded_kernel_serves_launch_shapes_that_divide_nothing(tmp_path, source):
    program, kernel, result = compiled(tmp_path, source)
    assert kernel.rewritten
    contract = contract_of(program, kernel)
    assert contract.requirements() == [] and "_check_launch" not in result.output
    base = default_cases(kernel.naive, program, {}, None)[-1]            # n = 37
    cases = launch_cases(kernel.naive, program, base, contract, guarded_axes(kernel.naive, program))
    assert len(cases) == 3 and all(any(c.grid[d] * c.block[d] % 16 for d in (0, 1)) for c in cases)
    for case in cases:
        outcome = check_launch(kernel.naive, kernel.optimized, contract, kernel.context.facts.naive_block, case, 5, {})
        assert outcome.refusal is None and outcome.result.ok, outcome.result


@pytest.mark.parametrize("source", [GUARDED_MM, GUARDED_ADD, GUARDED_BY_RETURN])
def test_helper_grid_covers_the_guarded_space(tmp_path, source):
    program, kernel, _ = compiled(tmp_path, source)
    per = kernel.optimized.launch.outputs_per_block
    for block in [(32, 1), (96, 1), (8, 8), (16, 4), (7, 3)]:
        for space in [(37, 45), (1, 1), (1000, 3), (4096, 4097)]:
            grid = tuple(-(-s // b) for s, b in zip(space, block))
            _, new_grid = helper_launch(kernel.optimized, grid, block)
            assert all(g * p >= s for g, p, s in zip(new_grid, per, space))


def test_kernel_launched_in_the_file_keeps_todays_helpers(tmp_path):
    program, kernel, result = compiled(tmp_path, LAUNCHED_ADD)
    assert kernel.rewritten and contract_of(program, kernel) is None
    assert "_check_launch" not in result.output and "#include <cstdio>" not in result.output
    assert "add<<<add_grid(8192, 256), add_block(8192, 256)>>>" in result.output


def test_stated_space_is_required_exactly():
    program, kernel, _ = compiled(None, path=INPUTS / "vv.cu")
    contract = contract_of(program, kernel)
    assert contract.extent == (4096, 4096)
    assert contract.refusal((256, 256), (16, 16)) is None
    assert "exactly 4096 threads in x" in contract.refusal((128, 256), (16, 16))


# -- compile's check and verify ------------------------------------------------------------------------------
def test_compile_check_runs_a_launch_of_blocks_that_divide_no_tile(tmp_path, monkeypatch):
    program, kernel, _ = compiled(tmp_path, GUARDED_ADD)
    base = default_cases(kernel.naive, program, {}, None)[-1]
    result = odd_launch_check(program, kernel.naive, kernel.optimized, kernel.context.facts.naive_block, base, 3)
    assert result.ok and result.case.block[:2] == (96, 1)
    # validate rolls back a version whose odd launch fails
    failing = CaseResult(base, mismatches=["c: 1 of 37 elements differ"])
    monkeypatch.setattr(validate_module, "odd_launch_check", lambda *args: failing)
    kept, validation = validate_module.validate(program, kernel.naive, [("naive", kernel.naive),
                                                                       ("merge", kernel.optimized)],
                                                kernel.context.facts.naive_block)
    assert validation.status == "rolled back" and kept is kernel.naive


def verify_cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli("verify", *args, cwd=ROOT)


def test_verify_reports_refusals_and_fuzzes_launch_shapes(tmp_path):
    path = tmp_path / "mm.cu"
    path.write_text(textwrap.dedent(MM_200))
    out = verify_cli(str(path), "--global", "200,200", "--block", "8,8")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "naive launch grid 25x25 block 8x8: refused by the launch helpers" in out.stdout
    assert "(naive launch grid 4x4 block 8x8)" in out.stdout and "ok" in out.stdout
    assert "naive launch grid 3x3 block 16x4: refused" in out.stdout
    assert out.stdout.rstrip().endswith("PASS")


# -- the emitted helpers ------------------------------------------------------------------------------------
HOST = """
int main(int argc, char **argv)
{
    dim3 grid(atoi(argv[1]), atoi(argv[2])), block(atoi(argv[3]), atoi(argv[4]));
    dim3 g = KERNEL_grid(grid, block), b = KERNEL_block(grid, block);
    printf("%u %u %u %u\\n", g.x, g.y, b.x, b.y);
    return 0;
}
"""


@requires_nvcc
@pytest.mark.parametrize("name, source, bad, good", [
    ("mm", MM_200, ((25, 25), (8, 8)), ((4, 4), (8, 8))),
    ("add", ADD, ((3, 1), (32, 1)), ((8, 1), (32, 1))),
    ("reduction", None, ((2, 1), (512, 1)), ((3, 1), (256, 1))),
])
def test_emitted_helpers_compile_and_refuse_as_the_python_side_does(tmp_path, name, source, bad, good):
    program, kernel, result = compiled(tmp_path, source, None if source else INPUTS / "reduction.cu")
    assert f"{name}_check_launch" in result.output
    cu = tmp_path / "out.cu"
    cu.write_text(result.output)
    cubin = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "out.cubin"), str(cu)],
                           capture_output=True, text=True)
    assert cubin.returncode == 0, cubin.stderr
    cu.write_text(result.output + HOST.replace("KERNEL", name))
    exe = tmp_path / "helpers"
    build = subprocess.run(["nvcc", "-arch=sm_90", "-o", str(exe), str(cu)], capture_output=True, text=True)
    if build.returncode != 0 and shutil.which("g++") is None:
        pytest.skip("no host compiler for nvcc")
    assert build.returncode == 0, build.stderr
    contract = contract_of(program, kernel)
    (grid, block) = bad
    refused = subprocess.run([str(exe), *map(str, grid + block)], capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip() == contract.refusal(grid, block)
    (grid, block) = good
    served = subprocess.run([str(exe), *map(str, grid + block)], capture_output=True, text=True)
    new_block, new_grid = helper_launch(kernel.optimized, grid, block)
    assert served.returncode == 0 and served.stdout.split() == list(map(str, new_grid + new_block))


def test_block_dependence_looks_into_device_functions(tmp_path):
    from gpgpu_opt.launch.contract import block_dependence

    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
        __device__ float lane_scale(float v) { return v * (threadIdx.x % 32); }
        __device__ float twice(float v) { return 2.0f * v; }
        __global__ void scaled(float *a, float *c) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            c[i] = lane_scale(a[i]);
        }
        __global__ void doubled(float *a, float *c) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            c[i] = twice(a[i]);
        }
    """))
    program = load_program(str(path))
    assert "lane_scale" in block_dependence(program.kernel("scaled"), program)
    assert block_dependence(program.kernel("doubled"), program) is None


def test_a_naive_kernel_invalid_under_a_fuzzed_launch_is_skipped_but_fails_under_the_programs(capsys):
    from gpgpu_opt.check.cases import Case
    from gpgpu_opt.check.command import _print_outcome
    from gpgpu_opt.check.launches import LaunchOutcome

    outcome = LaunchOutcome(Case({}, (24, 24)), (8, 8, 1), (3, 3, 1), naive_invalid="the naive kernel races")
    assert _print_outcome("k", outcome, fuzzed=True) is True
    assert "skipped" in capsys.readouterr().out
    assert _print_outcome("k", outcome) is False
    assert "FAIL" in capsys.readouterr().out
