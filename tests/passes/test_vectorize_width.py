"""The vectorize pass, wider: the vector width by element size (16 bytes: float4, double2; `__half` has only
`__half2`), loops with a constant trip count in an elementwise body, and a note for every kernel it does
not widen. Each rewrite is emulated against the naive kernel at sizes no vector width divides (ragged
tails), with the race check, and built with nvcc."""
from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_program
from gpgpu_opt.targets import get_target
from gpgpu_opt.verify import Case, run_case

DOUBLE_STEP = """
#define RK 3
__global__ void time_step(int j, int n, const double *old_v, double *v, const double *factors, const double *flux)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        double factor = factors[i] / double(RK + 1 - j);
        v[i + 2 * n] = old_v[i + 2 * n] + factor * flux[i + 2 * n];
    }
}

void step(int j, int n)
{
    double *old_v, *v, *factors, *flux;
    cudaMalloc(&old_v, 4 * n * sizeof(double));
    cudaMalloc(&v, 4 * n * sizeof(double));
    cudaMalloc(&factors, n * sizeof(double));
    cudaMalloc(&flux, 4 * n * sizeof(double));
    time_step<<<(n + 127) / 128, 128>>>(j, n, old_v, v, factors, flux);
}
"""

HALF_AXPY = """
#include <cuda_fp16.h>
__global__ void haxpy(int n, __half alpha, const __half *x, __half *y, float *r)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __hadd(__hmul(alpha, x[i]), y[i]);
        r[i] = __half2float(x[i]);
    }
}

void run(int n, const __half *x, __half *y, float *r)
{
    haxpy<<<(n + 255) / 256, 256>>>(n, __float2half(0.5f), x, y, r);
}
"""


def _compile(tmp_path_factory, name: str, source: str, passes: str | None = "vectorize"):
    path = tmp_path_factory.mktemp(name) / f"{name}.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_program(program, get_target("sm_90"), parse_pass_list(passes), diagnostics, validate=True)


def _notes(kernel, action: str) -> list[str]:
    return [f"{d.subject}: {d.reason}" for d in kernel.context.decisions
            if d.pass_name == "vectorize" and d.action == action]


def _equivalent(kernel, sizes: dict, space: tuple[int, int]) -> None:
    result = run_case(kernel.naive, kernel.optimized, kernel.context.naive_block, Case(sizes=sizes, global_space=space),
                      seed=5, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def _nvcc(result, tmp_path_factory) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("nvcc") / "out.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "/dev/null", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def double_step(tmp_path_factory):
    return _compile(tmp_path_factory, "double_step", DOUBLE_STEP)


@pytest.fixture(scope="module")
def half_axpy(tmp_path_factory):
    return _compile(tmp_path_factory, "half_axpy", HALF_AXPY)


# -- the width by element size ------------------------------------------------------------------------------
def test_doubles_are_widened_by_double2(double_step, tmp_path_factory):
    """Before: widen asked for a 4-element vector of double, which does not exist, and wrote that
    factors[i] was 'not one element per thread along x'. 16 bytes hold two doubles."""
    (k,) = double_step.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int i = 2 * (blockDim.x * blockIdx.x + threadIdx.x);" in text
    assert "double2 factor = make_double2(factors_val.x / ((double) (4 - j)), " in text
    assert "((double2 *) (v + 2 * n))[i / 2] = make_double2(" in text
    assert "double4" not in text
    assert any("(double2)" in n for n in _notes(k, "applied"))
    assert k.validation.status == "passed"
    for n in (37, 5, 64):
        _equivalent(k, {"n": n, "j": 1}, (n, 1))
    _nvcc(double_step, tmp_path_factory)


def test_halves_are_widened_by_half2_with_exact_half_arithmetic(half_axpy, tmp_path_factory):
    """Before: "'x_val' depends on x and is not a scalar of a vector type's element". The only vector of
    `__half` in the type table is `__half2`: two halves a thread (and float2 for the float output), each lane
    computed by the same half intrinsics, so the emulator's half rounding is the naive kernel's."""
    (k,) = half_axpy.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    assert "const __half2 x_val = ((const __half2 *) x)[i / 2];" in text
    assert "((__half2 *) y)[i / 2] = __halves2half2(__hadd(__hmul(alpha, x_val.x), y_val.x), " \
           "__hadd(__hmul(alpha, x_val.y), y_val.y));" in text
    assert "((float2 *) r)[i / 2] = make_float2(" in text
    assert k.validation.status == "passed"
    for n in (37, 3, 64):
        _equivalent(k, {"n": n, "alpha": 0.75}, (n, 1))
    _nvcc(half_axpy, tmp_path_factory)
