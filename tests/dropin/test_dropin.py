"""`gpgpu-opt nvcc ARGS...`: nvcc's command line read as nvcc reads it, each .cu unit optimized into the cache
with #line directives back to the user's files, everything else passed through, nvcc's exit status; whole
builds through make (NVCC=...) and CMake (the compiler launcher), and the same bytes from the same input."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpgpu_opt.dropin.arguments import parse
from gpgpu_opt.dropin.lines import with_line_directives
from tests.conftest import requires_nvcc

HERE = Path(__file__).resolve().parent
GPGPU_OPT = [sys.executable, "-m", "gpgpu_opt"]

# A program in the style of the classic suites: main.cu includes the kernel file, which includes a header
# one directory up; the Makefile compiles and links in two steps with a dependency file.
FILES = {
    "params.h": "#define FACTOR 2.0f\n",
    "kernels/scale_kernel.cu": textwrap.dedent("""\
        #include "../params.h"
        __global__ void scale(float *out, const float *in, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = in[i] * FACTOR;
        }
    """),
    "main.cu": textwrap.dedent("""\
        #include <stdio.h>
        #include "kernels/scale_kernel.cu"

        int main(int argc, char **argv)
        {
            int n = 1 << 22;
            float *d_in, *d_out;
            cudaMalloc((void **)&d_in, n * sizeof(float));
            cudaMalloc((void **)&d_out, n * sizeof(float));
            dim3 threads(256, 1);
            dim3 grid((n + 255) / 256, 1);
            scale<<<grid, threads>>>(d_out, d_in, n);
            cudaDeviceSynchronize();
            printf("done\\n");
            return 0;
        }
    """),
    "Makefile": textwrap.dedent("""\
        NVCC ?= nvcc
        FLAGS = -arch=sm_90 -O3 -MD
        app: main.o
        \t$(NVCC) $(FLAGS) main.o -o app
        main.o: main.cu
        \t$(NVCC) $(FLAGS) -c main.cu -o main.o
    """),
}


@pytest.fixture
def tree(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def environment(tmp_path, **more):
    return {**os.environ, "GPGPU_OPT_CACHE": str(tmp_path / "cache"), **more}


def mirrors(tmp_path) -> list[Path]:
    root = tmp_path / "cache" / "nvcc"
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


def test_the_command_line_is_read_as_nvcc_reads_it(tmp_path):
    options = tmp_path / "includes.rsp"
    options.write_text("-I/opt/inc '-I/with space'\n")
    command = parse(["-ccbin", "g++", "-DN=4", "-D", "M", "-Iinc", "-I", "../common", f"--options-file={options}",
                     "-arch=sm_90", "--generate-code=arch=compute_80,code=[compute_80,sm_80]", "-x", "cu", "k.cpp",
                     "main.cu", "-o", "app.cu.o", "-Xcompiler", "-fopenmp", "-MD", "-MF", "app.d"], {})
    assert [u.path for u in command.units] == ["k.cpp", "main.cu"] and command.compiles
    assert command.defines == {"N": "4", "M": "1"}
    assert command.include_dirs == ["inc", "../common", "/opt/inc", "/with space"]
    assert sorted(command.architectures) == [80, 80, 80, 90]
    assert (command.output, command.depfile, command.writes_depfile) == ("app.cu.o", "app.d", True)
    for passed in (["-E", "x.cu"], ["-M", "x.cu"], ["--version"], ["main.o", "-o", "app"], ["-c", "x.cpp"]):
        assert not parse(passed, {}).compiles, passed
    flagged = parse(["-c", "k.cu"], {"NVCC_PREPEND_FLAGS": "-DFAST -arch=sm_80", "NVCC_APPEND_FLAGS": "-Ilast"})
    assert flagged.defines == {"FAST": "1"} and flagged.architectures == [80] and flagged.include_dirs == ["last"]


def test_line_directives_number_kept_lines_as_the_users_and_new_code_by_the_line_it_replaces():
    original = "int a;\n#define TWO(x) \\\n  ((x) * 2)\nint b;\nint c;\n"
    output = "int a;\n#define TWO(x) \\\n  ((x) * 2)\n// new\nstatic int helper;\nint b2;\nint c;\n"
    text = with_line_directives(original, output, "k.cu")
    lines = text.split("\n")
    assert lines[0] == '#line 1 "k.cu"' and lines[1] == "int a;"
    assert lines[2:4] == ["#define TWO(x) \\", "  ((x) * 2)"]          # never inside a continued macro
    assert lines[4] == '#line 4 "k.cu"' and lines[lines.index("int c;") - 1] == '#line 5 "k.cu"'


@requires_nvcc
def test_a_program_builds_through_make_with_its_kernel_optimized(tree):
    """make NVCC="gpgpu-opt nvcc": the kernel file and the main file are rewritten into the cache, the
    dependency file names the user's files, and linking goes to nvcc as it is."""
    nvcc = " ".join([*GPGPU_OPT, "nvcc"])
    build = subprocess.run(["make", f"NVCC={nvcc}"], cwd=tree, capture_output=True, text=True,
                           env=environment(tree))
    assert build.returncode == 0, build.stdout + build.stderr
    assert (tree / "app").exists()
    [mirror] = mirrors(tree)
    assert "// gpgpu_opt launch block(" in (mirror / "kernels" / "scale_kernel.cu").read_text()
    assert (mirror / "main.cu").read_text().startswith('#line 1 "main.cu"\n')
    depfile = (tree / "main.d").read_text()
    assert "cache" not in depfile and f"{tree}/params.h" in depfile and "main.o : main.cu" in depfile


@requires_nvcc
def test_nvccs_diagnostics_point_into_the_users_files(tree):
    """A host-code error after the rewritten launch: nvcc reports it at the line the user wrote it on. A
    kernel nvcc rejects goes to nvcc as written, which says so itself."""
    main = tree / "main.cu"
    main.write_text(main.read_text().replace("    printf(", "    undeclared_call();\n    printf("))
    proc = subprocess.run([*GPGPU_OPT, "nvcc", "-arch=sm_90", "-c", "main.cu", "-o", "main.o"], cwd=tree,
                          capture_output=True, text=True, env=environment(tree))
    assert proc.returncode != 0 and 'main.cu(14): error: identifier "undeclared_call" is undefined' in proc.stderr
    assert mirrors(tree), "the unit was optimized, its launch rewritten"
    kernel = tree / "kernels" / "scale_kernel.cu"
    kernel.write_text(kernel.read_text().replace("* FACTOR", "* FACTOR + nothing"))
    proc = subprocess.run([*GPGPU_OPT, "nvcc", "-arch=sm_90", "-c", "main.cu", "-o", "main.o"], cwd=tree,
                          capture_output=True, text=True, env=environment(tree))
    assert proc.returncode != 0 and 'kernels/scale_kernel.cu(5): error: identifier "nothing"' in proc.stderr


#: One unit optimized in a process of its own, its cache entry listed: name, then each file and its bytes' hash.
OPTIMIZE_IN_A_PROCESS = """
import hashlib, os, sys
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.dropin.units import optimize
from gpgpu_opt.targets import get_target
unit, _ = optimize("main.cu", {"N": "4"}, ["."], get_target("sm_90"), Diagnostics(quiet=True))
print(os.path.basename(unit.root))
for root, _, names in sorted(os.walk(unit.root)):
    for name in sorted(names):
        path = os.path.join(root, name)
        print(os.path.relpath(path, unit.root), hashlib.sha256(open(path, "rb").read()).hexdigest())
"""


def test_the_same_input_and_flags_give_the_same_bytes(tree, tmp_path):
    """Two processes of different hash seeds (and caches): the same cache entry, byte for byte, so the command
    nvcc gets is the same (nvcc's own objects differ run to run, by the temporary names it embeds in them)."""
    listings = []
    for seed in ("1", "2"):
        proc = subprocess.run([sys.executable, "-c", OPTIMIZE_IN_A_PROCESS], cwd=tree, capture_output=True, text=True,
                              env={**os.environ, "GPGPU_OPT_CACHE": str(tmp_path / f"cache{seed}"),
                                   "PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stderr
        listings.append(proc.stdout)
    assert listings[0] == listings[1] and "kernels/scale_kernel.cu" in listings[0]


@requires_nvcc
def test_what_compiles_nothing_is_passed_through(tree):
    env = environment(tree)
    version = subprocess.run([*GPGPU_OPT, "nvcc", "--version"], capture_output=True, text=True, env=env)
    assert version.returncode == 0 and "Cuda compilation tools" in version.stdout
    preprocessed = subprocess.run([*GPGPU_OPT, "nvcc", "-E", "main.cu"], cwd=tree, capture_output=True, text=True,
                                  env=env)
    assert preprocessed.returncode == 0 and "scale<<<grid, threads>>>" in preprocessed.stdout
    assert not mirrors(tree)
    missing = subprocess.run([*GPGPU_OPT, "nvcc", "-c", "absent.cu"], cwd=tree, capture_output=True, text=True,
                             env=env)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


@requires_nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_a_cmake_project_builds_with_gpgpu_opt_as_the_compiler_launcher(tmp_path):
    """CMake calls the launcher with the compiler's path first (`gpgpu-opt /usr/local/cuda/bin/nvcc ...`), and
    gives the include directories in an options file."""
    project = tmp_path / "project"
    shutil.copytree(HERE / "cmake_project", project)
    launcher = tmp_path / "gpgpu-opt"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} -m gpgpu_opt \"$@\"\n")
    launcher.chmod(0o755)
    env = environment(tmp_path)
    configure = subprocess.run(["cmake", "-S", str(project), "-B", str(project / "build"),
                                f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher}"], capture_output=True, text=True, env=env)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    build = subprocess.run(["cmake", "--build", str(project / "build")], capture_output=True, text=True, env=env)
    assert build.returncode == 0, build.stdout + build.stderr
    assert (project / "build" / "saxpy_rows").exists()
    [mirror] = mirrors(tmp_path)
    assert "// gpgpu_opt launch block(" in (mirror / "include" / "saxpy_rows.cuh").read_text()
    assert "saxpy_rows_grid(grid, block)" in (mirror / "main.cu").read_text()
