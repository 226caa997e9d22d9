"""Size-dispatched launches of template instances (gpgpu_opt/launch_dispatch.py): the optimized `k<float, 256>` is
an explicit specialization, which replaces the template for those arguments, so the naive instance is kept as a
function of its own: the template as written, copied as `k_naive`, launched as `k_naive<float, 256>` where the
launch is small. The program's own specialization of an instance is not dispatched (the copy would not be it)."""
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

#: The naive threads from which a widened streaming kernel gains on sm_90 (launch_dispatch.min_threads_widened).
SM90_STREAMING_THRESHOLD = 2 * 132 * 2048

#: In the style of templated samples: one template kernel, instantiated by its launches for two element types.
PROGRAM = """
#include <cstdlib>

template <typename T, int BLOCK>
__global__ void affine(T *y, const T *x, T alpha, T beta, int n)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        y[i] = alpha * x[i] + beta;
}
{specialization}
int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    float *xf, *yf;
    double *xd, *yd;
    cudaMalloc(&xf, n * sizeof(float));
    cudaMalloc(&yf, n * sizeof(float));
    cudaMalloc(&xd, n * sizeof(double));
    cudaMalloc(&yd, n * sizeof(double));
    affine<float, 256><<<(n + 255) / 256, 256>>>(yf, xf, 2.0f, 0.5f, n);
    affine<double, 128><<<(n + 127) / 128, 128>>>(yd, xd, -1.5, 3.0, n);
    cudaDeviceSynchronize();
    return 0;
}
"""

#: The program's own specialization of affine<double, 128>: the naive instance is it, not the template.
SPECIALIZATION = """
template <>
__global__ void affine<double, 128>(double *y, const double *x, double alpha, double beta, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = alpha * x[i] + beta + 0.0;
}
"""


def _compile(tmp_path, text: str, validate: bool = False):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(text))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=validate)


def _instance(result, identifier: str):
    return next(k for k in result.kernels if k.naive.name == identifier)


def test_each_instance_launched_at_a_run_time_size_chooses_and_the_naive_instances_come_from_a_copy(tmp_path):
    """Before, a template instance's launches never chose: neither instance was widened."""
    result = _compile(tmp_path, PROGRAM.replace("{specialization}", ""), validate=True)
    out = result.output
    for identifier in ("affine__float_256", "affine__double_128"):
        kernel = _instance(result, identifier)
        assert kernel.rewritten and kernel.optimized.size_dispatch == SM90_STREAMING_THRESHOLD
        assert kernel.validation.status == "passed", kernel.validation
    # the template as written, one copy of it renamed, then the optimized instances as specializations
    template = out.index("__global__ void affine(T *y")
    copy = out.index("template <typename T, int BLOCK>\n__global__ void affine_naive(T *y, const T *x, T alpha, "
                     "T beta, int n)\n{\n    int i = blockIdx.x * BLOCK + threadIdx.x;")
    assert template < copy < out.index("template <> __global__ void affine<float, 256>(")
    assert out.count("void affine_naive(") == 1
    assert ("if (affine__float_256_gains((n + 255) / 256, 256)) affine<float, 256><<<affine__float_256_grid("
            "(n + 255) / 256, 256), affine__float_256_block((n + 255) / 256, 256)>>>(yf, xf, 2.0f, 0.5f, n); "
            "else affine_naive<float, 256><<<(n + 255) / 256, 256>>>(yf, xf, 2.0f, 0.5f, n);") in out
    assert "else affine_naive<double, 128><<<(n + 127) / 128, 128>>>(yd, xd, -1.5, 3.0, n);" in out
    assert "smaller launches run 'affine_naive<float, 256>'" in " ".join(out.replace("//", "").split())
    assert out.index("static bool affine__float_256_gains(") < template


@requires_nvcc
def test_the_dispatched_template_program_builds_with_nvcc(tmp_path):
    result = _compile(tmp_path, PROGRAM.replace("{specialization}", ""))
    assert "affine_naive<double, 128><<<" in result.output
    out = tmp_path / "out.cu"
    out.write_text(result.output)
    built = subprocess.run(["nvcc", "-arch=sm_90", "-o", str(tmp_path / "prog"), str(out)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def test_the_programs_own_specialization_is_not_dispatched(tmp_path):
    result = _compile(tmp_path, PROGRAM.replace("{specialization}", SPECIALIZATION))
    written = _instance(result, "affine__double_128")
    assert not written.rewritten
    skipped = [d.reason for d in written.context.log.decisions if d.pass_name == "vectorize" and d.action == "skipped"]
    assert any(re.search(r"cannot choose the kernel: 'affine<double, 128>' is the program's own specialization", r)
               for r in skipped), skipped
    assert "affine_naive<double" not in result.output


def test_a_program_naming_the_naive_template_already_is_not_dispatched(tmp_path):
    result = _compile(tmp_path, PROGRAM.replace("{specialization}", "\n// affine_naive: the reference kernel\n"))
    assert not any(k.rewritten for k in result.kernels)
    skipped = [d.reason for d in result.kernels[0].context.log.decisions if d.action == "skipped"]
    assert any("the program already names 'affine_naive'" in r for r in skipped), skipped
