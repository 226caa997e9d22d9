"""Reading a run harness's output (its RESULT, CHECK and device lines) and printing it as a table or JSON.

The harness prints, on stdout:
    # device: NVIDIA H200, 132 SMs, L2 ... bytes
    # CHECK <variant> <array>: N elements ok, max rel err 1.2e-07      (or: K of N elements differ; ...)
    RESULT <kernel> <variant> <time_ms> <GB/s> <GFLOP/s> <check>
and exits 0 (all checks passed), 1 (a mismatch) or 2 (a CUDA error, on stderr).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

#: CUDA runtime errors that mean there is no GPU to run on (not a bug in the kernel).
_NO_GPU = ("no CUDA-capable device", "CUDA driver version is insufficient", "forward compatibility was attempted",
           "system has unsupported display driver", "CUDA-capable device(s) is/are busy or unavailable",
           "initialization error", "cudaErrorNoDevice", "cudaErrorInsufficientDriver", "libcuda.so")


class GpuUnavailable(Exception):
    """The harness could not use a GPU (no device, no driver): the message says so, without a traceback."""


@dataclass
class Result:
    variant: str
    ms: float
    gbs: float
    gflops: float
    check: str                  # 'base' (the naive kernel), 'ok', 'FAIL' or '-' (no check: the copy)
    max_rel_error: float | None = None


@dataclass
class HarnessRun:
    name: str
    kernel: str = ""
    device: str = ""
    results: list[Result] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    returncode: int | None = None
    error: str = ""

    def result(self, variant: str) -> Result | None:
        return next((r for r in self.results if r.variant == variant), None)

    @property
    def naive(self) -> Result | None:
        return self.result("naive")

    def speedup(self, variant: str) -> float | None:
        """Naive time over the variant's time (higher is faster)."""
        naive, other = self.naive, self.result(variant)
        if naive is None or other is None or other.ms <= 0:
            return None
        return naive.ms / other.ms

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error and all(r.check != "FAIL" for r in self.results)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["speedups"] = {r.variant: self.speedup(r.variant) for r in self.results}
        return d


def parse_output(text: str, name: str = "", returncode: int | None = None, stderr: str = "") -> HarnessRun:
    """A HarnessRun from the harness's stdout (and stderr); raises GpuUnavailable when it could not find a GPU."""
    run = HarnessRun(name=name, returncode=returncode)
    errors: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# device: "):
            run.device = line[len("# device: "):].split(",")[0].strip()
        elif line.startswith("# CHECK "):
            run.checks.append(line[2:])
            m = re.match(r"# CHECK (\S+) \S+: .*max rel err ([0-9.eE+-]+)", line)
            if m and not m.group(1).endswith("-after-timing"):
                errors[m.group(1)] = max(errors.get(m.group(1), 0.0), float(m.group(2)))
        elif line.startswith("RESULT "):
            parts = line.split()
            if len(parts) != 7:
                continue
            run.kernel = parts[1]
            run.results.append(Result(parts[2], float(parts[3]), float(parts[4]), float(parts[5]), parts[6]))
    for r in run.results:
        r.max_rel_error = errors.get(r.variant)
    problem = "\n".join(line for line in (stderr + "\n" + text).splitlines() if "error" in line.lower())
    if any(marker in problem for marker in _NO_GPU) and not run.results:
        raise GpuUnavailable(f"{name or 'the harness'}: no usable GPU on this machine "
                             f"({_first_error(problem)}); use --build-only here and run the binary where there "
                             "is a GPU")
    if returncode not in (None, 0, 1):
        run.error = _first_error(problem) or f"exit status {returncode}"
    return run


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def run_table(run: HarnessRun) -> str:
    """Markdown: one row per variant (naive, optimized, the reference): time, bandwidth, throughput, speedup
    over naive, max error against naive, check."""
    lines = [f"{run.kernel or run.name} on {run.device or 'an unknown GPU'}", "",
             "| variant | time (ms) | GB/s | GFLOP/s | x naive | max rel err | check |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in run.results:
        lines.append(f"| {r.variant} | {r.ms:.4f} | {r.gbs:.1f} | {r.gflops:.1f} | "
                     f"{_fmt(run.speedup(r.variant), '.2f')} | {_fmt(r.max_rel_error, '.2e')} | {r.check} |")
    if run.error:
        lines += ["", f"error: {run.error}"]
    return "\n".join(lines)
