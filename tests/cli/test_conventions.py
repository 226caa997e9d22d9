"""The command line's conventions: how much it says (one note per kernel; -v every note; -q none), -Werror,
the exit statuses, several files and standard input, plain --help where it is not read on a terminal, and a
fast start (--version and --help import none of the heavy modules)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import INPUTS

TWO_KERNELS = textwrap.dedent("""\
    __global__ void scale(float *a, const float *b, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = b[i] * 2.0f;
    }

    __global__ void shift(float *a, const float *b, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i + 1 < n) a[i] = b[i + 1];
    }

    int main()
    {
        float *a, *b;
        int n = 1 << 24;
        cudaMalloc(&a, n * sizeof(float));
        cudaMalloc(&b, n * sizeof(float));
        scale<<<(n + 255) / 256, 256>>>(a, b, n);
        shift<<<(n + 255) / 256, 256>>>(a, b, n);
        return 0;
    }
""")


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "two.cu"
    path.write_text(TWO_KERNELS)
    return path


def notes_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": note: " in line or line.startswith("note: ")]


def test_by_default_one_note_per_kernel_says_what_was_done(program, tmp_path):
    proc = run_cli("compile", program, "-o", tmp_path / "out.cu", "--report", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr
    kernels = [line for line in notes_of(proc.stderr) if "'scale':" in line or "'shift':" in line]
    assert len(kernels) == 2 and ": optimized (restrict, vectorize); blocks of 256x1" in kernels[0], proc.stderr
    assert "'shift': left as written: vectorize: kernel: not widened:" in kernels[1]
    assert notes_of(proc.stderr)[-1].startswith("note: 1 more note: -v prints it, --report keeps it")
    verbose = run_cli("compile", "-v", program, "-o", tmp_path / "out.cu")
    assert len(notes_of(verbose.stderr)) > len(kernels) and not any("optimized (" in n for n in notes_of(verbose.stderr))
    import json
    assert len(json.loads((tmp_path / "r.json").read_text())["notes"]) == len(notes_of(verbose.stderr))


def test_quiet_says_nothing_but_warnings_and_errors(program, tmp_path):
    proc = run_cli("compile", "-q", program, "-o", tmp_path / "out.cu")
    assert proc.returncode == 0 and proc.stderr == ""
    assert run_cli("compile", "-q", "-v", program, "-o", tmp_path / "o2.cu").returncode == 2   # a usage error


RACY = textwrap.dedent("""\
    __global__ void fill(float *a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) a[i] = 1.0f;
    }
    int main()
    {
        float *a;
        cudaMalloc(&a, 4096 * sizeof(float));
        fill<<<16, dim3(16, 16)>>>(a, 4096);
        return 0;
    }
""")


def test_werror_makes_a_warning_fail_the_command_and_write_nothing(tmp_path):
    """A 1-D kernel launched with 2-D blocks: threads that write the same element, a warning."""
    path = tmp_path / "racy.cu"
    path.write_text(RACY)
    plain = run_cli("compile", path, "-o", tmp_path / "out.cu")
    assert plain.returncode == 0 and "warning:" in plain.stderr
    strict = run_cli("compile", "-Werror", path, "-o", tmp_path / "strict.cu")
    assert strict.returncode == 1 and "error:" in strict.stderr and "[-Werror]" in strict.stderr
    assert not (tmp_path / "strict.cu").exists()


def test_exit_statuses(program, tmp_path):
    assert run_cli("compile", program, "-o", tmp_path / "ok.cu").returncode == 0
    assert run_cli("compile", tmp_path / "missing.cu", "-o", tmp_path / "x.cu").returncode == 1   # the input
    assert run_cli("compile", program).returncode == 2                                             # no -o
    assert run_cli("compile", program, "-o", tmp_path / "x.cu", "--no-such-option").returncode == 2


def test_several_files_compile_into_a_directory_and_standard_input_too(program, tmp_path):
    other = tmp_path / "src" / "scale.cu"
    other.parent.mkdir()
    other.write_text(TWO_KERNELS.split("__global__ void shift")[0])
    out = tmp_path / "out"
    proc = run_cli("compile", program, other, "-o", f"{out}/")
    assert proc.returncode == 0, proc.stderr
    assert "// gpgpu_opt launch" in (out / "two.cu").read_text() and (out / "src" / "scale.cu").exists()
    assert run_cli("compile", program, other, "-o", tmp_path / "one.cu").returncode == 1   # needs a directory
    piped = run_cli("compile", "-", "-o", "-", input=TWO_KERNELS)
    assert piped.returncode == 0 and "// gpgpu_opt launch" in piped.stdout and "<stdin>:1:17" in piped.stderr
    assert piped.stdout == (out / "two.cu").read_text()


def test_help_is_plain_where_it_is_not_read_on_a_terminal():
    for args in (["--help"], ["compile", "--help"], ["verify", "--help"], ["run", "--help"]):
        text = run_cli(*args).stdout
        assert "╭" not in text and "│" not in text, text
        assert "<list[str]>" not in text and "<str>" not in text and "{file}" not in text, text
    compile_help = run_cli("compile", "--help").stdout
    assert "-D NAME[=VALUE]" in compile_help and "-o OUT" in compile_help and "FILE..." in compile_help
    assert "Exit status: 0 done; 1" in run_cli("--help").stdout


#: What --version and --help must not import: they answer in well under 0.3 s.
HEAVY = ("sympy", "pycparser", "numpy", "tree_sitter", "pcpp", "jinja2", "gpgpu_opt.passes", "gpgpu_opt.frontend",
         "gpgpu_opt.pipeline", "gpgpu_opt.analysis", "gpgpu_opt.emulator")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["compile", "--help"]])
def test_version_and_help_import_none_of_the_heavy_modules(args):
    """A real process on purpose: what the interpreter imported to answer."""
    probe = ("import sys\nfrom gpgpu_opt.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in %r or m.startswith(%r)))" %
             (args, tuple(h for h in HEAVY if "." not in h), tuple(h for h in HEAVY if "." in h)))
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
