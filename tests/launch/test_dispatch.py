"""Size-dispatched launches (gpgpu_opt/launch_dispatch.py): a kernel whose widened form gains only on launches
that still fill the GPU (a chain of slow arithmetic per element, passes/vectorize/latency.py) is kept beside
its naive copy where the launch's size is a run-time value, and each launch statement chooses by size. A
constant-size launch is decided when compiling; a launch that is not a plain statement is not dispatched."""
from __future__ import annotations

import re
import subprocess
import textwrap

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from tests.conftest import requires_nvcc

#: In the style of a finite-volume solver's step factor: one element per thread, a chain of divisions and
#: square roots per element, the grid from the element count the program reads at run time.
KERNEL = """
#include <cstdlib>
#define BLOCK_SIZE 192
#define GAMMA 1.4f
#define NVAR 3

__global__ void step_factor(int nelr, const float *variables, const float *areas, float *step_factors)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    float density = variables[i];
    float energy = variables[i + 2 * nelr];
    float speed = variables[i + nelr] / density;
    float pressure = (GAMMA - 1.0f) * (energy - 0.5f * density * speed * speed);
    float sound = sqrtf(GAMMA * pressure / density);
    step_factors[i] = 0.5f / (sqrtf(areas[i]) * (sqrtf(speed * speed) + sound));
}
"""

RUNTIME_LAUNCH = KERNEL + """
void compute_step_factor(int nelr, float *variables, float *areas, float *step_factors)
{
    dim3 Dg(nelr / BLOCK_SIZE), Db(BLOCK_SIZE);
    {launch}
}

int main(int argc, char **argv)
{
    int nelr = BLOCK_SIZE * (argc > 1 ? atoi(argv[1]) : 512);
    float *variables, *areas, *steps;
    cudaMalloc(&variables, NVAR * nelr * sizeof(float));
    cudaMalloc(&areas, nelr * sizeof(float));
    cudaMalloc(&steps, nelr * sizeof(float));
    compute_step_factor(nelr, variables, areas, steps);
    return 0;
}
"""
PLAIN = "step_factor<<<Dg, Db>>>(nelr, variables, areas, step_factors);"

CONSTANT_LAUNCH = KERNEL + """
#define NELR ({blocks} * BLOCK_SIZE)
int main()
{
    float *variables, *areas, *steps;
    cudaMalloc(&variables, NVAR * NELR * sizeof(float));
    cudaMalloc(&areas, NELR * sizeof(float));
    cudaMalloc(&steps, NELR * sizeof(float));
    step_factor<<<NELR / BLOCK_SIZE, BLOCK_SIZE>>>(NELR, variables, areas, steps);
    return 0;
}
"""

#: The naive threads from which a widened kernel gains on sm_90 (132 SMs x 2048 resident threads): 4 GPU-fulls for
#: step_factor's chains of divisions and square roots, 2 for a streaming body (launch_dispatch.min_threads_widened).
SM90_THRESHOLD = 4 * 132 * 2048
SM90_STREAMING_THRESHOLD = 2 * 132 * 2048


def _assert_builds(tmp_path, output: str) -> None:
    """nvcc builds the compiled program (both kernels and the launch that chooses)."""
    out = tmp_path / "out.cu"
    out.write_text(output)
    built = subprocess.run(["nvcc", "-arch=sm_90", "-o", str(tmp_path / "prog"), str(out)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def _compile(tmp_path, text: str, validate: bool = False):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(text))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=validate)
    return result, path


def _vectorize(result, action: str) -> list[str]:
    return [d.reason for d in result.kernels[0].context.log.decisions if d.pass_name == "vectorize" and d.action == action]


def test_a_run_time_size_keeps_both_kernels_and_the_launch_chooses(tmp_path):
    result, _ = _compile(tmp_path, RUNTIME_LAUNCH.replace("{launch}", PLAIN), validate=True)
    out = result.output
    [kernel] = result.kernels
    assert kernel.rewritten and kernel.optimized.size_dispatch == SM90_THRESHOLD
    assert kernel.validation.status == "passed", kernel.validation        # the widened kernel, emulated
    assert any(f"widened where the launch has at least {SM90_THRESHOLD} threads, the naive kernel below" in r
               for r in _vectorize(result, "applied"))
    assert "__global__ void step_factor_naive(int nelr, const float *variables" in out
    assert "make_float4" in out.split("__global__ void step_factor_naive")[0]             # the optimized kernel comes first
    assert f"return threads >= {SM90_THRESHOLD}ull;" in out
    assert ("if (step_factor_gains(Dg, Db)) step_factor<<<step_factor_grid(Dg, Db), step_factor_block(Dg, Db)>>>"
            "(nelr, variables, areas, step_factors); else step_factor_naive<<<Dg, Db>>>"
            "(nelr, variables, areas, step_factors);") in out
    # the helper comes before the launch that calls it
    assert out.index("static bool step_factor_gains") < out.index("if (step_factor_gains")
    assert result.report()["kernels"][0]["launch"]["dispatch_min_threads"] == SM90_THRESHOLD


@requires_nvcc
def test_the_dispatched_program_builds_with_nvcc(tmp_path):
    """Also where the launch is the body of a loop or the branch of an if that has an else: the choice is one
    statement (`if (...) A; else B;`), and an outer `else` still belongs to the outer `if`."""
    launch = (f"for (int r = 0; r < 2; r++)\n        {PLAIN}\n"
              f"    if (nelr > 0)\n        {PLAIN}\n    else\n        return;")
    result, _ = _compile(tmp_path, RUNTIME_LAUNCH.replace("{launch}", launch))
    assert result.output.count("if (step_factor_gains(Dg, Db))") == 2
    _assert_builds(tmp_path, result.output)


def test_the_size_scales_with_the_targets_gpu(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(RUNTIME_LAUNCH.replace("{launch}", PLAIN)))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_80"), parse_pass_list(None), Diagnostics(quiet=True))
    assert result.kernels[0].optimized.size_dispatch == 4 * 108 * 2048


def test_a_small_constant_launch_is_decided_when_compiling_not_widened(tmp_path):
    result, _ = _compile(tmp_path, CONSTANT_LAUNCH.replace("{blocks}", "512"))
    assert not result.kernels[0].rewritten and not _vectorize(result, "applied")
    assert any(f"has 98304 threads, fewer than the {SM90_THRESHOLD}" in r for r in _vectorize(result, "skipped"))
    assert "_naive" not in result.output and "_gains" not in result.output


def test_a_large_constant_launch_is_widened_without_a_dispatch(tmp_path):
    result, _ = _compile(tmp_path, CONSTANT_LAUNCH.replace("{blocks}", "8192"))
    [kernel] = result.kernels
    assert kernel.rewritten and kernel.optimized.size_dispatch is None
    assert any("has 1572864 threads, at least the" in r for r in _vectorize(result, "applied"))
    assert "_naive" not in result.output and "_gains" not in result.output
    assert "step_factor<<<step_factor_grid(" in result.output


def _not_dispatched(tmp_path, launch: str, why: str):
    result, _ = _compile(tmp_path, RUNTIME_LAUNCH.replace("{launch}", launch))
    assert not result.kernels[0].rewritten and "_naive" not in result.output
    skipped = _vectorize(result, "skipped")
    assert any("long-latency operations" in r and re.search(why, r) for r in skipped), skipped
    return result


def test_a_launch_inside_an_expression_is_not_dispatched(tmp_path):
    _not_dispatched(tmp_path, "(void)step_factor<<<Dg, Db>>>(nelr, variables, areas, step_factors);",
                    r"known only at run time, where it cannot choose the kernel: .*(part of a larger expression|"
                    r"can be read)")


def test_a_grid_with_side_effects_is_not_read_twice(tmp_path):
    launch = "int blocks = 0;\n    step_factor<<<blocks++ + Dg.x, Db>>>(nelr, variables, areas, step_factors);"
    _not_dispatched(tmp_path, launch, r"grid `blocks\+\+ \+ Dg.x` that may have side effects")


def test_the_statement_ends_where_the_launch_ends(tmp_path):
    """`k<<<...>>>(...), other();` is a comma expression: its other half must not be dropped or doubled."""
    launch = "step_factor<<<Dg, Db>>>(nelr, variables, areas, step_factors), cudaDeviceSynchronize();"
    _not_dispatched(tmp_path, launch, r"is not a statement of its own|part of a larger expression")


# -- every widening, not only slow chains ---------------------------------------------------------------------
#: In the style of the same solver's time step: streaming loads and stores, one division per element (no chain
#: of slow arithmetic). Widened on a launch that does not fill the GPU it lost too (about 5% at 97K elements).
STREAMING = """
#include <cstdlib>
#define BLOCK_SIZE 192
#define RK 3

__global__ void time_step(int j, int nelr, const float *old_variables, float *variables, const float *step_factors,
                          const float *fluxes)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    float factor = step_factors[i] / (float)(RK + 1 - j);
    variables[i] = old_variables[i] + factor * fluxes[i];
    variables[i + nelr] = old_variables[i + nelr] + factor * fluxes[i + nelr];
}
"""

STREAMING_RUNTIME = STREAMING + """
int main(int argc, char **argv)
{
    int nelr = BLOCK_SIZE * (argc > 1 ? atoi(argv[1]) : 512);
    float *old_variables, *variables, *step_factors, *fluxes;
    cudaMalloc(&old_variables, 2 * nelr * sizeof(float));
    cudaMalloc(&variables, 2 * nelr * sizeof(float));
    cudaMalloc(&step_factors, nelr * sizeof(float));
    cudaMalloc(&fluxes, 2 * nelr * sizeof(float));
    for (int j = 0; j < RK; j++) {
        dim3 Dg(nelr / BLOCK_SIZE), Db(BLOCK_SIZE);
        time_step<<<Dg, Db>>>(j, nelr, old_variables, variables, step_factors, fluxes);
    }
    cudaDeviceSynchronize();
    return 0;
}
"""

STREAMING_CONSTANT = STREAMING + """
#define NELR ({blocks} * BLOCK_SIZE)
int main()
{
    float *old_variables, *variables, *step_factors, *fluxes;
    cudaMalloc(&old_variables, 2 * NELR * sizeof(float));
    cudaMalloc(&variables, 2 * NELR * sizeof(float));
    cudaMalloc(&step_factors, NELR * sizeof(float));
    cudaMalloc(&fluxes, 2 * NELR * sizeof(float));
    time_step<<<NELR / BLOCK_SIZE, BLOCK_SIZE>>>(0, NELR, old_variables, variables, step_factors, fluxes);
    return 0;
}
"""


def test_a_streaming_kernel_launched_at_a_run_time_size_keeps_both_kernels_and_the_launch_chooses(tmp_path):
    """Before, only bodies of slow chains were chosen by size: this one was widened for every launch."""
    result, _ = _compile(tmp_path, STREAMING_RUNTIME, validate=True)
    [kernel] = result.kernels
    assert kernel.rewritten and kernel.optimized.size_dispatch == SM90_STREAMING_THRESHOLD
    assert kernel.validation.status == "passed", kernel.validation
    applied = _vectorize(result, "applied")
    assert any(f"widened where the launch has at least {SM90_STREAMING_THRESHOLD} threads, the naive kernel below" in r
               for r in applied), applied
    out = result.output
    assert "__global__ void time_step_naive(int j, int nelr" in out
    assert "make_float4" in out.split("__global__ void time_step_naive")[0]
    assert f"return threads >= {SM90_STREAMING_THRESHOLD}ull;" in out
    assert ("if (time_step_gains(Dg, Db)) time_step<<<time_step_grid(Dg, Db), time_step_block(Dg, Db)>>>"
            "(j, nelr, old_variables, variables, step_factors, fluxes); else time_step_naive<<<Dg, Db>>>"
            "(j, nelr, old_variables, variables, step_factors, fluxes);") in out


@requires_nvcc
def test_the_dispatched_streaming_program_builds_with_nvcc(tmp_path):
    result, _ = _compile(tmp_path, STREAMING_RUNTIME)
    assert "time_step_naive<<<" in result.output
    _assert_builds(tmp_path, result.output)


def test_a_streaming_kernel_with_a_small_constant_launch_is_not_widened_and_the_note_gives_the_numbers(tmp_path):
    result, _ = _compile(tmp_path, STREAMING_CONSTANT.replace("{blocks}", "512"))   # 98304 threads
    assert not result.kernels[0].rewritten and not _vectorize(result, "applied")
    skipped = _vectorize(result, "skipped")
    assert any("widened by 4, the launch would have 4x fewer threads" in r
               and f"has 98304 threads, fewer than the {SM90_STREAMING_THRESHOLD} that fill the GPU widened" in r
               for r in skipped), skipped
    assert "_naive" not in result.output and "_gains" not in result.output


def test_a_streaming_kernel_with_a_large_constant_launch_is_widened_without_a_dispatch(tmp_path):
    result, _ = _compile(tmp_path, STREAMING_CONSTANT.replace("{blocks}", "8192"))    # 1572864 threads
    [kernel] = result.kernels
    assert kernel.rewritten and kernel.optimized.size_dispatch is None
    assert any(r.startswith("widened: 4 consecutive x per thread") for r in _vectorize(result, "applied"))
    assert "_naive" not in result.output and "_gains" not in result.output
    assert "time_step<<<time_step_grid(" in result.output


def test_a_streaming_kernel_the_file_does_not_launch_is_not_widened(tmp_path):
    """Its launches, elsewhere, cannot choose by size: it is decided as if they were small."""
    result, _ = _compile(tmp_path, STREAMING)
    assert not result.kernels[0].rewritten and "_naive" not in result.output
    skipped = _vectorize(result, "skipped")
    assert any("widened by 4" in r and "the file does not launch 'time_step'" in r for r in skipped), skipped


def test_a_streaming_kernel_launched_in_an_expression_is_not_widened(tmp_path):
    text = STREAMING_RUNTIME.replace("time_step<<<Dg, Db>>>", "(void)time_step<<<Dg, Db>>>")
    result, _ = _compile(tmp_path, text)
    assert not result.kernels[0].rewritten and "_naive" not in result.output
    skipped = _vectorize(result, "skipped")
    assert any("widened by 4" in r and "known only at run time, where it cannot choose the kernel" in r
               for r in skipped), skipped


def test_a_stated_thread_space_decides_when_compiling(tmp_path):
    """The original compiler's inputs state their thread space (`#define globalDimX 4096`) and launch nothing."""
    kernel = """
#define globalDimX {x}
#define globalDimY {y}
__global__ void add(float *a, const float *b, int w)
{{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    a[y * w + x] += b[y * w + x];
}}
"""
    small, _ = _compile(tmp_path, kernel.format(x=1024, y=64))
    assert not small.kernels[0].rewritten
    assert any("the stated globalDimX x globalDimY) has 65536 threads, fewer than" in r
               for r in _vectorize(small, "skipped")), _vectorize(small, "skipped")
    large, _ = _compile(tmp_path, kernel.format(x=4096, y=4096))
    assert large.kernels[0].rewritten and large.kernels[0].optimized.size_dispatch is None
