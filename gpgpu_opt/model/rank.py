"""Predicted times of variants of one kernel, ranked; with measured times, the rank correlation.

    python -m gpgpu_opt.model.rank FILE [--kernel K] [--target sm_90] --size n=4096 [--global X,Y]
        [--merge x=8,y=4 ...] [--passes LIST ...] [--restrict] [--no-ptxas] [--measured times.json]
        [--harness-dir DIR] [--json]

The variants are 'naive' (no pass), 'default' (every pass), one per `--merge` (every pass, those factors)
and one per `--passes` list. `--measured` reads {variant: milliseconds}; `--harness-dir` writes one GPU
harness per variant (gpgpu_opt.harness: naive against the variant, timed with CUDA events).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.model.predict import Prediction, predict
from gpgpu_opt.model.resources import resources
from gpgpu_opt.model.stats import spearman
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.pipeline import CompileOptions, compile_program
from gpgpu_opt.targets import Target, get_target


@dataclass(frozen=True)
class Variant:
    label: str
    passes: str | None = None       # `--passes` value (None: every pass)
    merge: str | None = None        # `--merge` value


@dataclass
class Row:
    variant: Variant
    prediction: Prediction
    source: str                     # the variant's kernel as compiled
    compiled: object                # the CompileResult (for harnesses)


def variants_from(merges: list[str], pass_lists: list[str]) -> list[Variant]:
    return ([Variant("naive", "none"), Variant("default")] + [Variant(f"merge {m}", None, m) for m in merges]
            + [Variant(f"passes {p}", p) for p in pass_lists])


def rank_variants(path: str, target: Target, sizes: dict, variants: list[Variant], kernel_name: str | None = None,
                  global_space: tuple[int, int] | None = None, restrict: bool = False,
                  use_ptxas: bool = True) -> list[Row]:
    """Compile each variant of `path`'s kernel and predict its time (ptxas's resources where nvcc runs)."""
    rows = []
    include = [os.path.dirname(os.path.abspath(path))]
    for variant in variants:
        diagnostics = Diagnostics(quiet=True)
        program = load_program(path, include_dirs=include, diagnostics=diagnostics)
        merge = MergeRequest.parse(variant.merge) if variant.merge else None
        options = CompileOptions.of(target, parse_pass_list(variant.passes), assume_restrict=restrict,
                                    merge_request=merge)
        result = compile_program(program, options, diagnostics)
        k = next((r for r in result.kernels if kernel_name in (None, r.naive.name)), None)
        if k is None:
            raise SystemExit(f"error: no kernel '{kernel_name}' in {path}")
        source = k.optimized.with_launch_bounds(kernel_source(k.optimized.funcdef))
        used = resources(source, target, k.optimized.name) if use_ptxas else None
        prediction = predict(k.optimized, target, sizes, used, global_space, k.context.facts.naive_block.xy)
        rows.append(Row(variant, prediction, source, result))
    return rows


def table(rows: list[Row], measured: dict[str, float] | None = None) -> str:
    lines = [f"{'variant':<22} {'predicted ms':>12} {'bound':>10} {'occupancy':>9} {'regs':>5}"
             + (f" {'measured ms':>12}" if measured else "")]
    for row in sorted(rows, key=lambda r: r.prediction.seconds):
        p = row.prediction
        regs = p.detail.get("resources", {}).get("registers", "?")
        line = f"{row.variant.label:<22} {p.seconds * 1e3:>12.4f} {p.bound:>10} {p.occupancy:>9.2f} {regs:>5}"
        if measured:
            line += f" {measured.get(row.variant.label, float('nan')):>12.4f}"
        lines.append(line)
    if measured:
        lines.append(f"spearman(predicted, measured) = {correlation(rows, measured):.3f}")
    return "\n".join(lines)


def correlation(rows: list[Row], measured: dict[str, float]) -> float:
    both = [(r.prediction.seconds, measured[r.variant.label]) for r in rows if r.variant.label in measured]
    return spearman([p for p, _ in both], [m for _, m in both])


def write_harnesses(rows: list[Row], directory: str, kernel_name: str | None, sizes: dict,
                    global_space: tuple[int, int] | None, stem: str) -> list[str]:
    from gpgpu_opt.harness import generate_harness

    os.makedirs(directory, exist_ok=True)
    written = []
    for row in rows:
        result = row.compiled
        name = kernel_name or result.kernels[0].naive.name
        text = generate_harness(result.program, result, name, sizes, global_space)
        label = row.variant.label.replace(" ", "_").replace("=", "").replace(",", "_")
        path = os.path.join(directory, f"{stem}__{label}.cu")
        with open(path, "w") as fh:
            fh.write(text)
        written.append(path)
    return written


def _sizes(values: list[str]) -> dict:
    sizes = {}
    for text in values:
        name, _, value = text.partition("=")
        sizes[name.strip()] = float(value) if "." in value else int(value)
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpgpu_opt.model.rank", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("--kernel")
    parser.add_argument("--target", default="sm_90")
    parser.add_argument("--size", action="append", default=[], help="NAME=VAL, a scalar parameter's value")
    parser.add_argument("--global", dest="space", help="X[,Y]: the naive launch's threads (default: from sizes)")
    parser.add_argument("--merge", action="append", default=[], help="a variant with these merge factors")
    parser.add_argument("--passes", action="append", default=[], help="a variant with these passes")
    parser.add_argument("--restrict", action="store_true", help="pointer parameters never alias")
    parser.add_argument("--no-ptxas", action="store_true", help="estimate registers instead of asking ptxas")
    parser.add_argument("--measured", help="JSON {variant: milliseconds}")
    parser.add_argument("--harness-dir", help="write a GPU harness per variant here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    space = None
    if args.space:
        parts = [int(v) for v in args.space.split(",")]
        space = (parts[0], parts[1] if len(parts) > 1 else 1)
    sizes = _sizes(args.size)
    rows = rank_variants(args.file, get_target(args.target), sizes, variants_from(args.merge, args.passes),
                         args.kernel, space, args.restrict, not args.no_ptxas)
    measured = None
    if args.measured:
        with open(args.measured) as fh:
            measured = {k: float(v) for k, v in json.load(fh).items()}
    if args.json:
        out = {"variants": [{"variant": r.variant.label, "predicted_ms": r.prediction.seconds * 1e3,
                             "bound": r.prediction.bound, "occupancy": r.prediction.occupancy,
                             "detail": r.prediction.detail} for r in rows]}
        if measured:
            out["spearman"] = correlation(rows, measured)
        print(json.dumps(out, indent=1, default=str))
    else:
        print(table(rows, measured))
    if args.harness_dir:
        stem = os.path.splitext(os.path.basename(args.file))[0]
        for path in write_harnesses(rows, args.harness_dir, args.kernel, sizes, space, stem):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
