"""`gpgpu-opt tune`: compile the variants, time them in one harness binary, rank them, store the winner."""
from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path

from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.gpu import script
from gpgpu_opt.gpu.commands import Generated, build_all
from gpgpu_opt.gpu.results import HarnessRun
from gpgpu_opt.gpu.runner import run_harness
from gpgpu_opt.harness import HarnessVariant, generate_harness
from gpgpu_opt.pipeline import CompileResult
from gpgpu_opt.tune import rank
from gpgpu_opt.tune.db import Choice, Entry, TuningDB, source_hash
from gpgpu_opt.tune.variants import VariantSet, build_variants


class ModelMissing(Exception):
    pass


def with_progress(work, description: str):
    """Run work(step) under a rich progress bar; step(label) advances it."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}"),
                  TimeElapsedColumn(), transient=True) as progress:
        task = progress.add_task(description, total=None)
        return work(lambda label: progress.update(task, advance=1, description=f"{description}: {label}"))


def variants_for(program, target, kernel: str, bindings: dict, passes: list[str], include_dirs) -> VariantSet:
    if kernel not in {k.name for k in program.kernels}:
        raise CompileError(f"no kernel '{kernel}' in '{program.path}' "
                           f"(kernels: {', '.join(k.name for k in program.kernels)})")
    return with_progress(lambda step: build_variants(program, target, kernel, bindings, passes, step, include_dirs),
                         f"compiling the variants of {kernel}")


def describe_set(found: VariantSet, echo) -> None:
    echo(f"{found.kernel}: the model merges x={found.model_factors[0]},y={found.model_factors[1]}; "
         f"{len(found.variants)} variants, {len(found.unique)} distinct that compile")
    for v in found.variants:
        if v.duplicate_of:
            echo(f"  {v.label}: same kernel as {v.duplicate_of}")
        elif v.rejected:
            echo(f"  {v.label}: rejected: {v.rejected}")
        else:
            echo(f"  {v.label}: {v.schedule.describe() if v.schedule is not None else 'as written'}")


def harness_text(program, target, found: VariantSet, sizes: dict, flops: float, runs: int) -> str:
    unique = found.unique
    model = next(v for v in found.variants if v.label == "model")
    compiled = CompileResult(program, target, [model.result], "")
    return generate_harness(program, compiled, found.kernel, sizes, flops=flops, runs=runs,
                            variants=[HarnessVariant(v.label, v.kernel, v.choice.describe()) for v in unique])


def manifest_extra(program, target, found: VariantSet, sizes: dict, predicted: dict | None) -> dict:
    """What the results need to be ranked where they are read: the key, each variant's choice and the model's
    prediction (seconds) where the model ran."""
    model = next(v for v in found.variants if v.label == "model")
    return {"target": target.name, "kernel": found.kernel, "source_hash": source_hash(model.result.naive),
            "sizes": sizes, "variants": {v.label: asdict(v.choice) for v in found.unique},
            "predicted": predicted or {}}


def store_winner(db: TuningDB, run: HarnessRun, info: dict, echo) -> Entry | None:
    """The fastest variant whose check passed, stored under the kernel's key and the GPU's name."""
    timed = [r for r in run.results if r.variant in info["variants"] and r.check == "ok"]
    if not timed:
        echo("no variant passed its check on the GPU: nothing stored")
        return None
    best = min(timed, key=lambda r: r.ms)
    c = info["variants"][best.variant]
    choice = Choice(tuple(c["passes"]), c.get("merge"), c.get("vector_width"), tuple(c.get("named", ())))
    entry = Entry(info["kernel"], info["source_hash"], dict(info["sizes"]), info["target"], run.device or "unknown",
                  choice, best.variant, best.ms,
                  run.naive.ms if run.naive else None)
    db.store(entry)
    model = run.result("model")
    gain = f", {model.ms / best.ms:.2f}x the untuned choice" if model and best.ms > 0 else ""
    echo(f"winner: {best.variant} ({entry.choice.describe()}), {best.ms:.4f} ms{gain}; stored in {db.path} "
         f"for {entry.gpu}")
    return entry


def report(run: HarnessRun | None, found: VariantSet, predicted, echo) -> None:
    rows = rank.ranking(run, found.unique, predicted)
    echo(rank.table(rows, _agreement(rows) if run is not None else None))


def _agreement(rows: list[dict]) -> float | None:
    """Spearman's rho between the model's predictions and the measured times of the variants that passed."""
    pairs = [(r["ms"], r["predicted_ms"]) for r in rows
             if r["ms"] is not None and r["predicted_ms"] is not None and r["check"] != "FAIL"]
    return rank.spearman([p[0] for p in pairs], [p[1] for p in pairs])


def tune(program, target, kernel: str, sizes: dict, bindings: dict, passes: list[str], runs: int, flops: float,
         db: TuningDB, model_only: bool, build_only: bool, emit_dir: str | None, include_dirs, echo) -> int:
    if model_only and not rank.model_available():
        raise ModelMissing("tune --model-only needs the offline model (gpgpu_opt.model), which this version "
                           "does not have yet; run `tune` on a GPU machine instead")
    found = variants_for(program, target, kernel, bindings, passes, include_dirs)
    describe_set(found, echo)
    predicted = rank.model_predictions(found.unique, target, sizes)
    if model_only:
        report(None, found, predicted, echo)
        return 0
    text = harness_text(program, target, found, sizes, flops, runs)
    info = manifest_extra(program, target, found, sizes, predicted)
    if emit_dir:
        run_sh = script.emit(emit_dir, "tune", target.nvcc_arch, {kernel: text}, set(), info)
        echo(f"wrote {emit_dir}: on the GPU machine `bash {run_sh}`, then here "
             f"`gpgpu-opt tune --from-results {Path(emit_dir) / 'results'}`")
        return 0
    directory = Path(tempfile.mkdtemp(prefix="gpgpu-opt-tune-"))
    build = build_all([Generated(kernel, kernel, text, False)], directory, target)[kernel]
    if not build.ok:
        raise CompileError(f"nvcc failed to build the tuning harness:\n{build.log[-4000:]}")
    if build_only:
        echo(f"built {build.binary} ({len(found.unique)} variants in one binary)")
        return 0
    run = run_harness(build.binary, kernel)
    report(run, found, predicted, echo)
    return 0 if store_winner(db, run, info, echo) else 1


def from_results(directory: str, db: TuningDB, echo) -> int:
    """Rank and store from the results a tune run.sh wrote on the GPU machine."""
    manifest, runs = script.read_results(directory)
    if manifest.get("kind") != "tune":
        raise CompileError(f"{directory}: results of `{manifest.get('kind')}`, not of `tune`")
    run = runs[manifest["kernel"]]
    if run.error:
        echo(f"error: {run.error}")
    predicted = manifest.get("predicted") or {}
    timed = sorted((r for r in run.results if r.variant in manifest["variants"]), key=lambda r: (r.check != "ok", r.ms))
    rows = [{"variant": r.variant, "ms": r.ms, "check": r.check, "speedup": run.speedup(r.variant),
             "predicted_ms": predicted[r.variant] * 1e3 if r.variant in predicted else None} for r in timed]
    fmt = lambda v, s: "-" if v is None else format(v, s)  # noqa: E731
    lines = ["| rank | variant | time (ms) | x naive | predicted (ms) | check |", "|---:|---|---:|---:|---:|---|"]
    lines += [f"| {i} | {r['variant']} | {r['ms']:.4f} | {fmt(r['speedup'], '.2f')} | {fmt(r['predicted_ms'], '.4f')} | "
              f"{r['check']} |" for i, r in enumerate(rows, 1)]
    rho = _agreement(rows)
    if rho is not None:
        lines += ["", f"model vs measured: Spearman rank correlation {rho:.2f} over {len(rows)} variants"]
    echo("\n".join(lines))
    return 0 if store_winner(db, run, manifest, echo) else 1
