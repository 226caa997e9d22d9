"""Running a built harness (and compute-sanitizer on it) and reading what it printed."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from gpgpu_opt.gpu.results import GpuUnavailable, HarnessRun, parse_output
from gpgpu_opt.toolchain import toolkit_root


def run_harness(binary: str, name: str = "", runs: int | None = None, timeout: int = 600) -> HarnessRun:
    """Run the harness binary; its output parsed. GpuUnavailable when there is no GPU or driver."""
    command = [binary, *(["--runs", str(runs)] if runs else [])]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        run = HarnessRun(name=name, returncode=124, error=f"timed out after {timeout} s")
        return run
    except OSError as err:  # e.g. a binary built for another machine
        raise GpuUnavailable(f"{name or binary}: cannot run {binary}: {err.strerror}") from None
    if proc.returncode < 0 or proc.returncode == 127:
        _raise_if_no_driver(proc.stderr, name or binary)
    return parse_output(proc.stdout, name, proc.returncode, proc.stderr)


def _raise_if_no_driver(stderr: str, name: str) -> None:
    if "libcuda" in stderr or "error while loading shared libraries" in stderr:
        raise GpuUnavailable(f"{name}: no CUDA driver on this machine ({stderr.strip().splitlines()[0]})")


@dataclass
class SanitizerReport:
    tool: str
    ok: bool
    summary: str


def sanitize(binary: str, kernel_function: str, nvcc: str, timeout: int = 600) -> list[SanitizerReport]:
    """compute-sanitizer memcheck and racecheck on the optimized kernel (`kernel_function`, the harness's
    name for it), one checked launch and one timed run each."""
    tool = shutil.which("compute-sanitizer") or str(toolkit_root(nvcc) / "bin" / "compute-sanitizer")
    if not os.access(tool, os.X_OK):
        raise GpuUnavailable("compute-sanitizer not found (it comes with the CUDA toolkit, beside nvcc)")
    reports = []
    for which in ("memcheck", "racecheck"):
        command = [tool, "--tool", which, "--error-exitcode", "3", "--kernel-name", f"kns={kernel_function}",
                   binary, "--runs", "1", "--warmup", "0"]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
        parse_output(proc.stdout, binary, proc.returncode, proc.stderr)  # raises when there is no GPU
        summary = next((line.strip() for line in out.splitlines() if "ERROR SUMMARY" in line
                        or "RACECHECK SUMMARY" in line), f"exit status {proc.returncode}")
        reports.append(SanitizerReport(which, proc.returncode == 0, summary))
    return reports
