"""The alias proof for device buffers held in file-scope pointer variables (file_scope_buffers.py): allocated
in one function, passed to a launch in another, as classic benchmark programs keep them."""
import textwrap

import pytest

from gpgpu_opt.analysis.aliasing import alias_facts, read_launches
from gpgpu_opt.analysis.alignment import base_alignment
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

KERNEL = """
__global__ void invert(float *input, float *output, int npoints, int nfeatures)
{
    int point_id = threadIdx.x + blockDim.x * blockIdx.x;
    if (point_id < npoints)
        for (int i = 0; i < nfeatures; i++)
            output[point_id + npoints * i] = input[point_id * nfeatures + i];
}
"""

# The buffers live at file scope; one function allocates them, others launch with them and free them.
GLOBALS = """
float *feature_d;                   /* inverted */
float *feature_flipped_d = NULL;    /* as read */
int npoints_d;

void allocate(float *features, int npoints, int nfeatures)
{
    cudaMalloc((void **)&feature_flipped_d, npoints * nfeatures * sizeof(float));
    cudaMemcpy(feature_flipped_d, features, npoints * nfeatures * sizeof(float), cudaMemcpyHostToDevice);
    cudaMalloc((void **)&feature_d, npoints * nfeatures * sizeof(float));
}

void run(int npoints, int nfeatures)
{
    invert<<<(npoints + 255) / 256, 256>>>(feature_flipped_d, feature_d, npoints, nfeatures);
}

void release(void)
{
    cudaFree(feature_d);
    feature_d = NULL;
    cudaFree(feature_flipped_d);
}

int main(void)
{
    static float features[1024 * 8];
    allocate(features, 1024, 8);
    run(1024, 8);
    release();
    return 0;
}
"""


def _program(tmp_path, host: str, kernel: str = KERNEL, name: str = "p.cu"):
    path = tmp_path / name
    path.write_text(kernel + textwrap.dedent(host))
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def _facts(tmp_path, host, kernel=KERNEL):
    program = _program(tmp_path, host, kernel)
    return alias_facts(program.kernels[0], program)


def _with(change: str, after: str = "    cudaFree(feature_flipped_d);\n") -> str:
    """GLOBALS with `change` added to release(), after its last free."""
    assert after in GLOBALS
    return GLOBALS.replace(after, after + change + "\n")


def test_globals_allocated_in_one_function_and_launched_in_another_prove_it(tmp_path):
    facts = _facts(tmp_path, GLOBALS)
    assert facts.restrict and facts.how == "launch sites" and facts.sites == [23], facts.why_not


def test_a_global_buffer_is_aligned_as_its_allocation(tmp_path):
    offset = GLOBALS.replace("(feature_flipped_d, feature_d,", "(feature_flipped_d, feature_d + 64,")
    program = _program(tmp_path, offset)
    site = read_launches(program.kernels[0], program).sites[0]
    assert site.owners == {"input": "feature_flipped_d", "output": "feature_d"}
    assert base_alignment(program.kernels[0], program) == {"input": 256, "output": 256}


def test_the_restrict_pass_writes_the_proof_into_the_kernel(tmp_path):
    program = _program(tmp_path, GLOBALS)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True))
    assert "invert(const float *__restrict__ input, float *__restrict__ output" in result.output


@pytest.mark.parametrize("launch, why", [
    ("(feature_d, feature_d, npoints, nfeatures)", "passes 'feature_d' to both 'output' and 'input'"),
    ("(feature_d + npoints, (float *)feature_d, npoints, nfeatures)", "passes 'feature_d' to both"),
])
def test_one_global_passed_to_two_parameters_is_one_buffer(tmp_path, launch, why):
    facts = _facts(tmp_path, GLOBALS.replace("(feature_flipped_d, feature_d, npoints, nfeatures)", launch))
    assert not facts.restrict and why in facts.why_not, facts.why_not


def test_a_global_passed_through_a_helper_and_directly_is_one_buffer(tmp_path):
    host = GLOBALS.replace("void run(int npoints, int nfeatures)\n{\n    invert<<<(npoints + 255) / 256, 256>>>("
                           "feature_flipped_d, feature_d, npoints, nfeatures);",
                           "void launch(float *in, int npoints, int nfeatures)\n{\n"
                           "    invert<<<(npoints + 255) / 256, 256>>>(in, feature_d, npoints, nfeatures);\n}\n\n"
                           "void run(int npoints, int nfeatures)\n{\n    launch(feature_d, npoints, nfeatures);")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "passes 'feature_d' to both" in facts.why_not, facts.why_not
    distinct = _facts(tmp_path, host.replace("launch(feature_d, npoints", "launch(feature_flipped_d, npoints"))
    assert distinct.restrict, distinct.why_not


def test_a_global_and_a_local_buffer_of_the_launching_function_are_distinct(tmp_path):
    host = GLOBALS.replace(
        "    invert<<<(npoints + 255) / 256, 256>>>(feature_flipped_d, feature_d, npoints, nfeatures);",
        "    float *scratch_d;\n    cudaMalloc((void **)&scratch_d, npoints * nfeatures * sizeof(float));\n"
        "    invert<<<(npoints + 255) / 256, 256>>>(feature_flipped_d, scratch_d, npoints, nfeatures);\n"
        "    cudaFree(scratch_d);")
    facts = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not


def test_a_global_reallocated_in_a_loop_is_still_its_own_buffer(tmp_path):
    host = GLOBALS.replace("    run(1024, 8);", "    for (int r = 0; r < 3; r++) {\n        cudaFree(feature_d);\n"
                           "        cudaMalloc((void **)&feature_d, 1024 * 8 * sizeof(float));\n"
                           "        run(1024, 8);\n    }")
    facts = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not


@pytest.mark.parametrize("change, why", [
    ("    feature_d = feature_flipped_d;", "'feature_d' for 'output' is assigned at line"),
    ("    feature_d = features_h;", "is assigned at line"),
    ("    void **p = (void **)&feature_d;\n    cudaMalloc(p, 64);", "has its address taken at line"),
    ("    float **p = &feature_flipped_d;\n    *p = feature_d;",
     "'feature_flipped_d' for 'input' has its address taken"),
    ("    float *&r = feature_d;\n    r = feature_flipped_d;", "has a reference bound to it"),
    ("    std_swap(feature_d, feature_flipped_d);", "is passed to std_swap"),
    ("    { float *t = feature_d; feature_d = feature_flipped_d; feature_flipped_d = t; }",
     "(a file-scope buffer may only be allocated, read or set to NULL)"),
    ("    feature_d++;", "is assigned at line"),
    ("    feature_d[0] = 1.0f;", "has an element used at line"),
])
def test_a_use_that_may_change_a_global_defeats_it(tmp_path, change, why):
    host = "float *features_h;\nvoid std_swap(float *&a, float *&b);\n" + _with(change)
    facts = _facts(tmp_path, host)
    assert not facts.restrict and why in facts.why_not, facts.why_not


@pytest.mark.parametrize("change", [
    "    printf(\"%p\\n\", (void *)feature_d);",
    "    if (feature_d != NULL && feature_d == feature_flipped_d) return;",
    "    float *view = feature_d + 8;\n    cudaMemset(view, 0, 4);",
    "    cudaBindTexture(NULL, &t_features, feature_d, &desc, 64);",
    "    cudaMemcpy(features_h, feature_d + 1, 4, cudaMemcpyDeviceToHost);",
])
def test_a_use_that_only_reads_a_global_keeps_the_proof(tmp_path, change):
    host = "float *features_h;\ntexture<float, 1, cudaReadModeElementType> t_features;\n" \
           "cudaChannelFormatDesc desc;\n" + _with(change)
    facts = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not


@pytest.mark.parametrize("declaration, why", [
    ("extern float *feature_d;\nfloat *feature_d;", "is declared 2 times at file scope"),
    # a header without a guard, included twice (C's tentative definitions; C++ rejects it)
    ("static float *feature_d;\nstatic float *feature_d;", "is declared 2 times at file scope"),
    ("thread_local float *feature_d;", "is declared with 'thread_local'"),
    ("[[maybe_unused]] float *feature_d;", "is declared with '[[maybe_unused]]'"),
    ("__device__ float *feature_d;", "is declared with '__device__'"),
    ("__managed__ float *feature_d;", "is declared with '__managed__'"),
    ("float *feature_d[1];", "is not declared a plain pointer"),
    ("float *feature_d = features_h;", "is initialised with another pointer"),
    ("namespace data { float *feature_d; }\nusing data::feature_d;",
     "'feature_d' for 'output' is not allocated with cudaMalloc in the function that launches the kernel"),
])
def test_a_global_not_declared_a_plain_pointer_is_refused(tmp_path, declaration, why):
    host = "float *features_h;\n" + GLOBALS.replace("float *feature_d;                   /* inverted */", declaration)
    facts = _facts(tmp_path, host)
    assert not facts.restrict and why in facts.why_not, facts.why_not


def test_an_extern_global_is_refused(tmp_path):
    host = GLOBALS.replace("float *feature_d;   ", "extern float *feature_d;")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "is declared extern at line" in facts.why_not, facts.why_not


def test_a_global_never_allocated_is_refused(tmp_path):
    host = GLOBALS.replace("    cudaMalloc((void **)&feature_d, npoints * nfeatures * sizeof(float));\n", "")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "never allocated with cudaMalloc" in facts.why_not, facts.why_not


SHADOWS = """
__global__ void fill(float *feature_d, int n) { feature_d[threadIdx.x] = 0.0f; }
void prototype(float *feature_d, int n);
void helper(float *feature_d) { feature_d = NULL; cudaFree(feature_d); }
void local(void) { float *feature_d; cudaMalloc(&feature_d, 4); feature_d = feature_flipped_d; }
void inner(void) { for (float *feature_d = NULL; feature_d;) { feature_d = feature_flipped_d; } }
void lambda(void) { auto f = [](float *feature_d) { feature_d = NULL; }; f(NULL); }
void typed(void) { float4 *feature_d = NULL; unsigned *feature_flipped_d; (void)feature_d; (void)feature_flipped_d; }
"""


def test_locals_and_parameters_of_the_same_name_in_other_functions_are_other_variables(tmp_path):
    """Each function below declares its own feature_d and only uses it: what it does to it is no use of the
    file-scope buffer (the kernel's parameter named like it, as hybridsort's d_prefixoffsets)."""
    host = GLOBALS.replace("void release(void)", SHADOWS + "\nvoid release(void)")
    facts = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not


@pytest.mark.parametrize("function", [
    # the global used before its local namesake is declared, or outside the block that declares it
    "void both(void) { cudaFree(feature_d); float *feature_d = NULL; (void)feature_d; }",
    "void both(void) { { float *feature_d = NULL; (void)feature_d; } cudaFree(feature_d); }",
    "void both(void) { auto f = [](float *feature_d) { return feature_d; }; f(feature_d); }",
    "void both(float *p) { float *feature_d[(feature_d = p, 1)]; (void)feature_d; }",   # the bound's is the global
])
def test_a_function_that_uses_the_global_and_declares_its_namesake_defeats_it(tmp_path, function):
    host = GLOBALS.replace("void release(void)", function + "\n\nvoid release(void)")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and "in a function that also declares a variable of that name" in facts.why_not, \
        facts.why_not


@pytest.mark.parametrize("top, why", [
    # a block-scope extern names the global itself: its assignment changes the global
    ("void other(float *p) { extern float *feature_d; feature_d = p; }", "is declared again at line"),
    ("struct Holder { float *feature_d; void reset() { feature_d = NULL; } };", "is named at line 26 where"),
    ("struct Base {};\nstruct Holder : Base { void reset() { cudaFree(feature_d); } };", "inside a class"),
    ("namespace io { void reset(float *p) { feature_d = p; } }", "inside a namespace"),
    ("template <int feature_d> int scaled(int n) { return feature_d * n; }", "is declared again at line"),
    # the default argument is the file-scope variable, not the parameter declared after it
    ("void other(float *&p = feature_d, float *feature_d = NULL);\n"
     "void other(float *&p, float *feature_d) { p = feature_d; }", "in a way the proof does not know"),
    # read as a declaration of a local feature_d, but with a variable `scale` it multiplies the global
    ("int scale;\nvoid other(float *p) { scale * feature_d; feature_d = p; }", "is declared again at line"),
    ("int scale;\nvoid other(float *p) { scale & feature_d; feature_d = p; }", "is declared again at line"),
    # read as a prototype whose parameter has type feature_d: with a function reset, a call that may change it
    ("void reset(float *&p);\nvoid other(void) { float *x(reset(feature_d)); (void)x; }",
     "where the parser does not read it as a variable"),
])
def test_a_name_the_proof_cannot_resolve_exactly_defeats_it(tmp_path, top, why):
    host = GLOBALS.replace("void release(void)", top + "\n\nvoid release(void)")
    facts = _facts(tmp_path, host)
    assert not facts.restrict and why in facts.why_not, facts.why_not


def test_globals_in_a_header_included_by_main_prove_it(tmp_path):
    """kmeans' style: the kernel and the buffers in their own files, the launch in main.cu."""
    (tmp_path / "kernel.h").write_text(KERNEL)
    (tmp_path / "buffers.h").write_text("#ifndef BUFFERS_H\n#define BUFFERS_H\nfloat *in_d;\nstatic float *out_d;\n"
                                        "static void allocate(int n)\n{\n    cudaMalloc((void **)&in_d, n * 4);\n"
                                        "    cudaMalloc((void **)&out_d, n * 4);\n}\n#endif\n")
    main = """#include "kernel.h"
#include "buffers.h"
#include "buffers.h"

int main(void)
{
    allocate(1024);
    invert<<<4, 256>>>(in_d, out_d, 1024, 1);
    cudaFree(in_d);
    return 0;
}
"""
    (tmp_path / "main.cu").write_text(main)
    program = load_program(str(tmp_path / "main.cu"), diagnostics=Diagnostics(quiet=True))
    facts = alias_facts(program.kernels[0], program)
    assert facts.restrict and facts.sites == [8], facts.why_not
    (tmp_path / "main.cu").write_text(main.replace("(in_d, out_d,", "(in_d, in_d,"))
    program = load_program(str(tmp_path / "main.cu"), diagnostics=Diagnostics(quiet=True))
    facts = alias_facts(program.kernels[0], program)
    assert not facts.restrict and "passes 'in_d' to both" in facts.why_not, facts.why_not


def test_a_global_assigned_in_a_header_names_the_header_line(tmp_path):
    (tmp_path / "share.h").write_text("static void share(void) { out_d = in_d; }\n")
    main = KERNEL + """float *in_d, *out_d;
#include "share.h"

int main(void)
{
    cudaMalloc((void **)&in_d, 4096);
    cudaMalloc((void **)&out_d, 4096);
    share();
    invert<<<4, 256>>>(in_d, out_d, 1024, 1);
    return 0;
}
"""
    (tmp_path / "main.cu").write_text(main)
    program = load_program(str(tmp_path / "main.cu"), diagnostics=Diagnostics(quiet=True))
    facts = alias_facts(program.kernels[0], program)
    assert not facts.restrict and "'out_d' for 'output' is assigned at line 1 of" in facts.why_not, facts.why_not
    assert "share.h" in facts.why_not
