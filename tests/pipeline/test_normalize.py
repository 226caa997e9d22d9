"""normalize: loads hoisted into temporaries (never out of short-circuit code), accumulators promoted."""
import textwrap

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target


def normalized(tmp_path, source):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    diags = Diagnostics(quiet=True)
    result = compile_with(load_program(str(path), diagnostics=diags), get_target("sm_90"), ["normalize"], diags)
    return kernel_source(result.kernels[0].optimized.funcdef), result.kernels[0].context.log.decisions


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


def test_promoted_accumulator_computes_the_same_at_a_ragged_size(tmp_path):
    import pytest
    pytest.importorskip("gpgpu_opt.emulator")
    from gpgpu_opt.check.cases import Case, run_case

    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
        __global__ void k(const float *a, float * __restrict__ c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                for (int j = 0; j < 8; j++) { c[i] += a[j * n + i] * 2.0f; }
            }
        }
    """))
    diags = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diags)
    result = compile_with(program, get_target("sm_90"), ["normalize"], diags)
    kr = result.kernels[0]
    assert "c_acc" in kernel_source(kr.optimized.funcdef)
    res = run_case(kr.naive, kr.optimized, (32, 1), Case({"n": 45}, (45, 1)), 5, {})
    assert res.ok, res.error or res.mismatches
