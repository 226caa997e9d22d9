"""Whole-program checking: a program built as written and built through `gpgpu-opt nvcc`, each in its own
copy of the program's tree, run with the user's arguments; what they print, write and exit with compared
(program_check/compare.py), and their wall times (the median of the runs). The programs' own checks count:
a program that exits non-zero or prints another verdict fails the comparison."""
from __future__ import annotations

import os
import shlex
import statistics
import sys
import tempfile
from dataclasses import dataclass, field

from gpgpu_opt.program_check import compare, runs


@dataclass
class Version:
    label: str
    tree: str
    build_log: str = ""
    built: bool = False
    runs: list = field(default_factory=list)

    @property
    def median_seconds(self) -> float | None:
        return statistics.median(r.seconds for r in self.runs) if self.runs else None


@dataclass
class Outcome:
    naive: Version
    optimized: Version
    difference: str | None = None       # None: they agree

    @property
    def ok(self) -> bool:
        return self.naive.built and self.optimized.built and self.difference is None

    def table(self) -> str:
        naive, opt = self.naive.median_seconds, self.optimized.median_seconds
        speedup = f"{naive / opt:.2f}" if naive and opt else "-"
        check = "ok" if self.ok else (self.difference or "build failed")
        cells = [_seconds(naive), _seconds(opt), speedup, check]
        return "| naive (s) | optimized (s) | x naive | check |\n|---:|---:|---:|---|\n| " + " | ".join(cells) + " |"


def check_program(source: str, command: list[str], build: str = 'make NVCC="$NVCC"', subdir: str = ".",
                  repeats: int = 3, tolerance: float = 1e-3, nvcc: str | None = None, work: str | None = None,
                  timeout: float = 600.0, echo=print) -> Outcome:
    """Build `source` (a directory) twice with `build` (a shell line run in `subdir` of each copy, with NVCC
    naming the compiler: nvcc, then `gpgpu-opt nvcc`), run `command` there `repeats` times each, compare."""
    work = work or tempfile.mkdtemp(prefix="gpgpu-opt-check-")
    real = nvcc or _find_nvcc()
    drop_in = f"{shlex.quote(sys.executable)} -m gpgpu_opt {shlex.quote(real)}"
    versions = []
    for label, compiler in (("naive", shlex.quote(real)), ("optimized", drop_in)):
        tree = os.path.join(work, label)
        runs.copy_tree(source, tree)
        version = Version(label, tree)
        env = dict(os.environ, NVCC=compiler)
        built = runs.build(os.path.join(tree, subdir), build, env, timeout)
        version.built, version.build_log = built.returncode == 0, built.stdout + built.stderr
        echo(f"{label}: {'built' if version.built else 'build failed'} in {tree}")
        versions.append(version)
    naive, optimized = versions
    outcome = Outcome(naive, optimized)
    if not (naive.built and optimized.built):
        failed = naive if not naive.built else optimized
        outcome.difference = f"the {failed.label} build failed:\n{failed.build_log[-3000:]}"
        return outcome
    for _ in range(repeats):    # alternately, so that a machine's slow minute weighs on both
        for version in versions:
            version.runs.append(runs.run(version.tree, os.path.join(version.tree, subdir), command,
                                         dict(os.environ), timeout))
    outcome.difference = _difference(naive.runs[0], optimized.runs[0], tolerance)
    return outcome


def _difference(naive, optimized, tolerance: float) -> str | None:
    if naive.status != 0:
        return f"the program as written fails (exit status {naive.status}): {naive.stderr.strip()[-500:]}"
    if optimized.status != naive.status:
        return f"exit status: naive {naive.status}, optimized {optimized.status}: {optimized.stderr.strip()[-500:]}"
    problem = compare.text_difference(naive.stdout, optimized.stdout, "output", tolerance)
    if problem:
        return problem
    for path in sorted(set(naive.written) | set(optimized.written)):
        if path not in naive.written or path not in optimized.written:
            return f"{path}: written by one version only"
        problem = compare.bytes_difference(naive.written[path], optimized.written[path], path, tolerance)
        if problem:
            return problem
    return None


def _find_nvcc() -> str:
    from gpgpu_opt.toolchain import find_nvcc

    return find_nvcc()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
