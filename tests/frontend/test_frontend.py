"""Front end: whole files, macros, shorthand, C++ pass-through, launch sites, and bad input."""
import shutil
import subprocess
import sys
import textwrap

import pytest
from pycparser import c_ast

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from tests.cli_in_process import run_cli
from tests.conftest import INPUTS


def write(tmp_path, text, name="k.cu"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_whole_program_with_header_several_kernels_and_launch_sites():
    prog = load_program(str(INPUTS / "mm.cu"))
    assert [k.name for k in prog.kernels] == ["mm", "scale_matrix"]
    assert {s.kernel for s in prog.launch_sites} >= {"mm", "scale_matrix"}
    site = next(s for s in prog.launch_sites if s.kernel == "mm")
    assert len(site.config) == 2


def test_macros_defines_and_2d_views_are_expanded(tmp_path):
    path = write(tmp_path, """
        #define A(y,x) A[(y)*W+(x)]
        __global__ void k(float *A, float *B) { B[threadIdx.x] = A(1, threadIdx.x); }
    """)
    prog = load_program(path, defines={"W": "64"})
    text = kernel_source(prog.kernels[0].funcdef)
    assert "A[1 * 64 + threadIdx.x]" in text


def test_shorthand_names_become_real_locals(tmp_path):
    path = write(tmp_path, """
        #pragma gCompiler gValue segSize 1024
        __global__ void k(float *A, float *C) { C[idy * 16 + idx] = A[tidx] + segSize; }
    """)
    text = kernel_source(load_program(path).kernels[0].funcdef)
    assert "const int idx = blockIdx.x * blockDim.x + threadIdx.x;" in text
    assert "const int idy = blockIdx.y * blockDim.y + threadIdx.y;" in text
    assert "const int segSize = 1024;" in text


def test_user_definitions_win_over_shorthand(tmp_path):
    path = write(tmp_path, """
        __global__ void k(float *A) { int idx = threadIdx.x * 2; A[idx] = 0.0f; }
    """)
    text = kernel_source(load_program(path).kernels[0].funcdef)
    assert "blockIdx" not in text


def test_cuda_qualifiers_round_trip(tmp_path):
    path = write(tmp_path, """
        __device__ float sq(float v) { return v * v; }
        __global__ void __launch_bounds__(256) k(const float * __restrict__ A, float *B) {
            __shared__ float tile[16][17];
            __shared__ __align__(16) float wide[4][8];
            wide[threadIdx.y][threadIdx.x] = 0.0f;
            tile[threadIdx.y][threadIdx.x] = A[threadIdx.x];
            __syncthreads();
            B[threadIdx.x] = sq(tile[threadIdx.x][threadIdx.y]);
        }
    """)
    prog = load_program(path)
    k = prog.kernels[0]
    assert k.launch_bounds == ["256"]
    assert "sq" in prog.device_functions
    text = kernel_source(k.funcdef)
    assert "__global__ void k(const float *__restrict__ A, float *B)" in text
    assert "__shared__ float tile[16][17];" in text
    assert "__shared__ __align__(16) float wide[4][8];" in text
    shared = [d for d in k.funcdef.body.block_items if isinstance(d, c_ast.Decl)]
    assert shared[0].storage == ["__shared__"]


def test_cxx_kernel_is_passed_through_with_a_note(tmp_path):
    path = write(tmp_path, """
        template <typename T> __global__ void t(T *a) { a[0] = T(1); }
        __global__ void k(float *a) { a[threadIdx.x] = 1.0f; }
    """)
    diags = Diagnostics(quiet=True)
    prog = load_program(path, diagnostics=diags)
    assert [k.name for k in prog.kernels] == ["k"]
    assert prog.passed_through == ["t"]
    assert "passed through unchanged" in str(diags.notes[0])
    assert str(diags.notes[0]).startswith(f"{path}:2:1: note:")


# A kernel that does not parse, and a file without kernels, are no longer errors: see
# tests/frontend/test_multifile.py. File-level damage still is.
@pytest.mark.parametrize("source, line, col, message", [
    ("__global__ void k(float *a) {\n  if (a[0] > 0) {\n    a[1] = 2.0f;\n}\n", 1, 29, "error: expected '}'"),
])
def test_bad_input_is_a_compiler_style_error(tmp_path, source, line, col, message):
    path = write(tmp_path, source)
    with pytest.raises(CompileError) as info:
        load_program(path)
    text = str(info.value)
    assert text.startswith(f"{path}:{line}:{col}: "), text
    assert message in text


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CompileError, match="no such file"):
        load_program(str(tmp_path / "nope.cu"))


@pytest.mark.parametrize("source", [
    "__global__ void k(float *a) {\n  a[0] = 1.0f;\n",
    "__global__ void k(float *a) {\n  a[0] = 1.0f; /* never closed\n}\n",
])
@pytest.mark.parametrize("command", ["compile", "analyze"])
def test_cli_bad_input_exits_nonzero_and_writes_nothing(tmp_path, source, command):
    path = write(tmp_path, source)
    out = tmp_path / "out.cu"
    proc = run_cli(command, path, *(["-o", out] if command == "compile" else []))
    assert proc.returncode != 0
    assert proc.stderr.startswith(f"{path}:") and ": error: " in proc.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["k.cu"]


def test_cli_missing_file(tmp_path):
    # A real process on purpose (the rest run the CLI in the test process, tests/cli_in_process.py): what a
    # shell sees on bad input, the exit status and an error line on standard error, no traceback.
    proc = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", str(tmp_path / "x.cu"), "-o",
                           str(tmp_path / "o.cu")], capture_output=True, text=True)
    assert proc.returncode != 0 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o.cu").exists()


NESTED = """\
__global__ void k(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 4; l++) {
                if (j > l) {
                    a[i] += 1.0f;
                } else
                    a[i] -= 1.0f;
            }
    else {
        a[0] = 0.0f;
    }
}
"""


def test_printing_nested_unbraced_statements_round_trips(tmp_path):
    """source -> AST -> source is a fixed point, with every level indented and the else on its own if."""
    path = tmp_path / "k.cu"
    path.write_text(NESTED)
    printed = kernel_source(load_program(str(path)).kernels[0].funcdef)
    assert printed == NESTED


def test_else_if_chains_print_on_one_level(tmp_path):
    """source -> AST -> source: `else if` stays a chain (pycparser nests each if one level deeper)."""
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float *a, int n) { int i = threadIdx.x; if (i < 1) a[i] = 1; "
                    "else if (i < 2) { a[i] = 2; } else if (i < n) a[i] = 3; else a[i] = 4; }\n")
    text = kernel_source(load_program(str(path)).kernels[0].funcdef)
    assert ("    if (i < 1)\n        a[i] = 1;\n    else if (i < 2) {\n        a[i] = 2;\n"
            "    } else if (i < n)\n        a[i] = 3;\n    else\n        a[i] = 4;\n") in text
    path.write_text(text)
    assert kernel_source(load_program(str(path)).kernels[0].funcdef) == text


IFDEF_BRANCHES = """
    __global__ void scale(float *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
    #ifdef CHECK_BOUNDS
        if (i < n) {
    #else
        {
    #endif
            a[i] = a[i] * 2.0f;
        }
    }
"""


@pytest.mark.parametrize("defines", [{}, {"CHECK_BOUNDS": "1"}])
def test_each_branch_of_an_ifdef_may_open_the_block_one_brace_closes(tmp_path, defines):
    """The braces are counted as the preprocessor leaves them (counted as written, both branches opened a
    block: "expected '}' at end of input"); a block that no branch closes is still an error."""
    path = write(tmp_path, IFDEF_BRANCHES)
    program = load_program(path, defines=defines, diagnostics=Diagnostics(quiet=True))
    assert [k.name for k in program.kernels] == ["scale"]
    assert ("i < n" in kernel_source(program.kernels[0].funcdef)) == bool(defines)
    path = write(tmp_path, IFDEF_BRANCHES.replace("        }\n    }\n", "        }\n"))
    with pytest.raises(CompileError, match="expected '}' at end of input"):
        load_program(path, defines=defines)


OVERLOADS = """
    #include <cstdio>
    __device__ float twice(float v) { return v * 2.0f; }
    __device__ double twice(double v) { return v * 2.0; }
    __global__ void scale(float *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = a[i] + 1.0f;
    }
    __global__ void scale(double *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = a[i] - 1.0;
    }
    __global__ void doubled(float *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = twice(a[i]);
    }
    __global__ void shift(float *a, const float *b, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = b[i] + 1.0f;
    }
    int main()
    {
        float *a, *b; double *d; int n = 1 << 24;
        cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float)); cudaMalloc(&d, n * sizeof(double));
        scale<<<(n + 255) / 256, 256>>>(a, n);
        scale<<<(n + 255) / 256, 256>>>(d, n);
        doubled<<<(n + 255) / 256, 256>>>(a, n);
        shift<<<(n + 255) / 256, 256>>>(a, b, n);
        printf("done\\n");
        return 0;
    }
"""


def test_overloads_are_kept_as_written_and_the_other_kernels_optimized(tmp_path):
    """Both `scale`s used to be rewritten from the double one's body, their launch helpers defined twice (the
    output did not build): launches and helper calls are matched by name, so an overloaded name, and a kernel
    calling one, pass through; the file builds as written."""
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with
    from gpgpu_opt.targets import get_target

    path = write(tmp_path, OVERLOADS)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(path, diagnostics=diagnostics)
    assert [k.name for k in program.kernels] == ["shift"]
    assert program.passed_through == ["twice", "twice", "scale", "scale", "doubled"]
    assert "'scale' passed through unchanged: it is overloaded (2 definitions)" in str(diagnostics.notes[2])
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics)
    assert result.kernels[0].transformed
    for kernel in ("__global__ void scale(float *a, int n)", "__global__ void scale(double *a, int n)",
                   "    if (i < n) a[i] = twice(a[i]);"):
        assert kernel in result.output
    assert result.output.count("scale_grid") == 0
    if shutil.which("nvcc"):
        (tmp_path / "out.cu").write_text(result.output)
        build = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(tmp_path / "out.cu"), "-o", str(tmp_path / "o.o")],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr


ENUMS = """
    enum Mode { HALVE = 2, QUARTER = HALVE * 2, EIGHTH };
    enum { ROWS = 64 };
    enum class Scoped { A = 7 };
    __global__ void scale(float *a, int n, int mode)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n * ROWS) a[i] = mode == EIGHTH ? a[i] / QUARTER : a[i] / HALVE;
    }
"""


def test_the_enumerators_of_a_namespace_scope_enum_are_constants_of_the_kernels(tmp_path):
    """They were undeclared names to the front end, and their kernels passed through."""
    from gpgpu_opt.frontend.file_scope import find_enum_constants

    constants = find_enum_constants(textwrap.dedent(ENUMS), {})
    assert {name: c.value for name, c in constants.items()} == {"HALVE": "2", "QUARTER": "4", "EIGHTH": "5",
                                                               "ROWS": "64"}
    program = load_program(write(tmp_path, ENUMS), diagnostics=Diagnostics(quiet=True))
    assert [k.name for k in program.kernels] == ["scale"]
    assert "(mode == 5) ? (a[i] / 4) : (a[i] / 2)" in kernel_source(program.kernels[0].funcdef)
