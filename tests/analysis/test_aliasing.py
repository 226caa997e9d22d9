"""The alias proof from a program's launch sites, and the restrict pass that writes it into the kernel."""
import textwrap

import pytest

from gpgpu_opt.analysis.aliasing import alias_facts
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_program
from gpgpu_opt.targets import get_target

KERNEL = """
__global__ void axpy(float *x, float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
"""


def _program(tmp_path, host: str, kernel: str = KERNEL):
    path = tmp_path / "p.cu"
    path.write_text(kernel + textwrap.dedent(host))
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def _facts(tmp_path, host, **kw):
    program = _program(tmp_path, host)
    return alias_facts(program.kernels[0], program, **kw)


PROVED = """
int main(void)
{
    int n = 1 << 20;
    float *d_x = NULL, *d_y = NULL;
    cudaMalloc((void **)&d_x, n * sizeof(float));
    cudaMalloc(&d_y, n * sizeof(float));
    cudaMemset(d_y, 0, n * sizeof(float));
    axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);
    axpy<<<(n + 255) / 256, 256>>>((float *)d_y + 0, d_x, 2.0f, n);
    cudaFree(d_x);
    return 0;
}
"""


def test_distinct_cudamalloc_buffers_at_every_launch_prove_it(tmp_path):
    facts = _facts(tmp_path, PROVED)
    assert facts.restrict and facts.how == "launch sites" and len(facts.sites) == 2
    assert facts.written == {"y"}


@pytest.mark.parametrize("change, why", [
    ("axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);", None),
    ("axpy<<<1, 256>>>(d_y, d_y, 2.0f, n);", "passes 'd_y' to both"),
    ("float *t = d_x; d_x = d_y; d_y = t;", "is assigned"),
    ("std_swap(d_x, d_y);", "is passed to std_swap"),
    ("float **p = &d_x;", "has its address taken"),
    ("axpy<<<1, 256>>>(d_x, h_y, 2.0f, n);", "is not allocated with cudaMalloc"),
    ("axpy<<<1, 256>>>(d_x, d_y + d_x[0], 2.0f, n);", None),
    ("axpy<<<1, 256>>>(d_x, d_y[0] ? d_x : d_y, 2.0f, n);", "is not a device buffer variable"),
    ("axpy<<<1, 256>>>(d_x, pick(d_y), 2.0f, n);", "is passed to pick"),
])
def test_what_breaks_the_proof_is_named(tmp_path, change, why):
    host = PROVED.replace("    cudaFree(d_x);", f"    {change}\n    cudaFree(d_x);")
    facts = _facts(tmp_path, host)
    if why is None:
        assert facts.restrict
    else:
        assert not facts.restrict and why in facts.why_not
        assert "__restrict__" in facts.why_not or "both" in facts.why_not


def test_without_a_launch_in_the_file_the_note_says_what_would_prove_it(tmp_path):
    facts = _facts(tmp_path, "")
    assert not facts.restrict
    assert "no launch of 'axpy'" in facts.why_not and "--restrict" in facts.why_not
    assert _facts(tmp_path, "", assume_restrict=True).how == "--restrict"


def test_read_only_pointers_may_share_a_buffer(tmp_path):
    kernel = KERNEL.replace("float *x, float *y", "float *x, float *z, float *y").replace("a * x[i]", "z[i] * x[i]")
    host = PROVED.replace("(d_x, d_y, 2.0f, n)", "(d_x, d_x, d_y, 2.0f, n)").replace(
        "((float *)d_y + 0, d_x, 2.0f, n)", "(d_x, d_x, d_y, 2.0f, n)")
    program = _program(tmp_path, host, kernel)
    assert alias_facts(program.kernels[0], program).restrict


def _compile(tmp_path, host, kernel=KERNEL, **kw):
    program = _program(tmp_path, host, kernel)
    diagnostics = Diagnostics(quiet=True)
    result = compile_program(program, get_target("sm_90"), parse_pass_list(None), diagnostics, **kw)
    return result, diagnostics


def test_the_output_declares_restrict_and_const_and_keeps_the_users_text(tmp_path):
    result, _ = _compile(tmp_path, PROVED, vector_width=1)   # not widened: no pass transforms it
    assert "__global__ void axpy(const float *__restrict__ x, float *__restrict__ y, float a, int n)\n{" in result.output
    assert "        y[i] = a * x[i] + y[i];" in result.output  # the body as written
    decision = result.kernels[0].context.decisions[0]
    assert decision.action == "applied" and "launches at line" in decision.reason


def test_const_is_not_added_where_cxx_would_reject_it(tmp_path):
    kernel = """
__device__ float first(float *p) { return p[0]; }
__global__ void axpy(float *x, float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * first(x) + y[i];
}
"""
    result, _ = _compile(tmp_path, PROVED, kernel)
    assert "float *__restrict__ x" in result.output and "const float *__restrict__ x" not in result.output


def test_unknown_aliasing_leaves_the_signature_and_says_so(tmp_path):
    result, diagnostics = _compile(tmp_path, "")
    assert "__global__ void axpy(float *x, float *y, float a, int n)" in result.output
    assert any("may alias" in str(n) and "--restrict" in str(n) for n in diagnostics.notes)
    forced, _ = _compile(tmp_path, "", assume_restrict=True)
    assert "const float *__restrict__ x" in forced.output


def test_a_launch_through_a_helper_function_is_not_proved_by_the_callers_allocations(tmp_path):
    """`run`'s x and y are its parameters: whatever main allocates under the same names says nothing."""
    host = """
void run(float *d_x, float *d_y, int n)
{
    axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);
}

int main(void)
{
    int n = 1024;
    float *d_x, *d_y, *d_z;
    cudaMalloc((void **)&d_x, n * sizeof(float));
    cudaMalloc((void **)&d_y, n * sizeof(float));
    cudaMalloc((void **)&d_z, n * sizeof(float));
    run(d_z, d_z, n);
    return 0;
}
"""
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "parameter of the function that launches" in facts.why_not


def test_elements_of_an_array_of_pointers_are_not_buffers_of_their_own(tmp_path):
    host = """
int main(void)
{
    int n = 1024;
    float *bufs[2], *d_y;
    for (int b = 0; b < 2; b++)
        cudaMalloc((void **)&bufs[b], n * sizeof(float));
    cudaMalloc((void **)&d_y, n * sizeof(float));
    bufs[0] = d_y;
    axpy<<<(n + 255) / 256, 256>>>(bufs[0], d_y, 2.0f, n);
    return 0;
}
"""
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "'bufs[0]' for 'x' is not a device buffer variable" in facts.why_not


def test_an_allocation_in_another_function_does_not_count(tmp_path):
    host = PROVED.replace("int main(void)\n{", "void setup(float **p) { cudaMalloc((void **)&d_x, 4); }\n\n"
                          "int main(void)\n{").replace("    cudaMalloc((void **)&d_x, n * sizeof(float));\n", "")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "not allocated with cudaMalloc in the function that launches" in facts.why_not


def test_a_parameter_list_over_several_lines_keeps_its_layout(tmp_path):
    kernel = KERNEL.replace("float *x, float *y, float a, int n", "float *x,   /* input */\n                     float* y,\n                     float a, int n")
    result, _ = _compile(tmp_path, PROVED, kernel, vector_width=1)   # not widened: kept as written
    assert ("axpy(const float *__restrict__ x,   /* input */\n                     float*__restrict__ y,\n"
            "                     float a, int n)") in result.output


@pytest.mark.parametrize("hidden", [
    "#define LAUNCH(p, q) axpy<<<1, 256>>>(p, q, 2.0f, n)\n",
    "void (*kernel_ptr)(float *, float *, float, int) = axpy;\n",
])
def test_a_launch_the_scanner_cannot_read_blocks_the_proof(tmp_path, hidden):
    facts = _facts(tmp_path, hidden + PROVED)
    assert not facts.restrict and "also named at line" in facts.why_not


def test_a_forward_declaration_of_the_kernel_is_no_hidden_launch(tmp_path):
    facts = _facts(tmp_path, "__global__ void axpy(float *x, float *y, float a, int n);\n" + PROVED)
    assert facts.restrict
