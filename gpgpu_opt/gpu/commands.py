"""`gpgpu-opt run` and `gpgpu-opt bench`: generate harnesses, build them with nvcc, run them, report.

Each can stop after generating (`--emit DIR`: harnesses and a run.sh for a GPU machine without Python), after
building (`--build-only`), or read results a run.sh wrote (`bench --from-results DIR`)."""
from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.gpu import benchmarks, report, script
from gpgpu_opt.gpu.results import HarnessRun, run_table
from gpgpu_opt.gpu.runner import run_harness, sanitize
from gpgpu_opt.toolchain import Build, build_harness, find_nvcc
from gpgpu_opt.harness import CUBLAS_REFERENCES, REFERENCE_ALIASES, generate_harness
from gpgpu_opt.targets import Target


@dataclass
class Generated:
    name: str
    kernel: str
    text: str
    cublas: bool


def needs_cublas(reference: str | None) -> bool:
    return bool(reference) and REFERENCE_ALIASES.get(reference) in CUBLAS_REFERENCES


def build_all(generated: list[Generated], directory: Path, target: Target) -> dict[str, Build]:
    """nvcc builds of every harness, in parallel (each nvcc is one process)."""
    nvcc = find_nvcc()
    for g in generated:
        (directory / f"{g.name}.cu").write_text(g.text)

    def one(g: Generated) -> Build:
        return build_harness(str(directory / f"{g.name}.cu"), str(directory / g.name), target.nvcc_arch, g.cublas,
                             nvcc)
    with ThreadPoolExecutor(max_workers=max(1, min(len(generated), os.cpu_count() or 1))) as pool:
        return dict(zip((g.name for g in generated), pool.map(one, generated)))


def harness_for_kernel(program, compile_result, kernel: str | None, sizes: dict, reference: str | None,
                       runs: int, flops: float, global_space: tuple[int, ...] | None = None,
                       extents: dict[str, int] | None = None) -> Generated:
    names = [k.naive.name for k in compile_result.kernels]
    if kernel is None:
        chosen = next((k for k in compile_result.kernels if k.transformed), compile_result.kernels[0] if names else None)
        if chosen is None:
            raise CompileError(f"{program.path}: no kernel to run")
        kernel = chosen.naive.name
    text = generate_harness(program, compile_result, kernel, sizes, global_space, flops=flops, reference=reference,
                            runs=runs, extents=extents)
    return Generated(kernel, kernel, text, needs_cublas(reference))


def run_one(generated: Generated, target: Target, build_only: bool, out_dir: str | None, do_sanitize: bool,
            echo) -> tuple[HarnessRun | None, int]:
    """Build (and unless build_only, run) one harness; returns the run and the exit status for the command."""
    directory = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="gpgpu-opt-run-"))
    directory.mkdir(parents=True, exist_ok=True)
    build = build_all([generated], directory, target)[generated.name]
    for note in build.notes:
        echo(f"note: {note}")
    if not build.ok:
        raise CompileError(f"nvcc failed to build the harness ({' '.join(build.command)}):\n{build.log[-4000:]}")
    if build_only:
        echo(f"built {build.binary} from {build.source} (run it on a GPU machine: {build.binary} [--runs N])")
        return None, 0
    run = run_harness(build.binary, generated.name)
    status = 0 if run.ok else 1
    if do_sanitize:
        for rep in sanitize(build.binary, f"{generated.kernel}_opt", find_nvcc()):
            echo(f"compute-sanitizer {rep.tool}: {'ok' if rep.ok else 'FAILED'} ({rep.summary})")
            status = status or (0 if rep.ok else 1)
    return run, status


def print_run(run: HarnessRun, as_json: bool, echo) -> None:
    echo(json.dumps(run.as_dict(), indent=2) if as_json else run_table(run))


# -- bench ------------------------------------------------------------------------------------------------
def select_benchmarks(names: list[str]) -> list[str]:
    """Benchmark names, suites ('project', 'generalization': each picks its benchmarks), or files: an input's
    path picks the benchmarks of that file."""
    if not names:
        return list(benchmarks.BENCHMARKS)
    suites = {b.suite for b in benchmarks.BENCHMARKS.values()}
    chosen = []
    for name in names:
        if name in benchmarks.BENCHMARKS:
            chosen.append(name)
            continue
        if name in suites:
            chosen += [b.name for b in benchmarks.BENCHMARKS.values() if b.suite == name]
            continue
        path = Path(name).resolve()
        matching = [b.name for b in benchmarks.BENCHMARKS.values() if b.path.resolve() == path]
        if not matching:
            raise CompileError(f"'{name}' is neither a benchmark, a suite nor the file of one "
                               f"(suites: {', '.join(sorted(suites))}; benchmarks: {', '.join(benchmarks.BENCHMARKS)})")
        chosen += matching
    return list(dict.fromkeys(chosen))


def generate_benchmarks(names: list[str], target: Target, passes: str | None, runs: int, echo) -> list[Generated]:
    """The harness of each benchmark. Of several, one the harness cannot be made for is left out with a warning
    that says why (the others still run); a single one named raises."""
    out = []
    for name in names:
        try:
            text, notes = benchmarks.generate(name, target.name, passes, runs)
        except CompileError as err:
            if len(names) == 1:
                raise
            echo(f"warning: {name}: no harness: {str(err).removeprefix('error: ')}")
            continue
        echo(f"{name}: {notes[0]}")
        bench = benchmarks.BENCHMARKS[name]
        out.append(Generated(name, bench.kernel, text, needs_cublas(bench.reference)))
    return out


def emit_benchmarks(generated: list[Generated], directory: str, target: Target) -> Path:
    return script.emit(directory, "bench", target.nvcc_arch, {g.name: g.text for g in generated},
                       {g.name for g in generated if g.cublas}, {"target": target.name})


def bench_report(runs: list[HarnessRun], target: Target, json_out: str | None, plot_out: str | None, echo) -> int:
    rows = report.bench_rows(runs, target)
    echo(report.markdown(rows))
    if json_out:
        Path(json_out).write_text(report.to_json(rows, runs) + "\n")
        echo(f"wrote {json_out}")
    if plot_out:
        report.plot(rows, plot_out)
        echo(f"wrote {plot_out}")
    return 0 if all(r["check"] != "FAIL" for r in rows) else 1
