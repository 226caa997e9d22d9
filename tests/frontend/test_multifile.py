"""Multi-file programs: the kernels, __device__ functions, typedefs and launch sites of every user
file the main .cu includes with quotes; quoted system headers; bytes that are not UTF-8; one function that
cannot be read passes through and the others are still optimized (one that nvcc rejects is an
error)."""
from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.sites import naive_block, naive_launch
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from tests.conftest import requires_nvcc

# A program in the style of the classic suites: the host file includes the kernel file, which includes a
# header one directory up; the kernel calls a __device__ function of that header.
MAIN = """\
#include <stdio.h>
#include <stdlib.h>
#include "kernels/scale_kernel.cu"

int main(int argc, char **argv)
{
    int n = 4096;
    real_t *d_in, *d_out;
    cudaMalloc((void **)&d_in, n * sizeof(real_t));
    cudaMalloc((void **)&d_out, n * sizeof(real_t));
    dim3 threads(BLOCK_SIZE, 1);
    dim3 grid((n + BLOCK_SIZE - 1) / BLOCK_SIZE, 1);
    scale<<<grid, threads>>>(d_out, d_in, n);
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
"""

KERNEL_FILE = """\
#ifndef SCALE_KERNEL_CU
#define SCALE_KERNEL_CU
#include "../../common/params.h"

__global__ void scale(real_t *out, const real_t *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = twice(in[i]);
}
#endif
"""

HEADER = """\
#ifndef PARAMS_H
#define PARAMS_H
#define BLOCK_SIZE 256
typedef float real_t;
__device__ real_t twice(real_t v) { return 2.0f * v; }
#endif
"""


def write_tree(root, files: dict[str, str | bytes]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text))


@pytest.fixture
def program_tree(tmp_path):
    write_tree(tmp_path, {"app/main.cu": MAIN, "app/kernels/scale_kernel.cu": KERNEL_FILE,
                          "common/params.h": HEADER})
    return tmp_path


def compile_all(path, **kwargs):
    """(A width asked for: these elementwise kernels are launched from other files, whose launches cannot
    choose by size (launch_dispatch.py); widened, their files change.)"""
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics, **kwargs)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, vector_width=4)
    return program, result, diagnostics


def test_kernels_device_functions_and_typedefs_of_included_files_are_found(program_tree):
    main = program_tree / "app" / "main.cu"
    program = load_program(str(main))
    assert [f.path for f in program.files] == [str(main), str(program_tree / "app/kernels/scale_kernel.cu"),
                                               str(program_tree / "common/params.h")]
    kernel = program.kernel("scale")
    assert kernel.source_file == str(program_tree / "app/kernels/scale_kernel.cu")
    text = program.text_of(kernel.source_file)
    assert text[kernel.source_span[0]:kernel.source_span[1]].startswith("__global__ void scale(real_t *out")
    assert kernel.params[0].base_type == "float"              # the typedef of the header, resolved
    assert list(program.device_functions) == ["twice"]
    site = next(s for s in program.launch_sites if s.kernel == "scale")
    assert site.file == "" and program.text[site.start:].startswith("scale<<<grid, threads>>>")
    assert naive_block(program, kernel) == (256, 1)
    assert naive_launch(program, kernel, {"n": 4096}).grid[:2] == (16, 1)


def test_files_are_named_relative_to_the_main_file_as_given(program_tree, monkeypatch):
    monkeypatch.chdir(program_tree / "app")
    program = load_program("main.cu")
    assert [f.path for f in program.files] == ["main.cu", "kernels/scale_kernel.cu", "../common/params.h"]
    assert program.kernel("scale").source_file == "kernels/scale_kernel.cu"


def test_the_kernel_is_rewritten_in_its_file_and_the_launch_in_the_main_file(program_tree, monkeypatch):
    monkeypatch.chdir(program_tree / "app")
    program, result, _ = compile_all("main.cu")
    assert result.kernels[0].transformed
    assert result.changed_files() == ["main.cu", "kernels/scale_kernel.cu"]
    kernel_out = result.outputs["kernels/scale_kernel.cu"]
    # The helpers sit in the kernel's file, before the kernel; the file keeps its guard and include.
    assert kernel_out.index("static dim3 scale_grid(") < kernel_out.index("__global__ void scale(")
    assert kernel_out.startswith('#ifndef SCALE_KERNEL_CU\n#define SCALE_KERNEL_CU\n#include "../../common/params.h"')
    assert "scale_grid" not in result.outputs["main.cu"].split("int main")[0]
    assert "scale<<<scale_grid(grid, threads), scale_block(grid, threads)>>>(d_out, d_in, n);" \
        in result.outputs["main.cu"]
    assert result.outputs["../common/params.h"] == HEADER
    assert result.output == result.outputs["main.cu"]
    assert result.report()["changed_files"] == ["main.cu", "kernels/scale_kernel.cu"]
    assert result.report()["kernels"][0]["file"] == "kernels/scale_kernel.cu"


def test_a_launch_site_in_an_included_file_is_read_and_rewritten_there(tmp_path):
    write_tree(tmp_path, {
        "main.cu": '#include "run.cu"\nint main() { run(1000); return 0; }\n',
        "run.cu": """\
            #include "k.cuh"
            void run(int n)
            {
                float *d;
                cudaMalloc(&d, n * sizeof(float));
                add_one<<<(n + 127) / 128, 128>>>(d, n);
            }
            """,
        "k.cuh": """\
            __global__ void add_one(float *a, int n)
            {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) a[i] = a[i] + 1.0f;
            }
            """})
    program, result, _ = compile_all(tmp_path / "main.cu")
    site = program.launch_sites[0]
    assert site.file == str(tmp_path / "run.cu") and site.line == 6
    assert naive_block(program, program.kernel("add_one")) == (128, 1)
    assert naive_launch(program, program.kernel("add_one"), {}).describe() == f"line {tmp_path / 'run.cu'}:6"
    assert "add_one<<<add_one_grid(" in result.outputs[str(tmp_path / "run.cu")]
    assert "static dim3 add_one_grid(" in result.outputs[str(tmp_path / "k.cuh")]
    assert result.outputs[str(tmp_path / "main.cu")] == program.text


def test_a_header_included_twice_is_one_file(tmp_path):
    write_tree(tmp_path, {"main.cu": '#include "a.h"\n#include "b.h"\n#include "a.h"\n',
                          "a.h": "#pragma once\n__device__ float one(void) { return 1.0f; }\n",
                          "b.h": '#include "a.h"\n__global__ void k(float *x) { x[threadIdx.x] = one(); }\n'})
    program = load_program(str(tmp_path / "main.cu"))
    assert sorted(f.path for f in program.files[1:]) == [str(tmp_path / "a.h"), str(tmp_path / "b.h")]
    assert [k.name for k in program.kernels] == ["k"]


@pytest.mark.parametrize("header", ["cuda.h", "cuda_runtime.h", "math.h", "float.h"])
def test_a_quoted_system_header_falls_back_to_the_system(tmp_path, header):
    path = tmp_path / "k.cu"
    path.write_text(f'#include "{header}"\n__global__ void k(float *a) {{ a[threadIdx.x] = 1.0f; }}\n')
    program = load_program(str(path))
    assert [k.name for k in program.kernels] == ["k"] and len(program.files) == 1


def test_a_quoted_header_found_beside_the_file_is_the_users(tmp_path):
    """As in C: the including file's directory comes first, even for a name like a system header's."""
    write_tree(tmp_path, {"k.cu": '#include "math.h"\n__global__ void k(float *a) { a[threadIdx.x] = HALF; }\n',
                          "math.h": "#define HALF 0.5f\n"})
    program = load_program(str(tmp_path / "k.cu"))
    assert [f.path for f in program.files] == [str(tmp_path / "k.cu"), str(tmp_path / "math.h")]


def test_a_missing_user_header_is_still_an_error(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text('#include "kernels_missing.h"\n__global__ void k(float *a) { a[0] = 1.0f; }\n')
    with pytest.raises(CompileError, match="'kernels_missing.h' file not found"):
        load_program(str(path))


LATIN1_KERNEL = (b"// Auteur: Jos\xe9 -- tab\xe9 (Latin-1)\n"
                 b"__global__ void scale(float *a, int n)\n{\n"
                 b"    int i = blockIdx.x * blockDim.x + threadIdx.x; /* \xb5s */\n"
                 b"    if (i < n) a[i] = a[i] * 2.0f;\n}\n")


def test_bytes_that_are_not_utf8_round_trip(tmp_path):
    write_tree(tmp_path, {"main.cu": b'// caf\xe9\n#include "k.cu"\nint main() { return 0; }\n',
                          "k.cu": LATIN1_KERNEL})
    program, result, _ = compile_all(tmp_path / "main.cu")
    assert result.kernels[0].transformed
    out = result.outputs[str(tmp_path / "k.cu")].encode("utf-8", errors="surrogateescape")
    assert out.startswith(b"// Auteur: Jos\xe9 -- tab\xe9 (Latin-1)\n")
    main = result.outputs[str(tmp_path / "main.cu")].encode("utf-8", errors="surrogateescape")
    assert main == b'// caf\xe9\n#include "k.cu"\nint main() { return 0; }\n'


def test_crlf_files_are_read_as_lines_and_written_back_with_crlf(tmp_path):
    (tmp_path / "k.cu").write_bytes(LATIN1_KERNEL.replace(b"\n", b"\r\n"))
    program = load_program(str(tmp_path / "k.cu"))
    assert program.files[0].crlf and "\r" not in program.text
    assert program.files[0].as_written(program.text).encode("utf-8", "surrogateescape") == \
        LATIN1_KERNEL.replace(b"\n", b"\r\n")
    assert program.kernels[0].source_line == 2


HOST_PROGRAM = b"""\
#include <cstdio>
__global__ void scale(float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] * 2.0f;
}
int main()
{
    float *a, *b;
    int n = 1 << 24;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(a, b, n);
    printf("done\\n");
    return 0;
}
"""


def test_a_byte_order_mark_stays_in_front_and_the_first_kernel_is_optimized(tmp_path):
    """The launch helpers written before the first kernel used to go in front of the mark."""
    (tmp_path / "k.cu").write_bytes(b"\xef\xbb\xbf" + HOST_PROGRAM)
    program, result, _ = compile_all(tmp_path / "k.cu")
    assert result.kernels[0].transformed
    written = program.files[0].as_written(result.output).encode("utf-8", "surrogateescape")
    assert written.startswith(b"\xef\xbb\xbf#include <cstdio>\n// gpgpu-opt") and written.count(b"\xef\xbb\xbf") == 1


@pytest.mark.parametrize("bad, where", [
    (b'printf("r\xe9sultat\\n");', "14:14: error: invalid multibyte character sequence"),
    (b"int caf\xe9 = 1; printf(\"done\\n\");", "14:12: error: unrecognized token"),
])
def test_bytes_that_are_not_utf8_in_code_are_an_error_where_nvcc_puts_it(tmp_path, bad, where):
    """nvcc rejects them outside comments (Latin-1 in a host string used to end in an internal error)."""
    (tmp_path / "k.cu").write_bytes(HOST_PROGRAM.replace(b'printf("done\\n");', bad))
    with pytest.raises(CompileError) as info:
        load_program(str(tmp_path / "k.cu"))
    assert str(info.value).startswith(f"{tmp_path / 'k.cu'}:{where}")


def test_bytes_that_are_not_utf8_where_the_preprocessor_leaves_them_out_are_kept(tmp_path):
    text = HOST_PROGRAM.replace(b"int main()", b'#if 0\nconst char *old = "r\xe9sultat";\n#endif\nint main()')
    (tmp_path / "k.cu").write_bytes(text)
    program, result, _ = compile_all(tmp_path / "k.cu")
    assert result.kernels[0].transformed and b'"r\xe9sultat"' in result.output.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("place", [b"// a NUL \0 in a comment\n", b"/* \0 */\n", b'const char nul[] = "a\0b";\n'])
def test_a_nul_byte_in_a_comment_or_a_literal_is_read(tmp_path, place):
    """nvcc builds these (it used to be 'not a text file')."""
    (tmp_path / "k.cu").write_bytes(place + HOST_PROGRAM)
    program, result, _ = compile_all(tmp_path / "k.cu")
    assert result.kernels[0].transformed
    assert result.output.encode("utf-8", "surrogateescape").startswith(place)


BAD_AND_GOOD = """\
constexpr float HALF = 0.5f;
__device__ float broken(float v) { auto half = [](float x) { return x * 0.5f; }; return half(v); }
__device__ float fine(float v) { return v * 0.5f; }

__global__ void uses_broken(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = broken(a[i]);
}

__global__ void undeclared(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * HALF;
}

__global__ void good(float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = fine(b[i]);
}
"""


def test_one_function_it_cannot_read_never_sinks_the_file(tmp_path):
    """Valid CUDA that the front end does not read (a lambda, a constexpr float) passes through as written."""
    write_tree(tmp_path, {"main.cu": '#include "kernels.cu"\n', "kernels.cu": BAD_AND_GOOD})
    program, result, diagnostics = compile_all(tmp_path / "main.cu")
    assert [k.name for k in program.kernels] == ["good"]
    assert program.passed_through == ["broken", "uses_broken", "undeclared"]
    notes = {n.kernel: str(n) for n in diagnostics.notes}
    kernels_cu = tmp_path / "kernels.cu"
    assert notes["broken"].startswith(f"{kernels_cu}:2:1: note: 'broken' uses C++ (lambda, line 2); passed "
                                      "through unchanged")
    assert "'uses_broken' passed through unchanged: it calls 'broken', which is passed through" \
        in notes["uses_broken"]
    assert notes["undeclared"].startswith(f"{kernels_cu}:11:1: note: 'undeclared' passed through unchanged: use "
                                          "of undeclared identifier 'HALF'")
    assert result.kernels[0].transformed
    out = result.outputs[str(kernels_cu)]
    for name in ("broken", "uses_broken", "undeclared"):   # as written, byte for byte
        start = BAD_AND_GOOD.index(f"__{'device' if name == 'broken' else 'global'}__ void {name}" if name != "broken"
                                   else "__device__ float broken")
        end = BAD_AND_GOOD.index("}\n", start) + 2
        assert BAD_AND_GOOD[start:end] in out


@requires_nvcc
@pytest.mark.parametrize("body, error", [
    ("return v +;", ":2:46: error: expected an expression"),
    ("return v * not_declared_anywhere;", ':2:47: error: identifier "not_declared_anywhere" is undefined'),
])
def test_a_function_nvcc_rejects_is_an_error_where_nvcc_puts_it(tmp_path, body, error):
    """What the front end cannot read and nvcc rejects is invalid, in whichever file of the program it is;
    none of the notes of the functions that were read are printed."""
    first, _, rest = BAD_AND_GOOD.split("\n", 2)
    kernels = f"{first}\n__device__ float broken(float v) {{ {body} }}\n{rest}"
    write_tree(tmp_path, {"main.cu": '#include "kernels.cu"\n', "kernels.cu": kernels})
    diagnostics = Diagnostics(quiet=True)
    with pytest.raises(CompileError) as info:
        load_program(str(tmp_path / "main.cu"), diagnostics=diagnostics)
    assert str(info.value).startswith(f"{tmp_path / 'kernels.cu'}{error}")
    assert diagnostics.notes == []


@pytest.mark.parametrize("damage, message", [
    ("__global__ void k(float *a) {\n  a[0] = 1.0f;\n", "expected '}'"),
    ("__global__ void k(float *a) { a[0] = 1.0f; }\n/* never closed\n", "unterminated comment"),
    ("#error this configuration is not supported\n__global__ void k(float *a) { a[0] = 1.0f; }\n", "#error"),
])
def test_damage_to_an_included_file_is_an_error_naming_it(tmp_path, damage, message):
    write_tree(tmp_path, {"main.cu": '#include "k.cu"\n__global__ void g(float *a) { a[0] = 1.0f; }\n',
                          "k.cu": damage})
    with pytest.raises(CompileError) as info:
        load_program(str(tmp_path / "main.cu"))
    assert message in str(info.value) and str(tmp_path / "k.cu") in str(info.value)


def test_no_kernel_in_any_file_is_a_note_not_an_error(tmp_path):
    write_tree(tmp_path, {"main.cu": '#include "util.h"\nint main() { return helper(); }\n',
                          "util.h": "static int helper(void) { return 0; }\n"})
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(tmp_path / "main.cu"), diagnostics=diagnostics)
    assert program.kernels == [] and "no __global__ kernel" in str(diagnostics.notes[0])
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics)
    assert result.changed_files() == [] and result.output == program.text


def test_a_binary_file_is_still_not_a_text_file(tmp_path):
    write_tree(tmp_path, {"main.cu": '#include "blob.h"\n', "blob.h": b"\x7fELF\x00\x01\x02"})
    with pytest.raises(CompileError, match="is not a text file"):
        load_program(str(tmp_path / "main.cu"))


def test_an_included_file_may_start_with_a_byte_order_mark_and_latin1_bytes(tmp_path):
    write_tree(tmp_path, {"main.cu": '#include "params.h"\n__global__ void k(float *a) { a[threadIdx.x] = V; }\n',
                          "params.h": b"\xef\xbb\xbf// r\xe9glage\n#define V 2.0f\n"})
    program = load_program(str(tmp_path / "main.cu"))
    assert program.macros["V"] == "2.0f" and [k.name for k in program.kernels] == ["k"]


def test_helpers_reach_a_launch_that_comes_before_the_kernels_file_is_included(tmp_path):
    """main.cu declares the kernel, launches it, and includes its file at the end: the helpers go before the
    launch too, under a guard, so that the first copy the compiler sees defines them."""
    write_tree(tmp_path, {
        "main.cu": """\
            __global__ void add_one(float *a, int n);
            int main()
            {
                int n = 1000;
                float *d;
                cudaMalloc(&d, n * sizeof(float));
                add_one<<<(n + 127) / 128, 128>>>(d, n);
                return 0;
            }
            #include "k.cu"
            """,
        "k.cu": """\
            __global__ void add_one(float *a, int n)
            {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) a[i] = a[i] + 1.0f;
            }
            """})
    program, result, _ = compile_all(tmp_path / "main.cu")
    main, kernel = result.outputs[str(tmp_path / "main.cu")], result.outputs[str(tmp_path / "k.cu")]
    guard = "#ifndef GPGPU_OPT_ADD_ONE_LAUNCH_HELPERS\n#define GPGPU_OPT_ADD_ONE_LAUNCH_HELPERS\n"
    assert main.index(guard) < main.index("int main()") < main.index("add_one<<<add_one_grid(")
    assert kernel.startswith(guard)
    if shutil.which("nvcc"):
        (tmp_path / "out").mkdir()
        (tmp_path / "out/main.cu").write_text(main)
        (tmp_path / "out/k.cu").write_text(kernel)
        proc = subprocess.run(["nvcc", "-arch=sm_90", "-c", "main.cu", "-o", "main.o"], cwd=tmp_path / "out",
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_a_kernel_calling_a_broken_helper_of_an_included_header_passes_through(tmp_path):
    """The header's helpers are read first (translation-unit order), so that the kernel of the main file
    knows that the helper it calls, through another helper, was passed through."""
    write_tree(tmp_path, {
        "main.cu": """\
            #include "helpers.h"
            __global__ void k(float *a, int n)
            {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) a[i] = outer(a[i]);
            }
            __global__ void fine(float *a, int n)
            {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) a[i] = 2.0f * a[i];
            }
            """,
        "helpers.h": """\
            constexpr float OFFSET = 1.0f;
            __device__ float inner(float v) { return v + OFFSET; }
            __device__ float outer(float v) { return inner(v) * 2.0f; }
            """})
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(tmp_path / "main.cu"), diagnostics=diagnostics)
    assert [k.name for k in program.kernels] == ["fine"]
    assert program.passed_through == ["inner", "outer", "k"]
    notes = {n.kernel: str(n) for n in diagnostics.notes}
    assert "it calls 'inner', which is passed through (use of undeclared identifier" in notes["outer"]
    assert "it calls 'outer', which is passed through (it calls 'inner'" in notes["k"]
