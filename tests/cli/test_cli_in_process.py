"""tests/cli_in_process.run_cli answers as the `python -m gpgpu_opt` process would, and leaves this process as
it found it (the tests that use it run one after another in one interpreter)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import INPUTS, ROOT
from tests.frontend.test_multifile import LATIN1_KERNEL

KERNEL = """
__global__ void scale(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * 2.0f;
}
"""


def in_a_process(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpgpu_opt", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT)


def test_a_usage_error_and_the_version_read_as_the_real_process_writes_them():
    """Two real processes on purpose: the module entry point, and the name click gives the program."""
    for args in (["compile", "inputs/vv.cu"], ["--version"]):
        real, here = in_a_process(*args), run_cli(*args, cwd=ROOT)
        assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode == 0 and real.stdout.startswith("gpgpu-opt ")


def test_standard_output_and_error_are_apart():
    proc = run_cli("compile", INPUTS / "vv.cu", "-o", "-")
    assert proc.returncode == 0, proc.stderr
    assert "__global__ void vv" in proc.stdout and "note:" not in proc.stdout
    assert "note:" in proc.stderr and "__global__" not in proc.stderr


def test_bytes_that_are_no_utf8_come_out_unchanged(tmp_path):
    (tmp_path / "k.cu").write_bytes(LATIN1_KERNEL)
    # the file does not launch 'scale': a width is asked for, so that the kernel is rewritten
    proc = run_cli("compile", tmp_path / "k.cu", "-o", "-", "--vector-width", "4", text=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(LATIN1_KERNEL.split(b"__global__")[0]) and b"scale_grid" in proc.stdout
    with pytest.raises(UnicodeDecodeError):         # as subprocess.run(text=True) would fail on them
        run_cli("compile", tmp_path / "k.cu", "-o", "-")


def test_strict_env_and_working_directory_are_put_back(tmp_path, monkeypatch):
    """`--strict` sets GPGPU_OPT_STRICT for the rest of the process: here, for the call only."""
    (tmp_path / "k.cu").write_text(KERNEL)
    monkeypatch.delenv("GPGPU_OPT_STRICT")
    monkeypatch.setenv("GPGPU_OPT_CALLER", "kept")
    before, cwd = dict(os.environ), os.getcwd()
    proc = run_cli("verify", "k.cu", "--strict", cwd=tmp_path,
                   env={"GPGPU_OPT_CALLER": None, "GPGPU_OPT_FOR_THE_CALL": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dict(os.environ) == before and os.getcwd() == cwd
    assert sys.stdout is not None and sys.stderr is not None and not sys.stdout.closed


def test_the_environment_of_the_call_is_seen_by_the_command(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    proc = run_cli("compile", "k.cu", "-o", "out.cu", cwd=tmp_path, env={"GPGPU_OPT_STRICT": None})
    assert proc.returncode == 0 and (tmp_path / "out.cu").exists(), proc.stderr


def test_an_exception_that_escapes_the_command_line_fails_the_test(tmp_path, monkeypatch):
    """A subprocess would print a traceback and exit 1, which a test asserting `returncode != 0` would pass."""
    def broken(*args, **kwargs):
        print("said before the bug", file=sys.stderr)
        raise ZeroDivisionError("a bug")

    (tmp_path / "k.cu").write_text(KERNEL)
    monkeypatch.setattr("gpgpu_opt.frontend.load_program", broken)
    with pytest.raises(ZeroDivisionError) as raised:
        run_cli("analyze", tmp_path / "k.cu", env={"GPGPU_OPT_TRACEBACK": "1"})
    assert "said before the bug" in "".join(raised.value.__notes__)
    assert "GPGPU_OPT_TRACEBACK" not in os.environ


def test_an_internal_error_exits_3_as_main_says(tmp_path, monkeypatch):
    from gpgpu_opt import pipeline

    def crashing(kernel, ctx):
        raise RuntimeError("pass bug")

    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "coalesce": crashing})
    proc = run_cli("compile", INPUTS / "mv.cu", "-o", tmp_path / "o.cu", "--passes", "coalesce", "--no-tuned",
                   "--strict")
    assert proc.returncode == 3 and "error: internal error in pass coalesce" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o.cu").exists()
