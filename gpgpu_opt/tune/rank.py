"""Ranking the variants: measured times, the offline model's predictions where it is installed, and how well the
two agree (Spearman's rank correlation)."""
from __future__ import annotations

import math

from gpgpu_opt.gpu.results import HarnessRun
from gpgpu_opt.tune.variants import Variant


def model_available() -> bool:
    """Whether gpgpu_opt.model, which model_predictions needs, is installed: asked before the variants are
    compiled, so that `tune --model-only` without it stops at once."""
    try:
        from gpgpu_opt import model  # noqa: F401
        from gpgpu_opt.harness import renamed_source  # noqa: F401
    except ImportError:
        return False
    return True


def model_predictions(variants: list[Variant], target, sizes: dict) -> dict[str, float] | None:
    """Predicted seconds per variant from gpgpu_opt.model, or None where the model is not installed."""
    if not model_available():
        return None
    from gpgpu_opt import model
    from gpgpu_opt.harness import renamed_source

    predicted = {}
    for v in variants:
        resources = model.resources(renamed_source(v.kernel, v.kernel.name), target)
        predicted[v.label] = model.predict_result(v.result, target, sizes, resources).seconds
    return predicted


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rho (gpgpu_opt.model's, ties ranked by their mean rank); None for fewer than 3 pairs or a
    constant side."""
    from gpgpu_opt.model import spearman as model_spearman

    if len(a) != len(b) or len(a) < 3:
        return None
    rho = model_spearman(a, b)
    return None if math.isnan(rho) else rho


def ranking(run: HarnessRun | None, variants: list[Variant], predicted: dict[str, float] | None) -> list[dict]:
    """One row per variant, fastest first (measured, else predicted); failed checks last."""
    rows = []
    for v in variants:
        r = run.result(v.label) if run else None
        res = v.resources or {}
        rows.append({"variant": v.label, "choice": v.choice.describe(),
                     "ms": r.ms if r else None, "check": r.check if r else None,
                     "speedup": run.speedup(v.label) if run and r else None,
                     "predicted_ms": predicted[v.label] * 1e3 if predicted and v.label in predicted else None,
                     "registers": res.get("registers"), "spill_bytes": res.get("spill_store_bytes")})

    def key(row):
        failed = row["check"] == "FAIL"
        value = row["ms"] if row["ms"] is not None else row["predicted_ms"]
        return (failed, value is None, value or 0.0)
    return sorted(rows, key=key)


def table(rows: list[dict], rho: float | None) -> str:
    fmt = lambda v, s: "-" if v is None else format(v, s)  # noqa: E731
    lines = ["| rank | variant | choice | time (ms) | x naive | predicted (ms) | regs | spills | check |",
             "|---:|---|---|---:|---:|---:|---:|---:|---|"]
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | {r['variant']} | {r['choice']} | {fmt(r['ms'], '.4f')} | {fmt(r['speedup'], '.2f')} | "
                     f"{fmt(r['predicted_ms'], '.4f')} | {fmt(r['registers'], 'd')} | {fmt(r['spill_bytes'], 'd')} | "
                     f"{r['check'] or '-'} |")
    if rho is not None:
        lines += ["", f"model vs measured: Spearman rank correlation {rho:.2f} over {len(rows)} variants"]
    return "\n".join(lines)
