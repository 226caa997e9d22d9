"""`compile main.cu -o OUTDIR/`: a directory mirroring the program's user files, and one report; `-o FILE`
for a program whose included files changed is an error; nothing is written before all is known, and no
input is ever overwritten. analyze/verify/run over a multi-file program."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.cli.test_errors import assert_error, cli
from tests.cli_in_process import run_cli
from tests.frontend.test_multifile import HEADER, KERNEL_FILE, LATIN1_KERNEL, MAIN, write_tree

TREE = {"app/main.cu": MAIN, "app/kernels/scale_kernel.cu": KERNEL_FILE, "common/params.h": HEADER}


@pytest.fixture
def tree(tmp_path):
    write_tree(tmp_path, TREE)
    return tmp_path


def listing(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


# `--vector-width 4` below: these kernels are widened whatever their launch's size (the launch in another file, or
# none, cannot choose by size: launch_dispatch.py), so that the output files change.
def test_a_directory_output_mirrors_every_user_file_and_writes_one_report(tree):
    out, report = tree / "out", tree / "r.json"
    code, output = cli("compile", "main.cu", "-o", "../out/", "--report", report, "--vector-width", "4",
                       cwd=tree / "app")
    assert code == 0, output
    # The tree from the deepest directory holding every file (the include reaches ../common).
    assert listing(out) == ["app/kernels/scale_kernel.cu", "app/main.cu", "common/params.h"]
    assert (out / "common/params.h").read_text() == HEADER                      # unchanged, copied
    assert "static dim3 scale_grid(" in (out / "app/kernels/scale_kernel.cu").read_text()
    assert "scale<<<scale_grid(grid, threads)" in (out / "app/main.cu").read_text()
    for name, text in TREE.items():                                              # inputs untouched
        assert (tree / name).read_text() == text
    rep = json.loads(report.read_text())
    assert rep["changed_files"] == ["main.cu", "kernels/scale_kernel.cu"]
    assert rep["kernels"][0]["file"] == "kernels/scale_kernel.cu"
    assert sorted(os.path.relpath(tree / "app" / p, out) for p in rep["written"]) == listing(out)
    assert not [n for n in os.listdir(tree) if n.startswith(".gpgpu-opt-")]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_directory_output_builds_with_the_same_relative_includes(tree):
    code, output = cli("compile", tree / "app/main.cu", "-o", f"{tree}/out/")
    assert code == 0, output
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-c", "main.cu", "-o", str(tree / "main.o")],
                          cwd=tree / "out/app", capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_an_existing_directory_takes_a_single_file_program(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src/k.cu").write_bytes(LATIN1_KERNEL)
    (tmp_path / "d").mkdir()
    code, output = cli("compile", tmp_path / "src/k.cu", "-o", tmp_path / "d", "--vector-width", "4")
    assert code == 0, output
    assert os.listdir(tmp_path / "d") == ["k.cu"]
    written = (tmp_path / "d/k.cu").read_bytes()
    assert written.startswith(LATIN1_KERNEL.split(b"__global__")[0]) and b"scale_grid" in written


def test_a_single_output_file_for_changed_included_files_is_an_error(tree):
    for output in (tree / "one.cu", "-"):
        error = assert_error(cli("compile", tree / "app/main.cu", "-o", output, "--report", tree / "r.json"),
                             "give a directory")
        assert "scale_kernel.cu" in error
    assert listing(tree) == sorted(TREE)


def test_a_single_output_file_is_fine_when_only_the_main_file_changes(tmp_path):
    kernel = KERNEL_FILE.replace('#include "../../common/params.h"', '#include "params.h"')
    write_tree(tmp_path, {"main.cu": kernel, "params.h": HEADER})
    code, output = cli("compile", tmp_path / "main.cu", "-o", tmp_path / "o.cu")
    assert code == 0, output
    assert (tmp_path / "o.cu").exists() and listing(tmp_path) == ["main.cu", "o.cu", "params.h"]


@pytest.mark.parametrize("output", ["app/", ".", "./"])
def test_a_directory_output_never_overwrites_an_input(tree, output):
    """`app/` is the input's directory; `.` mirrors app/ and common/ onto themselves."""
    error = assert_error(cli("compile", "app/main.cu", "-o", output, cwd=tree), "-o")
    assert "overwrite" in error
    for name, text in TREE.items():
        assert (tree / name).read_text() == text
    assert listing(tree) == sorted(TREE)


def test_a_directory_output_under_a_file_is_an_error_before_any_work(tree):
    assert_error(cli("compile", tree / "app/main.cu", "-o", f"{tree}/common/params.h/out/"), "-o")
    assert listing(tree) == sorted(TREE)


def test_the_report_may_not_be_an_input_of_the_program(tree):
    assert_error(cli("compile", tree / "app/main.cu", "-o", f"{tree}/out/", "--report", tree / "common/params.h"),
                 "--report")
    assert (tree / "common/params.h").read_text() == HEADER and not (tree / "out").exists()


def test_analyze_and_verify_read_the_kernels_of_included_files(tree):
    code, output = cli("analyze", tree / "app/main.cu")
    assert code == 0, output
    assert f"kernel scale in {tree / 'app/kernels/scale_kernel.cu'}  (target" in output
    assert "naive block 256x1" in output
    code, output = cli("verify", tree / "app/main.cu", "--size", "n=1000")
    assert code == 0 and "PASS" in output and "FAIL" not in output, output


def test_run_builds_a_kernel_of_an_included_file_or_says_why_not(tree):
    code, output = cli("run", tree / "app/main.cu", "--size", "n=1000", "--build-only")
    assert "Traceback" not in output and "internal error" not in output, output
    assert code == 0 or "error:" in output, output


def test_crlf_and_latin1_bytes_are_kept_in_the_output_file(tmp_path):
    crlf = LATIN1_KERNEL.replace(b"\n", b"\r\n")
    (tmp_path / "k.cu").write_bytes(crlf)
    code, output = cli("compile", tmp_path / "k.cu", "-o", tmp_path / "o.cu", "--vector-width", "4")
    assert code == 0, output
    written = (tmp_path / "o.cu").read_bytes()
    assert written.startswith(crlf.split(b"__global__")[0]) and b"scale_grid" in written
    assert written.count(b"\n") == written.count(b"\r\n")


def test_latin1_bytes_go_to_standard_output_unchanged(tmp_path):
    (tmp_path / "k.cu").write_bytes(LATIN1_KERNEL)
    proc = run_cli("compile", tmp_path / "k.cu", "-o", "-", "--vector-width", "4", text=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(LATIN1_KERNEL.split(b"__global__")[0]) and b"scale_grid" in proc.stdout


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_resources_are_read_from_the_edited_included_files(tree):
    """nvcc's resource usage compiles the main file with the included files as the compilation left them,
    not the user's originals beside it."""
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.frontend import load_program
    from gpgpu_opt.nvcc import program_resource_usage
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with
    from gpgpu_opt.targets import get_target

    program = load_program(str(tree / "app/main.cu"), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list("none"), Diagnostics(quiet=True))
    kernel_file = str(tree / "app/kernels/scale_kernel.cu")
    result.outputs[kernel_file] += "__global__ void only_in_the_edit(float *a) { a[threadIdx.x] = 0.0f; }\n"
    usage = program_resource_usage(result, get_target("sm_90"), [])
    assert usage is not None and {"scale", "only_in_the_edit"} <= set(usage)
