"""The preprocessor behaves as nvcc's: C's #if rules, nothing done in a disabled branch, nvcc's macros.

Where the system `cpp` is installed, each case is also run through it (as C++, like nvcc, with the same
macros defined) and the two token streams must agree.
"""
import os
import re
import shutil
import subprocess
import textwrap

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend import load_program
from gpgpu_opt.frontend.preprocess import modelled_include_dirs, nvcc_predefined_macros, preprocess
from gpgpu_opt.targets import DEFAULT_TARGET, TARGETS, get_target
from tests.cli_in_process import run_cli

SYSTEM_CPP = shutil.which("cpp")
SM_90 = get_target(DEFAULT_TARGET).cuda_arch


def tokens(text: str) -> list[str]:
    """The C tokens of preprocessed text, line markers and whitespace aside (good enough to compare)."""
    lines = [line for line in text.splitlines() if not line.startswith("#line ")]
    return re.findall(r"\w+|\S", "\n".join(lines))


def system_cpp(path, defines: dict[str, str], cuda_arch: int) -> str:
    macros = {**nvcc_predefined_macros(cuda_arch), **defines}
    args = [SYSTEM_CPP, "-P", "-undef", "-xc++", *(f"-D{k}={v}" for k, v in macros.items()), str(path)]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def expand(tmp_path, source: str, defines: dict[str, str] | None = None, cuda_arch: int = SM_90,
           name: str = "t.cu") -> tuple[str, dict[str, str]]:
    """Preprocess `source` from a file, and check that the system cpp agrees where there is one."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    text, macros = preprocess(path.read_text(), str(path), defines, cuda_arch=cuda_arch)
    if SYSTEM_CPP:
        assert tokens(text) == tokens(system_cpp(path, defines or {}, cuda_arch))
    return text, macros


def source_line_of(text: str, needle: str) -> int:
    """The line of the user's file that the output line containing `needle` came from."""
    line = 1
    for out_line in text.splitlines():
        marker = re.match(r'#line (\d+) "', out_line)
        if marker:
            line = int(marker.group(1))
            continue
        if needle in out_line:
            return line
        line += 1
    raise AssertionError(f"{needle!r} not in the output")


NESTED = """\
#if defined(A) && B > 2
int a_and_b_over_2;
#  ifdef C
int c;
#  elif defined(A) && !defined(C)
int a_not_c;
#    if UNDEFINED_NAME
int never;
#    elif UNDEFINED_NAME == 0 && !UNDEFINED_NAME
int undefined_is_zero;
#    endif
#  else
int neither;
#  endif
#elif 1
int elif_after_taken_if;
#else
int else_after_taken_if;
#endif
#if !defined(X)
int not_x;
#elif X > 1
int x_over_1;
#else
int x_small;
#endif
#ifndef X
int ifndef_x;
#else
int ifdef_x;
#endif
"""


@pytest.mark.parametrize("defines, expected", [
    ({}, ["elif_after_taken_if", "not_x", "ifndef_x"]),
    ({"A": "", "B": "3"}, ["a_and_b_over_2", "a_not_c", "undefined_is_zero", "not_x", "ifndef_x"]),
    ({"A": "", "B": "2", "X": "2"}, ["elif_after_taken_if", "x_over_1", "ifdef_x"]),
    ({"A": "", "B": "3", "C": "", "X": "0"}, ["a_and_b_over_2", "c", "x_small", "ifdef_x"]),
])
def test_nested_conditionals_with_defined_and_undefined_names(tmp_path, defines, expected):
    text, _ = expand(tmp_path, NESTED, defines)
    assert [t for t in tokens(text) if t not in ("int", ";")] == expected


def test_includes_errors_and_defines_in_disabled_branches_are_not_processed(tmp_path):
    text, macros = expand(tmp_path, """\
        #ifdef POLYBENCH_PAPI
        #include "papi_counters.list"
        #endif
        #if 0
        #include "missing_under_if_0.h"
        #include <missing_system_header.h>
        #error not reached
        #define LEAKED 1
        #endif
        #if 1
        int taken;
        #else
        #include "missing_under_else.h"
        #error not reached either
        #undef KEPT
        #endif
        #define KEPT 2
        #ifdef LEAKED
        int leaked;
        #endif
    """)
    assert tokens(text) == ["int", "taken", ";"]
    assert macros == {"KEPT": "2"}


def test_defined_in_expressions(tmp_path):
    text, _ = expand(tmp_path, """\
        #define ONE 1
        #if defined ONE && defined(ONE) && !defined TWO
        int plain_and_parenthesised;
        #endif
        #if (defined(ONE) ? 10 : 20) + defined TWO == 10
        int in_arithmetic;
        #endif
        #if defined(TWO) || ONE - 1
        int never;
        #endif
    """)
    assert tokens(text) == ["int", "plain_and_parenthesised", ";", "int", "in_arithmetic", ";"]


def test_true_is_one_in_if_as_in_cxx(tmp_path):
    text, _ = expand(tmp_path, "#if true && !false\nint cxx;\n#endif\n")
    assert tokens(text) == ["int", "cxx", ";"]


def test_the_host_platform_is_linux_on_x86_64_as_nvcc_sees_it(tmp_path):
    """cuda-samples' IPC samples choose `#if defined(__linux__) ... #else #error Unsupported system`."""
    text, _ = expand(tmp_path, """\
        #if defined(__linux__) && defined(__unix__) && defined(__x86_64__) && defined(__LP64__)
        int linux_host;
        #elif defined(_WIN32)
        int windows_host;
        #else
        #error Unsupported system
        #endif
        #ifdef __GNUC__
        int gcc_builtins;
        #endif
        """)
    assert tokens(text) == ["int", "linux_host", ";"]


def test_function_like_macro_over_several_lines_and_called_over_several(tmp_path):
    text, macros = expand(tmp_path, """\
        #define MAD(a, b, \\
                    c) ((a) * (b) \\
                        + (c))
        int v = MAD(1,
                    2,
                    3);
        int after;
    """)
    assert tokens(text) == tokens("int v = ((1) * (2) + (3)); int after;")
    assert source_line_of(text, "after") == 7
    assert "MAD" not in macros  # only object-like macros are reported


ARCH_SELECT = """\
#ifdef __CUDA_ARCH__
#  if __CUDA_ARCH__ >= 800
int device_sm80_or_later;
#  else
int device_before_sm80;
#  endif
#else
int host_only;
#endif
#if defined(__CUDACC__) && defined(__NVCC__) && __CUDACC_VER_MAJOR__ >= 12
int nvcc;
#endif
"""


@pytest.mark.parametrize("target", list(TARGETS.values()), ids=list(TARGETS))
def test_cuda_arch_selects_device_code_per_target(tmp_path, target):
    text, macros = expand(tmp_path, ARCH_SELECT, cuda_arch=target.cuda_arch)
    device = "device_sm80_or_later" if target.cuda_arch >= 800 else "device_before_sm80"
    assert tokens(text) == ["int", device, ";", "int", "nvcc", ";"]
    assert macros == {}  # nvcc's own macros are not the program's


def test_load_program_preprocesses_for_its_target(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""\
        __global__ void k(float *a) {
        #if __CUDA_ARCH__ >= 800
            a[threadIdx.x] = 2.0f;
        #else
            a[threadIdx.x] = 1.0f;
        #endif
        }
    """))
    assert "2.0f" in kernel_source(load_program(str(path)).kernels[0].funcdef)
    assert "1.0f" in kernel_source(load_program(str(path), target=TARGETS["g80"]).kernels[0].funcdef)


def test_error_in_enabled_branch_is_a_compile_error_at_its_line(tmp_path):
    path = tmp_path / "t.cu"
    path.write_text("int a;\n#ifndef SIZE\n  #  error SIZE must be set\n#endif\n")
    with pytest.raises(CompileError) as err:
        preprocess(path.read_text(), str(path))
    assert str(err.value) == f"{path}:3:6: error: #error SIZE must be set"
    preprocess(path.read_text(), str(path), {"SIZE": "4"})


def test_error_in_an_included_header_names_the_header(tmp_path):
    header = tmp_path / "util.h"
    header.write_text("\n#error from the header\n")
    path = tmp_path / "t.cu"
    path.write_text('#include "util.h"\n')
    with pytest.raises(CompileError) as err:
        preprocess(path.read_text(), str(path))
    assert err.value.location.line == 2 and err.value.location.file.endswith("util.h")


@pytest.mark.parametrize("source, message", [
    ('int a;\n#include "missing.h"\n', "2:2: error: 'missing.h' file not found"),
    ("#if UNDEFINED_FUNCTION(1)\n#endif\n", "1:2: error: function-like macro 'UNDEFINED_FUNCTION' is not defined"),
])
def test_errors_in_enabled_branches(tmp_path, source, message):
    path = tmp_path / "t.cu"
    path.write_text(source)
    with pytest.raises(CompileError) as err:
        preprocess(source, str(path))
    assert str(err.value) == f"{path}:{message}"


def test_missing_system_include_is_kept_for_the_host_compiler(tmp_path):
    path = tmp_path / "t.cu"
    text, _ = preprocess("#include <no_such_system_header.h>\nint a;\n", str(path))
    assert "#include <no_such_system_header.h>" in text


@pytest.mark.skipif(not any(os.path.isfile(os.path.join(d, "thrust", "device_ptr.h"))
                            for d in modelled_include_dirs()), reason="no CUDA toolkit with thrust here")
def test_a_quoted_toolkit_header_in_the_cccl_directory_is_kept_for_the_host_compiler(tmp_path):
    """cuda-samples' particles: `#include "thrust/device_ptr.h"`, which nvcc finds in include/cccl (CUDA 12.x+)."""
    path = tmp_path / "t.cu"
    text, _ = preprocess('#include "thrust/device_ptr.h"\nint a;\n', str(path))
    assert '#include "thrust/device_ptr.h"' in text and "int a;" in text


UTIL_HEADER = """\
#ifndef POLYBENCH_UTIL_H
#define POLYBENCH_UTIL_H
#include <stdio.h>
#ifdef POLYBENCH_PAPI
#include "papi_counters.list"
#endif
#define PERCENT_DIFF_ERROR_THRESHOLD 0.05
#endif
"""

PROGRAM = """\
#include "../../common/polybenchUtilFuncts.h"
#define N 1024
__global__ void scale(float *a, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) a[i] = a[i] * s;
}
int main() {
    float *a;
    cudaMalloc(&a, N * sizeof(float));
    scale<<<N / 256, 256>>>(a, 2.0f);
    printf("%f\\n", PERCENT_DIFF_ERROR_THRESHOLD);
    return 0;
}
"""


def compile_cli(tmp_path, source: str):
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "polybenchUtilFuncts.h").write_text(UTIL_HEADER)
    program = tmp_path / "benchmarks" / "scale" / "scale.cu"
    program.parent.mkdir(parents=True)
    program.write_text(source)
    out = tmp_path / "out.cu"
    proc = run_cli("compile", program, "-o", out)
    return proc, program, out


def test_cli_compiles_a_program_whose_header_includes_a_missing_file_under_an_undefined_ifdef(tmp_path):
    proc, _, out = compile_cli(tmp_path, PROGRAM)
    assert proc.returncode == 0, proc.stderr
    assert "__global__ void scale" in out.read_text()


def test_cli_error_directive_in_an_enabled_branch(tmp_path):
    source = PROGRAM.replace("#define N 1024", "#ifndef N\n#error N is not set\n#endif")
    proc, program, out = compile_cli(tmp_path, source)
    assert proc.returncode != 0
    assert proc.stderr.startswith(f"{program}:3:2: error: #error N is not set")
    assert not out.exists()


@pytest.mark.parametrize("directive", ["#if", "#if /* nothing */", "#if 1\n#elif"])
def test_a_condition_with_no_expression_is_an_error_where_it_is(tmp_path, directive):
    source = f"{directive}\n#endif\n" + PROGRAM
    proc, program, out = compile_cli(tmp_path, source)
    line = directive.count("\n") + 1
    keyword = "elif" if "elif" in directive else "if"
    assert proc.returncode != 0 and not out.exists()
    assert proc.stderr.startswith(f"{program}:{line}:1: error: #{keyword} with no expression"), proc.stderr
