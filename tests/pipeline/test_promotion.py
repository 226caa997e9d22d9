"""Register promotion of global accumulators when the loop may run zero times, checked in the emulator with
the loop bound 0 and a ragged one, and the cases where it must not happen."""
import numpy as np
import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

ROW_SUM = """
__global__ void row_sum(const float *__restrict__ a, float *__restrict__ x, int n, int nk)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int k;
        for (k = 0; k < nk; k++)
            x[i] += a[i * nk + k];
    }
}
"""

SCALED = """
__global__ void row_sum(const float *__restrict__ a, float *__restrict__ x, int n, int nk)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] *= 0.5f;
        int k;
        for (k = 0; k < nk; k++) {
            x[i] += a[i * nk + k];
        }
    }
}
"""


def _compile(tmp_path, source):
    path = tmp_path / "k.cu"
    path.write_text(source)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), ["restrict", "normalize"], diagnostics)
    return result.kernels[0], diagnostics


def _run(kernel, n, nk, seed=3):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 1.5, max(1, n * nk)).astype(np.float32)
    x = rng.uniform(0.5, 1.5, n + 3).astype(np.float32)  # past n: must stay as it is
    run_kernel(kernel, ((n + 31) // 32,), (32,), {"a": a, "x": x, "n": n, "nk": nk})
    return x


@pytest.mark.parametrize("source, shape", [(ROW_SUM, "if (0 < nk) {"), (SCALED, "x_acc *= 0.5f;")])
@pytest.mark.parametrize("nk", [0, 1, 7])
def test_promotion_is_exact_even_when_the_loop_does_not_run(tmp_path, source, shape, nk):
    result, _ = _compile(tmp_path, source)
    from gpgpu_opt.codegen import kernel_source

    text = kernel_source(result.optimized.funcdef)
    assert shape in text and "x_acc += " in text and text.count("x[i]") == 2
    expected, actual = _run(result.naive, 45, nk), _run(result.optimized, 45, nk)
    assert np.array_equal(expected, actual)


def test_a_counter_used_after_the_loop_keeps_the_loop_unwrapped(tmp_path):
    source = ROW_SUM.replace("            x[i] += a[i * nk + k];\n", "            x[i] += a[i * nk + k];\n"
                             "        x[i] += k;\n")
    result, diagnostics = _compile(tmp_path, source)
    assert any("'k' is used outside the loop" in str(n) for n in diagnostics.notes)


@pytest.mark.parametrize("body, why", [
    ("x[i] += a[i * nk + k] + x[i + 1];", "used again in the loop"),
    ("if (a[k] > 0.0f) return; x[i] += a[i * nk + k];", "leave the kernel"),
])
def test_unsafe_promotions_are_skipped_with_the_reason(tmp_path, body, why):
    source = ROW_SUM.replace("            x[i] += a[i * nk + k];", "        {" + body + "}")
    result, diagnostics = _compile(tmp_path, source)
    assert any(why in str(n) for n in diagnostics.notes), [str(n) for n in diagnostics.notes]
    assert not any(d.action == "applied" and d.pass_name == "normalize" for d in result.context.log.decisions)


def test_without_restrict_the_note_names_the_fix(tmp_path):
    result, diagnostics = _compile(tmp_path, ROW_SUM.replace("__restrict__", ""))
    assert any("may alias" in str(n) and "__restrict__" in str(n) for n in diagnostics.notes)
