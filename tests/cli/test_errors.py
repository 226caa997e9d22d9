"""No traceback, ever: each bad input or destination ends in an `error:` line, a non-zero exit and nothing
written; `-o -` and `--version`; `verify` that compares nothing fails."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from gpgpu_opt.cli import app
from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.sites import naive_launch, truncating_grids
from tests.cli_in_process import run_cli
from tests.conftest import ROOT, requires_nvcc

KERNEL = """
__global__ void scale(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * 2.0f;
}
"""


def cli(*args, cwd=None):
    """The CLI in this process (an exception that escapes it fails the test): (exit code, stdout + stderr)."""
    proc = run_cli(*args, cwd=cwd)
    return proc.returncode, proc.stdout + proc.stderr


def assert_error(code_output, *expected):
    code, output = code_output
    assert code != 0, output
    assert "Traceback" not in output and "──" not in output, output
    error = next((line for line in output.splitlines() if "error:" in line), None)
    assert error is not None, output
    for text in expected:
        assert text in error, error
    return error


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    return path


@pytest.mark.parametrize("command", [["verify", "{f}", "--global", "0"], ["verify", "{f}", "--global", "-2,4"],
                                     ["verify", "{f}", "--bind", "n=0"],
                                     ["compile", "{f}", "-o", "{out}", "--bind", "n=0"]])
def test_shapes_and_bindings_that_are_not_positive_are_an_error(src, tmp_path, command):
    args = [a.format(f=src, out=tmp_path / "out.cu") for a in command]
    error = assert_error(cli(*args))
    assert "must be positive" in error or "positive integers" in error
    assert not (tmp_path / "out.cu").exists()


ROW_SUMS = """
__global__ void rowsum(const float *a, float *s, int rows, int nk)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float acc = 0.0f;
        for (int k = 0; k < nk; k++)
            acc += a[r * nk + k];
        s[r] = acc;
    }
}
"""


@pytest.mark.parametrize("command, expected", [
    (["verify", "--size", "bogus=4"], "--size bogus=4: the program has no parameter or variable 'bogus' (the "
                                      "kernels' scalar parameters: nk, rows)"),
    (["verify", "--size", "rows=-3"], "--size rows=-3: sizes are not negative"),
    (["verify", "--size", "rows=1099511627776"], "--size rows=1099511627776: does not fit 'int rows' of kernel "
                                                 "'rowsum' (-2147483648 to 2147483647)"),
    (["run", "--build-only", "--size", "rows=1099511627776"], "does not fit 'int rows'"),
    (["verify", "--size", "rows=100000000", "--size", "nk=300"], "at rows=100000000, nk=300 its arrays take "
                                                                 "560.7 GiB to emulate, more than the"),
])
def test_sizes_are_checked_against_the_program_before_anything_runs(tmp_path, command, expected):
    """An unknown name used to be ignored (PASS), 2^40 rows a MemoryError, and in the run harness
    `const int s_rows = 1099511627776;`."""
    (tmp_path / "rows.cu").write_text(ROW_SUMS)
    harness = ["--out", tmp_path / "harness"] if command[0] == "run" else []
    assert_error(cli(command[0], tmp_path / "rows.cu", *command[1:], *harness), expected)
    assert sorted(os.listdir(tmp_path)) == ["rows.cu"]


def test_a_loop_of_no_iteration_is_a_case_to_verify_a_launch_of_no_thread_is_not(tmp_path):
    (tmp_path / "rows.cu").write_text(ROW_SUMS)
    code, output = cli("verify", tmp_path / "rows.cu", "--size", "rows=100", "--size", "nk=0")
    assert code == 0 and "PASS" in output, output
    code, output = cli("verify", tmp_path / "rows.cu", "--size", "rows=0", "--size", "nk=3")   # a StopIteration
    assert code == 1 and "its launch at these sizes starts no block" in output, output
    assert "FAIL: nothing compared" in output and "internal error" not in output


@pytest.mark.parametrize("where", ["missing_dir/out.cu", "k.cu/out.cu"])
def test_output_into_a_missing_or_non_directory_writes_nothing(src, tmp_path, where):
    assert_error(cli("compile", src, "-o", tmp_path / where), "-o")
    assert sorted(os.listdir(tmp_path)) == ["k.cu"]


@pytest.mark.parametrize("option", ["--report", "--dump-passes"])
def test_an_unwritable_report_or_dump_leaves_no_output(src, tmp_path, option):
    """Before: the output was written, then the report failed. Now every destination is checked first."""
    out = tmp_path / "out.cu"
    assert_error(cli("compile", src, "-o", out, option, tmp_path / "k.cu" / "x"), option)
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["k.cu"]


def test_report_and_dump_are_written_with_the_output(src, tmp_path):
    out, report, dump = tmp_path / "out.cu", tmp_path / "r.json", tmp_path / "dump" / "passes"
    code, output = cli("compile", src, "-o", out, "--report", report, "--dump-passes", dump)
    assert code == 0, output
    assert out.exists() and report.exists() and any(name.startswith("scale.") for name in os.listdir(dump))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".gpgpu-opt-")]


@pytest.mark.parametrize("spelling", ["k.cu", "./k.cu", "{abs}", "sub/../k.cu", "link.cu"])
def test_output_equal_to_the_input_is_an_error(src, tmp_path, spelling):
    (tmp_path / "sub").mkdir()
    os.symlink(src, tmp_path / "link.cu")
    assert_error(cli("compile", "k.cu", "-o", spelling.format(abs=src), cwd=tmp_path), "same file as the input")
    assert src.read_text() == KERNEL


def test_report_equal_to_the_output_is_an_error(src, tmp_path):
    assert_error(cli("compile", src, "-o", tmp_path / "o.cu", "--report", tmp_path / "o.cu"), "--report")
    assert not (tmp_path / "o.cu").exists()


def test_output_dash_writes_to_stdout_and_diagnostics_to_stderr(src, tmp_path):
    # A real process on purpose (the other tests run the CLI in the test process, tests/cli_in_process.py):
    # one compile end to end through `python -m gpgpu_opt`, with the process's own standard streams.
    proc = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", str(src), "-o", "-"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "__global__ void scale" in proc.stdout and "note:" not in proc.stdout
    assert "note:" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["k.cu"]            # no file named '-'


@requires_nvcc
@pytest.mark.parametrize("edit, error", [
    (("threadIdx.x;", "threadIdx.x"), 'k.cu:5:5: error: expected a ";"'),
    (("* 2.0f", "* factor"), 'k.cu:5:30: error: identifier "factor" is undefined'),
])
@pytest.mark.parametrize("command", [["compile", "k.cu", "-o", "out.cu"], ["verify", "k.cu"],
                                     ["analyze", "k.cu"], ["run", "k.cu", "--build-only"]])
def test_what_nvcc_rejects_is_an_error_with_no_output(src, tmp_path, edit, error, command):
    """A missing ';' and an undeclared name: nvcc rejects them, so every command does, where nvcc puts them
    (they used to pass through with a note, the file written, exit 0)."""
    src.write_text(KERNEL.replace(*edit))
    code, output = cli(*command, cwd=tmp_path)
    assert code == 1 and output.splitlines()[0] == error, output
    assert "note:" not in output and sorted(os.listdir(tmp_path)) == ["k.cu"]


def test_version():
    from importlib.metadata import version

    code, output = cli("--version")
    assert code == 0 and output.strip() == f"gpgpu-opt {version('gpgpu-opt')}"


def test_verify_that_compares_nothing_fails(tmp_path):
    """The file's only kernel is passed through (C++): it used to say PASS."""
    path = tmp_path / "t.cu"
    path.write_text("template <typename T>\n" + KERNEL.replace("float *a", "T *a"))
    code, output = cli("verify", path)
    assert code == 1 and "nothing compared" in output and "PASS" not in output
    assert "scale" in output and "passed through" in output


def _cuda_include_dir():
    from gpgpu_opt.frontend.preprocess import modelled_include_dirs

    return next((d for d in modelled_include_dirs() if os.path.isfile(os.path.join(d, "cuda.h"))
                 and os.path.isfile(os.path.join(d, "cuda_runtime_api.h"))), None)


@pytest.mark.skipif(_cuda_include_dir() is None, reason="no CUDA toolkit headers")
def test_cuda_include_dir_with_cuda_h_is_modelled_not_expanded(src, tmp_path):
    """pcpp overflowed its recursion expanding <cuda.h>; the toolkit's headers are now left as written."""
    src.write_text("#include <cuda.h>\n#include \"cuda_runtime.h\"\n" + KERNEL)
    out = tmp_path / "out.cu"
    code, output = cli("compile", src, "-I", _cuda_include_dir(), "-o", out)
    assert code == 0, output
    assert out.read_text().startswith("#include <cuda.h>\n#include \"cuda_runtime.h\"\n")


def test_a_preprocessor_failure_is_an_error_at_a_line(tmp_path):
    """A chain of 3000 macros overflows pcpp's recursion: an error where it failed, not a traceback."""
    lines = ["#define M0 1"] + [f"#define M{i} M{i - 1}" for i in range(1, 3000)]
    path = tmp_path / "deep.cu"
    path.write_text("\n".join(lines) + "\n__global__ void k(float *a) { a[threadIdx.x] = M2999; }\n")
    error = assert_error(cli("compile", path, "-o", tmp_path / "o.cu"), "the preprocessor could not process")
    assert error.startswith(f"{path}:") and "RecursionError" in error
    assert not (tmp_path / "o.cu").exists()


ODD = {"dir.cu": None, "missing.cu": "missing"}


@pytest.mark.parametrize("name", sorted(ODD))
@pytest.mark.parametrize("command", ["analyze", "compile", "verify", "run"])
def test_odd_inputs_end_in_an_error_line(tmp_path, name, command):
    path = tmp_path / name
    if ODD[name] is None:
        path.mkdir()
    elif isinstance(ODD[name], bytes):
        path.write_bytes(ODD[name])
    extra = {"compile": ["-o", tmp_path / "o.cu"], "run": ["--build-only"]}.get(command, [])
    assert_error(cli(command, path, *extra))
    assert not (tmp_path / "o.cu").exists()


HOST_ONLY = {"empty.cu": b"", "nokernel.cu": b"#include <stdio.h>\nint main() { return 0; }\n"}


@pytest.mark.parametrize("name", sorted(HOST_ONLY))
def test_a_file_without_kernels_compiles_to_itself_with_a_note(tmp_path, name):
    """A compiler accepts a host-only file (before: 'error: no __global__ kernel')."""
    path = tmp_path / name
    path.write_bytes(HOST_ONLY[name])
    code, output = cli("compile", path, "-o", tmp_path / "o.cu")
    assert code == 0, output
    assert "note: no __global__ kernel" in output and "error" not in output
    assert (tmp_path / "o.cu").read_bytes() == HOST_ONLY[name]
    code, output = cli("analyze", path)
    assert code == 0 and "Traceback" not in output, output


@pytest.mark.parametrize("name", sorted(HOST_ONLY))
@pytest.mark.parametrize("command", ["verify", "run"])
def test_a_file_without_kernels_cannot_be_verified_or_run(tmp_path, name, command):
    path = tmp_path / name
    path.write_bytes(HOST_ONLY[name])
    code, output = cli(command, path, *(["--build-only"] if command == "run" else []))
    assert code != 0 and "Traceback" not in output, output
    assert "nothing compared" in output or "no kernel" in output


@pytest.mark.parametrize("args", [["--target", "bogus"], ["--passes", "bogus"]])
@pytest.mark.parametrize("command", ["compile", "verify", "run"])
def test_unknown_target_or_pass_is_an_error(src, tmp_path, command, args):
    extra = {"compile": ["-o", tmp_path / "o.cu"], "run": ["--build-only"]}.get(command, [])
    assert_error(cli(command, src, *extra, *args), "unknown")
    assert not (tmp_path / "o.cu").exists()


# -- launch sites: dim3 members assigned before the launch, one name in two host functions ---------------
def main(body: str, n: str = "int n = 1000;") -> str:
    return KERNEL + f"int main(int argc, char **argv)\n{{\n    {n}\n    float *a;\n{body}    return 0;\n}}\n"


def launch_of(tmp_path, text, sizes=None):
    path = tmp_path / "h.cu"
    path.write_text(textwrap.dedent(text))
    program = load_program(str(path))
    return naive_launch(program, program.kernels[0], sizes or {}), program


def test_a_dim3_member_assigned_before_the_launch_is_followed(tmp_path):
    launch, _ = launch_of(tmp_path, main(body="    dim3 grid(1, 1, 1);\n    dim3 block(256);\n"
                                              "    grid.x = (n + 255) / 256;\n"
                                              "    scale<<<grid, block>>>(a, n);\n"))
    assert launch.grid == (4, 1, 1) and launch.block == (256, 1, 1) and not launch.unknown


@pytest.mark.parametrize("assignment", ["    if (argc > 1)\n        grid.x = 8;\n",
                                        "    for (int r = 0; r < argc; r++) {\n        grid.x = r;\n    }\n",
                                        "    grid.x += 1;\n", "    dim3 &g = grid;\n    g.x = 3;\n",
                                        "    setup(grid);\n", "    grid.x = argc, grid.y = 2;\n"])
def test_a_dim3_assigned_in_a_way_that_cannot_be_followed_is_unknown(tmp_path, assignment):
    """Never the declaration's value (1): unknown, with the reason for a note."""
    launch, _ = launch_of(tmp_path, "void setup(dim3 &g);\n" + main(
        body="    dim3 grid(1, 1, 1);\n" + assignment + "    scale<<<grid, 256>>>(a, n);\n"))
    assert launch.grid[0] is None and launch.unknown and "'grid'" in launch.unknown[0][1]


def test_a_dim3_assigned_after_a_launch_in_a_loop_is_unknown(tmp_path):
    launch, _ = launch_of(tmp_path, main(body="    dim3 grid(4);\n    for (int r = 0; r < 3; r++) {\n"
                                              "        scale<<<grid, 256>>>(a, n);\n        grid.x = 7;\n    }\n"))
    assert launch.grid[0] is None


def test_a_dim3_whose_value_changes_before_the_launch_is_unknown(tmp_path):
    launch, _ = launch_of(tmp_path, main(body="    dim3 block(1);\n    dim3 grid(1);\n    grid.x = block.x;\n"
                                              "    block.x = 256;\n    scale<<<grid, block>>>(a, n);\n"))
    assert launch.block == (256, 1, 1) and launch.grid[0] is None


def test_one_dim3_name_in_two_host_functions(tmp_path):
    """Each site reads its own function's `grid` (a TypeError before)."""
    text = KERNEL + textwrap.dedent("""
        void small(float *a, int n) { dim3 grid((n + 127) / 128); dim3 block(128); scale<<<grid, block>>>(a, n); }
        void large(float *a, int n) { dim3 grid(n / 256); dim3 block(256); scale<<<grid, block>>>(a, n); }
    """)
    launch, program = launch_of(tmp_path, text, {"n": 1024})
    assert launch.grid == (None, 1, 1) and launch.block == (None, 1, 1)     # the sites disagree
    assert truncating_grids(program, program.kernels[0]) == {"x": "the grid's x `n / 256` at line 9"}
    code, output = cli("compile", tmp_path / "h.cu", "-o", tmp_path / "o.cu")
    assert code == 0 and "Traceback" not in output


def test_compile_notes_a_launch_it_cannot_read(tmp_path):
    launch_of(tmp_path, main(body="    dim3 grid(1);\n    if (argc > 1) grid.x = 8;\n"
                                         "    scale<<<grid, 256>>>(a, n);\n"))
    code, output = cli("compile", "-v", tmp_path / "h.cu", "-o", tmp_path / "o.cu")
    assert code == 0 and "note: the launch of 'scale' is not known here: 'grid' is assigned in a loop" in output


def test_a_round_up_grid_with_a_known_size_does_not_round_down(tmp_path):
    """`(n + 255) / 256` with `const int n = 1000` was said to round down (1255 is no multiple of 256)."""
    _, program = launch_of(tmp_path, main(n="const int n = 1000;",
        body="    scale<<<(n + 255) / 256, 256>>>(a, n);\n    scale<<<n / 256, 256>>>(a, n);\n"))
    grids = truncating_grids(program, program.kernels[0])
    assert list(grids) == ["x"] and "`n / 256`" in grids["x"]
    _, program = launch_of(tmp_path, main(body="    scale<<<(n + 1) / 32, 32>>>(a, n);\n"))
    assert list(truncating_grids(program, program.kernels[0])) == ["x"]    # + 1 is no round-up of 32


def test_a_bug_inside_a_command_is_an_error_line_not_a_traceback(src, monkeypatch):
    def broken(*args, **kwargs):
        raise StopIteration("a bug")

    monkeypatch.setattr("gpgpu_opt.frontend.load_program", broken)
    code, output = cli("analyze", src)
    assert code == 3 and f"{src}: error: internal error in gpgpu-opt (StopIteration: a bug)" in output
    assert "Traceback" not in output
    monkeypatch.setenv("GPGPU_OPT_TRACEBACK", "1")                 # for the developers: the exception itself
    result = CliRunner().invoke(app, ["analyze", str(src)])
    assert isinstance(result.exception, StopIteration)
