"""normalize: loads hoisted into temporaries (never out of short-circuit code), accumulators promoted."""
import textwrap

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.pipeline import compile_program
from gpgpu_opt.targets import get_target


def normalized(tmp_path, source):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    diags = Diagnostics(quiet=True)
    result = compile_program(load_program(str(path), diagnostics=diags), get_target("sm_90"), ["normalize"], diags)
    return kernel_source(result.kernels[0].optimized.funcdef), result.kernels[0].context.decisions


def test_loads_are_hoisted_out_of_larger_expressions(tmp_path):
    text, _ = normalized(tmp_path, """
        __global__ void k(const float *a, const float *b, float *c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += a[i * n + j] * b[j] + a[i * n + j];
            if (i < n && a[i] > 0.0f) c[i] = s;
        }
    """)
    assert "const float a_val = a[i * n + j];" in text
    assert "const float b_val = b[j];" in text
    assert "s += a_val * b_val + a_val;" in text
    assert "if (i < n && a[i] > 0.0f)" in text  # a guarded load stays guarded


def test_global_accumulator_is_promoted_when_safe(tmp_path):
    text, decisions = normalized(tmp_path, """
        __global__ void k(const float *a, float * __restrict__ c) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            for (int j = 0; j < 8; j++) { c[i] += a[j * 64 + i]; }
        }
    """)
    assert "float c_acc = c[i];" in text and "c_acc += a[j * 64 + i];" in text and "c[i] = c_acc;" in text
    assert decisions[0].action == "applied"


def test_accumulator_that_may_alias_is_left_alone(tmp_path):
    text, decisions = normalized(tmp_path, """
        __global__ void k(const float *a, float *c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            for (int j = 0; j < n; j++) { c[i] += a[j]; }
        }
    """)
    assert "c_acc" not in text
    assert decisions[0].action == "skipped" and "alias" in decisions[0].reason
