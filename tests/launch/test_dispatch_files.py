"""Size-dispatched launches where the kernel lives in another file than its launch (gpgpu_opt/launch_dispatch.py):
a kernel in a header, or a kernel .cu the main file includes (Rodinia srad_v1's `#include "extract_kernel.cu"`),
launched at a run-time size from main.cu. The naive copy and the helpers are written beside the kernel in its
file; the launch chooses where the translation unit defines the kernel once, before the launch. Otherwise (the
header included after the launch, twice without a guard, or also by a file the program does not hold that names
the kernel) the launch does not choose, and the kernel is decided as if it were small, with a note."""
from __future__ import annotations

import os
import re
import subprocess
import textwrap

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from tests.conftest import requires_nvcc

#: The naive threads from which a widened streaming kernel gains on sm_90 (launch_dispatch.min_threads_widened).
SM90_STREAMING_THRESHOLD = 2 * 132 * 2048

#: A header in the style of cuda-samples' split programs: guarded, one elementwise kernel.
HEADER = """\
// kernels.cuh: the kernels of main.cu
#ifndef KERNELS_CUH
#define KERNELS_CUH
{storage}__global__ void saxpy(const float *x, float *y, float a, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}}
#endif
"""

MAIN = """\
#include <cstdio>
#include <cstdlib>
#include "kernels.cuh"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    saxpy<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);
    cudaDeviceSynchronize();
    printf("%d\\n", other_answer());
    return 0;
}
"""
OTHER_DECLARED = "int other_answer();\n"

#: In the style of Rodinia srad_v1: main.cu includes the kernel .cu, `fp` and the block size from define.c, and
#: the launch's dim3s set member by member from the image read at run time.
DEFINE_C = """\
#define fp float
#define NUMBER_THREADS 512
"""

EXTRACT_KERNEL = """\
// statistical kernel
__global__ void extract(long d_Ne, fp *d_I)
{
    int bx = blockIdx.x;
    int tx = threadIdx.x;
    int ei = (bx * NUMBER_THREADS) + tx;
    if (ei < d_Ne) {
        d_I[ei] = exp(d_I[ei] / 255);
    }
}
"""

SRAD_MAIN = """\
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "define.c"
#include "extract_kernel.cu"

int main(int argc, char *argv[])
{
    int Nr = atoi(argv[1]);
    int Nc = atoi(argv[2]);
    long Ne = Nr * Nc;
    fp *d_I;
    cudaMalloc((void **)&d_I, sizeof(fp) * Ne);
    int blocks_x = Ne / NUMBER_THREADS;
    if (Ne % NUMBER_THREADS != 0)
        blocks_x = blocks_x + 1;
    dim3 threads;
    threads.x = NUMBER_THREADS;
    threads.y = 1;
    dim3 blocks;
    blocks.x = blocks_x;
    blocks.y = 1;
    extract<<<blocks, threads>>>(Ne,
                                 d_I);
    cudaDeviceSynchronize();
    cudaFree(d_I);
    return 0;
}
"""


def _write(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(text)


def _compile(root, files: dict[str, str], validate: bool = False):
    """Compile root/main.cu (with `files` written under root); the result and its notes."""
    _write(root, files)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(root / "main.cu"), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=validate)
    return result


def _output(result, root, name: str) -> str:
    return result.outputs[str(root / name)]


def _vectorize(result, action: str) -> list[str]:
    return [d.reason for d in result.kernels[0].context.log.decisions if d.pass_name == "vectorize" and d.action == action]


def _build(root, result, sources: list[str], extra: dict[str, str] | None = None) -> None:
    """The output tree (and `extra` files beside it) built and linked by nvcc into one program."""
    out = root / "out"
    out.mkdir()
    for name, text in result.outputs.items():
        (out / os.path.relpath(name, root)).write_text(text)
    _write(out, extra or {})
    built = subprocess.run(["nvcc", "-arch=sm_90", "-o", str(out / "prog"), *sources], cwd=out,
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr


def _assert_dispatched(result, root, header: str, kernel: str, launch: str) -> None:
    [compiled] = result.kernels
    assert compiled.rewritten and compiled.optimized.size_dispatch == SM90_STREAMING_THRESHOLD
    out = _output(result, root, header)
    # beside the kernel, in its file: the helpers before it, the naive copy after the optimized kernel
    assert out.index(f"static bool {kernel}_gains(") < out.index(f"void {kernel}(") < out.index(f"void {kernel}_naive(")
    assert f"{kernel}_naive" not in _output(result, root, "main.cu").split(launch)[0]
    assert launch in _output(result, root, "main.cu")
    assert result.report()["kernels"][0]["launch"]["dispatch_min_threads"] == SM90_STREAMING_THRESHOLD


def test_a_kernel_in_a_header_included_before_the_launch_is_dispatched(tmp_path):
    """Before, a launch in another file than the kernel never chose: saxpy was not widened at all."""
    result = _compile(tmp_path, {"kernels.cuh": HEADER.format(storage=""),
                                 "main.cu": MAIN.replace("int main", OTHER_DECLARED + "int main")}, validate=True)
    assert result.kernels[0].validation.status == "passed", result.kernels[0].validation
    _assert_dispatched(result, tmp_path, "kernels.cuh", "saxpy",
                       "if (saxpy_gains((n + 255) / 256, 256)) saxpy<<<saxpy_grid((n + 255) / 256, 256), "
                       "saxpy_block((n + 255) / 256, 256)>>>(x, y, 2.0f, n); "
                       "else saxpy_naive<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);")
    assert "__global__ void saxpy_naive(const float *x, float *y, float a, int n)" in _output(result, tmp_path,
                                                                                             "kernels.cuh")


@requires_nvcc
def test_a_static_kernel_in_a_header_that_two_files_include_is_dispatched_and_still_links(tmp_path):
    """other.cu includes the header too, and the two are built together: the helpers are `static` and the naive
    copy keeps the kernel's `static`, so each translation unit has its own and nothing is defined twice."""
    other = '#include "kernels.cuh"\nint other_answer() { return 42; }\n'
    header = HEADER.format(storage="static ")
    files = {"kernels.cuh": header, "main.cu": MAIN.replace("int main", OTHER_DECLARED + "int main"),
             "other.cu": other}
    result = _compile(tmp_path, files)
    _assert_dispatched(result, tmp_path, "kernels.cuh", "saxpy", "else saxpy_naive<<<(n + 255) / 256, 256>>>")
    assert "static __global__ void saxpy_naive(" in _output(result, tmp_path, "kernels.cuh")
    _build(tmp_path, result, ["main.cu", "other.cu"], {"other.cu": other})


def test_a_header_included_through_another_with_pragma_once_defines_the_naive_kernel_once(tmp_path):
    header = HEADER.format(storage="").replace("#ifndef KERNELS_CUH\n#define KERNELS_CUH\n", "#pragma once\n") \
        .replace("#endif\n", "")
    main = MAIN.replace('#include "kernels.cuh"', '#include "params.h"\n#include "kernels.cuh"') \
        .replace('    printf("%d\\n", other_answer());\n', "")
    result = _compile(tmp_path, {"kernels.cuh": header, "params.h": '#pragma once\n#include "kernels.cuh"\n',
                                 "main.cu": main})
    _assert_dispatched(result, tmp_path, "kernels.cuh", "saxpy", "else saxpy_naive<<<(n + 255) / 256, 256>>>")
    assert _output(result, tmp_path, "kernels.cuh").count("void saxpy_naive(") == 1


@requires_nvcc
def test_a_kernel_cu_included_by_the_main_file_is_dispatched_and_builds(tmp_path):
    """srad_v1's layout: the launch's grid and block are dim3s set member by member, read twice by the choice."""
    result = _compile(tmp_path, {"define.c": DEFINE_C, "extract_kernel.cu": EXTRACT_KERNEL, "main.cu": SRAD_MAIN},
                      validate=True)
    assert result.kernels[0].validation.status == "passed", result.kernels[0].validation
    _assert_dispatched(result, tmp_path, "extract_kernel.cu", "extract",
                       "if (extract_gains(blocks, threads)) extract<<<extract_grid(blocks, threads), "
                       "extract_block(blocks, threads)>>>(Ne,\n                                 d_I); "
                       "else extract_naive<<<blocks, threads>>>(Ne,\n                                 d_I);")
    assert result.changed_files() == [str(tmp_path / "main.cu"), str(tmp_path / "extract_kernel.cu")]
    _build(tmp_path, result, ["main.cu"])


def _not_dispatched(result, why: str) -> None:
    [compiled] = result.kernels
    assert not compiled.rewritten and all("_naive" not in text for text in result.outputs.values())
    skipped = _vectorize(result, "skipped")
    assert any("known only at run time, where it cannot choose the kernel: " in r and re.search(why, r)
               for r in skipped), skipped


def test_a_header_included_after_the_launch_is_not_dispatched(tmp_path):
    """A prototype before the launch, the kernel's file included at the end: the naive copy and the size test
    would not be declared at the launch."""
    main = MAIN.replace('#include "kernels.cuh"\n', "__global__ void saxpy(const float *x, float *y, float a, int n);\n") \
        .replace('    printf("%d\\n", other_answer());\n', "") + '\n#include "kernels.cuh"\n'
    result = _compile(tmp_path, {"kernels.cuh": HEADER.format(storage=""), "main.cu": main})
    _not_dispatched(result, r"the launch at line 11 of .*main.cu comes before 'saxpy' is defined: .*kernels.cuh is "
                            r"included after it")


def test_a_header_defining_the_kernel_twice_is_not_dispatched(tmp_path):
    """Included twice without a guard (nvcc rejects the program; the choice is not made either)."""
    header = HEADER.format(storage="").replace("#ifndef KERNELS_CUH\n#define KERNELS_CUH\n", "").replace("#endif\n", "")
    main = MAIN.replace('#include "kernels.cuh"', '#include "params.h"\n#include "kernels.cuh"') \
        .replace('    printf("%d\\n", other_answer());\n', "")
    result = _compile(tmp_path, {"kernels.cuh": header, "params.h": '#include "kernels.cuh"\n', "main.cu": main})
    # defined twice in the translation unit, it is read as an overloaded name: passed through as written
    assert result.kernels == [] and result.program.passed_through == ["saxpy"]
    assert all("_naive" not in text for text in result.outputs.values())


def test_a_file_beside_the_program_that_includes_the_header_and_names_the_kernel_is_not_dispatched(tmp_path):
    """other.cu, compiled on its own, launches saxpy too: against the output header its launch would run the
    optimized kernel with its naive configuration."""
    other = ('#include "kernels.cuh"\nint other_answer()\n{\n    saxpy<<<1, 32>>>(0, 0, 1.0f, 0);\n'
             '    return 42;\n}\n')
    result = _compile(tmp_path, {"kernels.cuh": HEADER.format(storage="static "), "other.cu": other,
                                 "main.cu": MAIN.replace("int main", OTHER_DECLARED + "int main")})
    _not_dispatched(result, r"'saxpy' is also named in .*other.cu, which includes kernels.cuh but is not part of this "
                            r"program")


def test_a_kernel_the_host_compilation_does_not_define_is_not_dispatched(tmp_path):
    """Its definition only where __CUDA_ARCH__ is defined: the host code would not see the naive copy either."""
    header = HEADER.format(storage="").replace("#define KERNELS_CUH\n", "#define KERNELS_CUH\n"
                                               "__global__ void saxpy(const float *x, float *y, float a, int n);\n"
                                               "#ifdef __CUDA_ARCH__\n").replace("#endif\n", "#endif\n#endif\n")
    main = MAIN.replace('    printf("%d\\n", other_answer());\n', "")
    result = _compile(tmp_path, {"kernels.cuh": header, "main.cu": main})
    _not_dispatched(result, r"the launch at line 11 of .*main.cu is in another file than the kernel, whose definition "
                            r"the host compilation does not read")


def test_launches_the_translation_unit_does_not_hold_one_for_one_are_not_dispatched(tmp_path):
    """A launch written once in a file included twice, and one in a branch the preprocessor drops: as many
    launches as the files show, but not the same ones."""
    launch = "saxpy<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);\n"
    main = MAIN.replace('    printf("%d\\n", other_answer());\n', "").replace(
        "    saxpy<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);\n",
        '#include "launch.inc"\n#include "launch.inc"\n#if 0\n    ' + launch + "#endif\n")
    result = _compile(tmp_path, {"kernels.cuh": HEADER.format(storage=""), "launch.inc": launch, "main.cu": main})
    _not_dispatched(result, r"the translation unit's launches of 'saxpy' are not the files' ones, one for one")
