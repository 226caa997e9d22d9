"""Template kernels optimized per instantiation and written back as explicit specializations
(gpgpu_opt/frontend/templates.py)."""
import shutil
import subprocess
import textwrap

import pytest
from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.frontend.scanner import find_launch_sites
from gpgpu_opt.kernel import TemplateInstance
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def write(tmp_path, text, name="k.cu"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def load(tmp_path, text):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(write(tmp_path, text), diagnostics=diagnostics)
    return program, [n.message for n in diagnostics.notes]


def compiled(tmp_path, text, passes=None, assume_restrict=False):
    program, _ = load(tmp_path, text)
    return compile_with(program, get_target("sm_90"), parse_pass_list(passes), Diagnostics(quiet=True),
                           validate=True, assume_restrict=assume_restrict)


def builds(tmp_path, output: str) -> None:
    out = tmp_path / "out.cu"
    out.write_text(output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(out), "-o", str(tmp_path / "out.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_launch_sites_with_template_arguments_and_namespaces():
    text = "void f() { k<float, 2 * 128><<<g, b>>>(a, n); ns::m<<<1, 2>>>(x); d<<<g, b>>>(p); e<><<<1, 1>>>(); }"
    sites = {s.kernel: s for s in find_launch_sites(text)}
    assert sites["k"].template_args == ["float", "2 * 128"] and sites["k"].args == ["a", "n"]
    assert text[sites["k"].config_start:sites["k"].config_end] == "<<<g, b>>>"
    assert sites["m"].template_args is None and sites["m"].config == ["1", "2"]
    assert sites["d"].template_args is None and sites["e"].template_args == []


MATVEC = """\
#include <cstdio>
#define ROWS 1024
#define COLS 512
#define REAL float

template <typename T, int SCALE>
__global__ void matvec(const T *A, const T *x, T *y, int rows, int cols)
{
    const auto r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        T sum = static_cast<T>(0);
        for (int c = 0; c < cols; c++)
            sum += A[r * cols + c] * x[c] * SCALE;
        y[r] = sum;
    }
}

template __global__ void matvec<double, 2>(const double *, const double *, double *, int, int);

int main()
{
    REAL *A, *x, *y;
    int rows = ROWS, cols = COLS;
    cudaMalloc(&A, ROWS * COLS * sizeof(REAL));
    cudaMalloc(&x, COLS * sizeof(REAL));
    cudaMalloc(&y, ROWS * sizeof(REAL));
    matvec<REAL, 4 * 2><<<(rows + 255) / 256, 256>>>(A, x, y, rows, cols);
    matvec<float, 8><<<(rows + 255) / 256, 256>>>(A, x, y, rows, cols);
    return 0;
}
"""


def test_each_instantiation_is_a_kernel_with_its_arguments_substituted(tmp_path):
    program, notes = load(tmp_path, MATVEC)
    assert [k.name for k in program.kernels] == ["matvec__float_8", "matvec__double_2"]
    float8, double2 = program.kernels
    assert float8.instance == TemplateInstance("matvec", ("float", "8"), "matvec__float_8")
    assert float8.instance.spelled == "matvec<float, 8>"
    assert [p.base_type for p in float8.params] == ["float", "float", "float", "int", "int"]
    assert [p.base_type for p in double2.params] == ["double", "double", "double", "int", "int"]
    constants = [n.value for n in walk(float8.body) if isinstance(n, c_ast.Constant)]
    assert "8" in constants and "2" in [n.value for n in walk(double2.body) if isinstance(n, c_ast.Constant)]
    # both launch sites name the same instantiation (a macro, a constant expression): they launch it
    assert [s.kernel for s in program.launch_sites] == ["matvec__float_8", "matvec__float_8"]
    assert not notes


@requires_nvcc
def test_an_optimized_instantiation_is_written_as_a_specialization_after_its_template(tmp_path):
    result = compiled(tmp_path, MATVEC)
    by_name = {r.naive.name: r for r in result.kernels}
    assert by_name["matvec__float_8"].rewritten and by_name["matvec__float_8"].validation.status == "passed"
    out = result.output
    template_end = out.index("template __global__ void matvec<double, 2>")
    specialization = out.index("template <> __global__ void matvec<float, 8>(const float *")
    primary = out.index("template <typename T, int SCALE>")
    assert primary < specialization < template_end
    assert out.count("static_cast<T>(0)") == 1  # the primary template as written
    assert "matvec<REAL, 4 * 2><<<matvec__float_8_grid((rows + 255) / 256, 256), " \
           "matvec__float_8_block((rows + 255) / 256, 256)>>>" in out
    assert "matvec<float, 8><<<matvec__float_8_grid(" in out
    builds(tmp_path, out)


@requires_nvcc
def test_a_specialization_keeps_the_primary_templates_parameter_types(tmp_path):
    """The restrict pass makes a read-only pointee const and pointers __restrict__; a specialization must match
    the primary template's signature (nvcc's host stubs even its top-level qualifiers): it keeps the primary's."""
    source = MATVEC.replace("const T *A, const T *x, T *y", "T *A, T *x, T *__restrict__ y") \
        .replace("(const double *, const double *, double *", "(double *, double *, double *")
    result = compiled(tmp_path, source, passes="restrict,normalize,merge", assume_restrict=True)
    out = result.output
    (float8,) = [r for r in result.kernels if r.naive.name == "matvec__float_8"]
    assert float8.optimized.params[0].is_const  # read only: the pass made it const
    assert "template <> __global__ void matvec<float, 8>(float *A, float *x, float *__restrict__ y, int rows, " \
           "int cols)" in out
    builds(tmp_path, out)


def pass_through(tmp_path, text):
    program, notes = load(tmp_path, text)
    assert program.kernels == []
    return notes


KERNEL = """\
template <typename T>
__global__ void fill(T *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = T(1);
}
"""


@pytest.mark.parametrize("host, note", [
    ("", "'fill' is a template that no launch or explicit instantiation of this file instantiates; "
         "passed through unchanged"),
    ("void h(float *a) { fill<<<1, 32>>>(a, 32); }",
     "'fill' is a template launched at line 7 without template arguments (deduced); passed through unchanged"),
    ("void h(float *a) { fill<float><<<1, 32>>>(a, 32); void (*f)(float *, int) = fill<float>; }",
     "'fill' is a template named at line 7 other than in a launch, a declaration or an explicit "
     "instantiation; passed through unchanged"),
    ("template <> __global__ void fill<float>(float *a, int n);\nvoid h(float *a) { fill<float><<<1, 1>>>(a, 1); }",
     "'fill' is a template named at line 7 other than in a launch, a declaration or an explicit "
     "instantiation; passed through unchanged"),
    ("struct P { float x; };\nvoid h(P *a) { fill<P><<<1, 32>>>(a, 32); }",
     "'fill<P>' (line 8): the type argument 'P' is not a scalar or vector type; passed through"),
    ("void h(float *a, int m) { fill<float, 2><<<1, 32>>>(a, m); }",
     "'fill<float, 2>' (line 7): 2 template arguments for 1 parameters; passed through"),
])
def test_a_template_passes_through_where_its_instantiations_are_not_known(tmp_path, host, note):
    assert pass_through(tmp_path, KERNEL + host) == [note]


def test_a_use_before_the_definition_passes_through(tmp_path):
    text = "template <typename T> __global__ void fill(T *a, int n);\n" \
           "void h(float *a) { fill<float><<<1, 32>>>(a, 32); }\n" + KERNEL
    assert pass_through(tmp_path, text) == [
        "'fill<float>' is used at line 2, before the template's definition, where no specialization can "
        "follow it; passed through"]


def test_an_instantiation_with_cxx_left_passes_through_alone(tmp_path):
    text = """\
    template <typename T, int N>
    __global__ void scale(T *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = a[i] * N;
    }
    template <typename T>
    __global__ void other(T *a) { T &r = a[0]; r = 1; }
    template __global__ void scale<float, -3>(float *, int);
    template __global__ void other<int>(int *);
    """
    program, notes = load(tmp_path, text)
    assert [k.name for k in program.kernels] == ["scale__float_m3"]
    (cast,) = [n for n in walk(program.kernels[0].body) if isinstance(n, c_ast.Cast)]
    assert cast.to_type.type.type.names == ["int"] and isinstance(cast.expr, c_ast.UnaryOp)  # ((int)-3)
    assert notes == ["'other<int>' uses C++ (reference, line 8); passed through unchanged"]
    assert program.passed_through == ["other"]


def test_a_template_device_function_passes_through(tmp_path):
    text = "template <typename T> __device__ T twice(T x) { return 2 * x; }\n" \
           "__global__ void k(float *a) { a[threadIdx.x] = 1.0f; }\n"
    program, notes = load(tmp_path, text)
    assert [k.name for k in program.kernels] == ["k"]
    assert notes == ["'twice' is a template __device__ function; passed through unchanged"]


SPECIALIZED = MATVEC.replace("template __global__ void matvec<double, 2>", """\
template <> __global__ void matvec<float, 8>(const float *A, const float *x, float *y, int rows, int cols)
{
    unsigned int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int c = 0; c < cols; c++)
            sum += A[r * cols + c] * x[c] * 8 + 1.0f;
        y[r] = sum;
    }
}

template __global__ void matvec<double, 2>""")


def test_the_users_specialization_is_that_instantiation(tmp_path):
    program, notes = load(tmp_path, SPECIALIZED)
    assert not notes
    float8 = program.kernel("matvec__float_8")
    assert float8.instance.written and float8.source_line == 18 and float8.funcdef.decl.coord.line == 18
    assert any(isinstance(n, c_ast.Constant) and n.value == "1.0f" for n in walk(float8.body))  # its own body


@requires_nvcc
def test_an_optimized_user_specialization_is_replaced_where_it_is(tmp_path):
    result = compiled(tmp_path, SPECIALIZED)
    out = result.output
    assert out.count("template <> __global__ void matvec<float, 8>(") == 1
    assert out.index("template <typename T, int SCALE>") < out.index("template <> __global__ void matvec<float, 8>(") \
        < out.index("template __global__ void matvec<double, 2>")
    special = out[out.index("template <> __global__ void matvec<float, 8>("):]
    assert "__shfl_down_sync" in special[:special.index("\n}\n")]  # printed as optimized
    builds(tmp_path, out)


def test_the_optimized_output_is_read_back_as_its_specializations(tmp_path):
    """An output file names its optimized instantiations as specializations: loading it again finds them
    (what `verify --against` compares), the primary template's text not substituted for them."""
    result = compiled(tmp_path, MATVEC)
    again, notes = load(tmp_path, result.output)
    float8 = again.kernel("matvec__float_8")
    assert float8.instance.written and not notes
    assert any(isinstance(n, c_ast.FuncCall) and n.name.name == "__shfl_down_sync" for n in walk(float8.body))


def test_arguments_that_are_not_known_are_noted_once(tmp_path):
    """Launches inside a host template name the kernel's arguments by the host template's parameters."""
    text = KERNEL + "template <typename V> void h(V *a) { fill<V><<<1, 32>>>(a, 32); fill<V><<<2, 32>>>(a, 64); }\n"
    assert pass_through(tmp_path, text) == [
        "'fill<V>' (line 7): the type argument 'V' is not a scalar or vector type; passed through"]


def test_a_value_argument_keeps_its_parameters_type(tmp_path):
    """`i - N` with `unsigned int N` is unsigned arithmetic: N becomes `((unsigned int)4)`, not `(4)`."""
    text = """\
    template <unsigned int N>
    __global__ void shift(float *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i - N < n) a[i] = 1.0f;
    }
    template __global__ void shift<4>(float *, int);
    """
    program, _ = load(tmp_path, text)
    (cast,) = [n for n in walk(program.kernels[0].body) if isinstance(n, c_ast.Cast)]
    assert cast.to_type.type.type.names == ["unsigned", "int"] and cast.expr.value == "4"


def test_a_value_parameter_that_is_not_an_integer_passes_through(tmp_path):
    text = "template <float F> __global__ void f(float *a) { a[0] = F; }\n" \
           "template __global__ void f<2>(float *);\n"
    assert pass_through(tmp_path, text) == [
        "'f' is a template with the parameter 'float F'; passed through unchanged"]


def test_a_functional_cast_to_a_type_parameter_of_two_words_is_a_c_cast(tmp_path):
    text = "template <typename T> __global__ void f(T *a, float v) { a[threadIdx.x] = T(v) + T(1); }\n" \
           "template __global__ void f<unsigned int>(unsigned int *, float);\n"
    program, notes = load(tmp_path, text)
    assert not notes
    casts = [n for n in walk(program.kernels[0].body) if isinstance(n, c_ast.Cast)]
    assert [c.to_type.type.type.names for c in casts] == [["unsigned", "int"]] * 2


TEMPLATE_LAUNCHES = """\
template <typename T>
__global__ void scale(const T *in, T *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2 * in[i];
}

int main()
{
    int n = 1 << 20;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    scale<float><<<(n + 255) / 256, 256>>>(a, b, n);
    scale<float><<<(n + 255) / 256, 256>>>(SECOND_IN, c, n);
    return 0;
}
"""


def test_an_instantiation_is_proved_unaliased_over_every_launch_of_its_template(tmp_path):
    """`k<float><<<...>>>` is a launch the alias proof reads: each launch passing its own buffers proves the
    instantiation's pointers apart; one launch passing a buffer twice defeats the proof."""
    from gpgpu_opt.analysis.aliasing import alias_facts

    program, _ = load(tmp_path, TEMPLATE_LAUNCHES.replace("SECOND_IN", "b"))
    proved = alias_facts(program.kernels[0], program, False)
    assert proved.restrict and len(proved.sites) == 2
    program, _ = load(tmp_path, TEMPLATE_LAUNCHES.replace("SECOND_IN", "c"))
    refused = alias_facts(program.kernels[0], program, False)
    assert not refused.restrict and "passes 'c' to both" in refused.why_not


LOCAL_CONSTANT_ARGUMENT = """
    #include <cstdio>
    template <int BLOCK>
    __global__ void scale(float *a, const float *b, int n)
    {
        int i = blockIdx.x * BLOCK + threadIdx.x;
        if (i < n) a[i] = b[i] * 2.0f;
    }
    int main()
    {
        const int threads = 256;
        float *a, *b; int n = 1 << 24;
        cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
        scale<threads><<<(n + threads - 1) / threads, threads>>>(a, b, n);
        printf("done\\n");
        return 0;
    }
"""


def test_a_local_constant_names_a_template_argument(tmp_path):
    """`scale<threads>` with `const int threads = 256;` in main: the instantiation scale<256> (it passed through:
    "not an integer constant"). A name declared twice (another function's own `threads`) is not read so."""
    result = compiled(tmp_path, LOCAL_CONSTANT_ARGUMENT)
    assert [k.naive.name for k in result.kernels] == ["scale__256"] and result.kernels[0].transformed
    assert "template <> __global__ void scale<256>(" in result.output
    if shutil.which("nvcc"):
        builds(tmp_path, result.output)
    twice = LOCAL_CONSTANT_ARGUMENT.replace("int main()", "void other() { int threads = 64; (void)threads; }\n    int main()")
    program, notes = load(tmp_path, twice)
    assert program.kernels == [] and any("is not an integer constant" in n for n in notes)
