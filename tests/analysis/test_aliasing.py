"""The alias proof from a program's launch sites, and the restrict pass that writes it into the kernel."""
import textwrap

import pytest

from gpgpu_opt.analysis.aliasing import alias_facts
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
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
    ("float *t = d_x; d_x = d_y; d_y = t;", None),   # a swap: still two buffers
    ("float *t = d_x; d_x = d_y; d_y = d_x; (void)t;", "is assigned"),
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
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, **kw)
    return result, diagnostics


def test_the_output_declares_restrict_and_const_and_keeps_the_users_text(tmp_path):
    result, _ = _compile(tmp_path, PROVED, vector_width=1)   # not widened: no pass transforms it
    assert "__global__ void axpy(const float *__restrict__ x, float *__restrict__ y, float a, int n)\n{" in result.output
    assert "        y[i] = a * x[i] + y[i];" in result.output  # the body as written
    decision = result.kernels[0].context.log.decisions[0]
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
    """`run`'s x and y are its parameters: whatever main allocates under the same names says nothing; what
    main passes at the call does (one buffer twice)."""
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
    assert not facts.restrict and "passes 'd_z of main' to both 'y' and 'x'" in facts.why_not, facts.why_not
    assert "(reached from line 21)" in facts.why_not


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


# The host code is read as a syntax tree after preprocessing, and every use of a buffer variable must be one
# the proof understands. Each spelling below can leave 'd_x' and 'd_y' naming one allocation (or could, as
# far as the proof can tell), so the launch `axpy(d_x, d_y)` proves nothing.
ALIAS_BEFORE_THE_LAUNCH = [
    # the three spellings that fooled the token scanner (confirmed miscompiles on a GPU)
    ("", "float *&ref = d_y; ref = d_x;", "has a reference bound to it"),
    ("#define SHARE_BUFFERS d_y = d_x\n", "SHARE_BUFFERS;", "is assigned"),
    ("void alias_to(float *&to, float *from) { to = from; }\n", "alias_to((d_y), (d_x));",
     "is passed to alias_to"),
    # invented ones
    ("", "std::swap(d_x, d_y);", "is passed to std::swap"),
    ("", "float **pp = &d_x; *pp = d_y;", "has its address taken"),
    ("", "auto &r = d_x; r = d_y;", "has a reference bound to it"),
    ("", "auto &&r = d_x; r = d_y;", "has a reference bound to it"),
    ("", "decltype(auto) r = (d_x); r = d_y;", "has a reference bound to it"),
    ("typedef float *&float_ref;\n", "float_ref r = d_x; r = d_y;", "has a reference bound to it"),
    ("", "float *&r(d_x); r = d_y;", "where the parser does not read it as a variable"),
    ("", "[&] { d_x = d_y; }();", "is assigned"),
    ("", "[&d_x] { d_x = nullptr; }(); d_x = d_y;", "is captured by name in a lambda"),
    ("", "n = n + 0, d_x = d_y;", "is assigned"),
    ("", "(0, d_x) = d_y;", "is assigned"),
    ("", "(n > 0 ? d_x : d_y) = d_y;", "is assigned"),
    ("", "(float *&)d_x = d_y;", "is assigned"),
    ("#define SHARE\n", "#ifdef SHARE\n    d_x = d_y;\n#endif", "is assigned"),
    ("", "#if 1\n    d_x += 0;\n#endif", "is assigned"),
    ("", "d_x++;", "is assigned"),
    ("struct Buffers { float **p; };\n", "Buffers b = { &d_x }; *b.p = d_y;", "has its address taken"),
    ("struct Buffers { float *p; };\n", "Buffers b = { d_x };", "in a way the proof does not know"),
    ("void init(float *&p, float *q) { p = q; }\n", "init(d_x, d_y);", "is passed to init"),
    ("", "memcpy(&d_x, &d_y, sizeof(float *));", "has its address taken"),
    ("", "cudaMemcpy(&d_x, &d_y, sizeof(float *), cudaMemcpyHostToHost);", "has its address taken"),
    ("", "*&d_x = d_y;", "has its address taken"),
    ("", "d_x[0] = 1.0f;", "has an element used"),
    ("", "asm volatile(\"\" : \"=r\"(d_x));", "in a way the proof does not know"),
    ("", "float *d_z = d_x; { float *d_x = d_y; (void)d_x; }", "is declared again"),
    ("cudaError_t cudaFree(float *&p) { p = 0; return cudaSuccess; }\n", "cudaFree(d_x);",
     "declares its own 'cudaFree'"),
    ("", "#ifndef __CUDA_ARCH__\n    d_x = d_y;\n#endif", "is assigned at line 17"),
    ("struct Sink {};\nfloat *d_y_copy;\nvoid operator<<(Sink, float *&p) { p = d_y_copy; }\n",
     "d_y_copy = d_y; Sink() << d_x;", "the file overloads operator<<"),
    ("struct Grab { Grab(float *&p) { p = 0; } };\nvoid use(Grab) {}\n", "use(d_x);", "a member function or constructor"),
    ("struct Grab { Grab(float *&p); };\n", "Grab g = d_x;", "a member function or constructor"),
]


@pytest.mark.parametrize("top, statement, why", ALIAS_BEFORE_THE_LAUNCH)
def test_every_spelling_that_may_change_a_buffer_defeats_the_proof(tmp_path, top, statement, why):
    host = top + PROVED.replace("    axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);",
                                f"    {statement}\n    axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and why in facts.why_not, facts.why_not
    assert "at line" in facts.why_not or "at " in facts.why_not


@pytest.mark.parametrize("args, why", [
    ("n > 0 ? d_x : d_y, d_y", "is not a device buffer variable"),
    ("d_x, (d_y, d_x)", "is not a device buffer variable"),
    ("(d_y), (float *)(d_y + 1)", "passes 'd_y' to both"),
    ("&d_y[0], d_y + 4", "passes 'd_y' to both"),
])
def test_a_launch_argument_must_name_one_buffer(tmp_path, args, why):
    host = PROVED.replace("(d_x, d_y, 2.0f, n);", f"({args}, 2.0f, n);", 1)
    facts = _facts(tmp_path, host)
    assert not facts.restrict and why in facts.why_not, facts.why_not


@pytest.mark.parametrize("top, where", [
    ("void helper(void) { cudaLaunchKernel((const void *)axpy, 1, 1, 0, 0, 0); }\n", "line 8"),
    ("template <void (*K)(float *, float *, float, int)> void go() {}\nvoid use() { go<axpy>(); }\n", "line 9"),
    ("#define GO(p) axpy<<<1, 256>>>(p, p, 2.0f, n)\n", "line 8"),
])
def test_a_kernel_named_outside_its_launches_blocks_the_proof(tmp_path, top, where):
    facts = _facts(tmp_path, top + PROVED)
    assert not facts.restrict and f"'axpy' is also named at {where}" in facts.why_not, facts.why_not


def test_an_allocation_through_a_helper_function_is_not_one_the_proof_sees(tmp_path):
    host = "void alloc(float **p, int n) { cudaMalloc((void **)p, n * sizeof(float)); }\n" + PROVED.replace(
        "cudaMalloc(&d_y, n * sizeof(float));", "alloc(&d_y, n);")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "'d_y' for 'y' has its address taken" in facts.why_not, facts.why_not


def test_a_copy_initialised_from_another_buffer_is_no_buffer_of_its_own(tmp_path):
    host = PROVED.replace("(d_x, d_y, 2.0f, n);", "(d_x, d_z, 2.0f, n);", 1).replace(
        "    cudaMemset(", "    float *d_z = d_x;\n    cudaMalloc(&d_z, 4);\n    cudaMemset(")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "'d_z' for 'y' is initialised with another pointer" in facts.why_not


@pytest.mark.parametrize("statement", [
    "if (d_x == NULL || !d_y) return 1;",
    "float *end = d_x + n; (void)end;",
    "printf(\"%p %p\\n\", (void *)d_x, d_y);",
    "cudaMemcpy(d_x, d_y, n * sizeof(float), cudaMemcpyDeviceToDevice);",
    "n = (int)sizeof(d_x) + (d_x != d_y);",
    "while (d_x == 0) { d_x = NULL; cudaMalloc(&d_x, 4); }",
    "for (int k = 0; d_x && k < 2; ++k) cudaFree(d_x); do { } while (d_y == NULL); do { } while (d_y);",
    "auto copy = d_y; (void)copy;",
    "[&] { cudaMemset(d_y, 0, 4); }();",
    "d_y = nullptr; cudaMalloc((void **)&d_y, n * sizeof(float));",
])
def test_uses_that_only_read_a_buffer_keep_the_proof(tmp_path, statement):
    host = PROVED.replace("    axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);",
                          f"    {statement}\n    axpy<<<(n + 255) / 256, 256>>>(d_x, d_y, 2.0f, n);")
    facts = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not


def test_a_macro_that_only_launches_is_read_after_expansion_and_lines_are_the_users(tmp_path):
    """A buffer's uses inside a macro's expansion are read like any other; lines name the user's file."""
    host = "#define CLEAR(p) cudaMemset(p, 0, n * sizeof(float))\n" + PROVED.replace(
        "    cudaMemset(d_y, 0, n * sizeof(float));", "    CLEAR(d_y);")
    facts = _facts(tmp_path, host)
    assert facts.restrict and facts.sites == [17, 18], facts
    reassigning = host.replace("CLEAR(d_y);", "CLEAR(d_y);\n    BREAK(d_y);")
    facts = _facts(tmp_path, "#define BREAK(p) p = d_x\n" + reassigning)
    assert not facts.restrict and "is assigned at line 18" in facts.why_not, facts.why_not


def test_a_class_whose_members_take_only_const_references_keeps_the_proof(tmp_path):
    top = "struct Keep { Keep(const Keep &other); Keep(float *p); int size(const Keep &o) const; };\n"
    facts = _facts(tmp_path, top + PROVED.replace("    cudaFree(d_x);", "    cudaMemset(d_x, 0, 4);\n    cudaFree(d_x);"))
    assert facts.restrict, facts.why_not


def test_host_code_a_header_hides_from_the_device_view_defeats_the_proof(tmp_path):
    """The header shares the buffers only where the host compiler reads it (no __CUDA_ARCH__): the proof
    reads the host's view, not the device's (where SHARE is empty)."""
    (tmp_path / "share.h").write_text("#ifndef __CUDA_ARCH__\n#define SHARE d_y = d_x\n#else\n#define SHARE\n"
                                      "#endif\n")
    host = '#include "share.h"\n' + PROVED.replace("    cudaFree(d_x);", "    SHARE;\n    cudaFree(d_x);")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "'d_y' for 'y' is assigned at line 19" in facts.why_not, facts.why_not


@pytest.mark.parametrize("change", [
    # the launch's d_y is the global one, which another function may set to anything
    ("    float *d_x = NULL, *d_y = NULL;", "    float *d_x = NULL;\n    { float *d_y; cudaMalloc(&d_y, 4); }"),
    ("    float *d_x = NULL, *d_y = NULL;", "    float *d_x = NULL;\n    cudaMalloc(&d_y, 4);\n    float *d_y;"),
])
def test_a_name_outside_the_scope_of_the_buffers_declaration_is_another_variable(tmp_path, change):
    host = "float *d_y;\nvoid share(float *p) { d_y = p; }\n" + PROVED.replace(*change).replace(
        "    cudaMalloc(&d_y, n * sizeof(float));\n", "")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "names another variable at line" in facts.why_not, facts.why_not


def test_an_extern_declaration_in_the_launching_function_names_a_global(tmp_path):
    host = "float *d_y;\nvoid share(float *p) { d_y = p; }\n" + PROVED.replace(
        "    float *d_x = NULL, *d_y = NULL;", "    float *d_x = NULL;\n    extern float *d_y;")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "is declared extern at line" in facts.why_not, facts.why_not
