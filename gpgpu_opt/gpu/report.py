"""The bench report: per benchmark naive vs ours vs the reference, as a markdown table, JSON and a PNG plot
(speedup over naive; fraction of the roofline)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from gpgpu_opt.gpu.results import HarnessRun
from gpgpu_opt.targets import Target

#: Published peaks of the GPUs we measure on, by a word of the name the driver reports: DRAM GB/s, FP32 GFLOP/s.
#: A GPU not listed falls back to the target's bandwidth and no compute peak.
GPU_PEAKS = {"H200": (4800.0, 66900.0), "H100 PCIe": (2000.0, 51200.0), "H100": (3350.0, 66900.0),
             "A100": (1555.0, 19500.0)}


@dataclass(frozen=True)
class Peaks:
    bandwidth_gbs: float
    flops_g: float | None
    source: str


def peaks_for(device: str, target: Target) -> Peaks:
    for word, (bandwidth, flops) in GPU_PEAKS.items():
        if word in device:
            return Peaks(bandwidth, flops, f"{word} datasheet")
    return Peaks(target.memory_bandwidth_gbs, None, f"target {target.name}'s bandwidth")


def roofline_fraction(run: HarnessRun, variant: str, peaks: Peaks) -> float | None:
    """How close the variant comes to the nearer ceiling: max(GB/s over peak bandwidth, GFLOP/s over peak)."""
    r = run.result(variant)
    if r is None:
        return None
    fractions = [r.gbs / peaks.bandwidth_gbs]
    if peaks.flops_g and r.gflops:
        fractions.append(r.gflops / peaks.flops_g)
    return max(fractions)


def reference_variant(run: HarnessRun) -> str | None:
    return next((r.variant for r in run.results if r.variant not in ("naive", "optimized")), None)


def bench_rows(runs: list[HarnessRun], target: Target) -> list[dict]:
    rows = []
    for run in runs:
        peaks = peaks_for(run.device, target)
        ref = reference_variant(run)
        ours = run.result("optimized")
        checks = [r.check for r in run.results if r.check not in ("base", "-")]
        rows.append({
            "benchmark": run.name, "kernel": run.kernel, "device": run.device,
            "naive_ms": run.naive.ms if run.naive else None, "ours_ms": ours.ms if ours else None,
            "reference": ref, "reference_ms": run.result(ref).ms if ref else None,
            "ours_gbs": ours.gbs if ours else None, "ours_gflops": ours.gflops if ours else None,
            "speedup": run.speedup("optimized"),
            "vs_reference": (run.result(ref).ms / ours.ms) if ref and ours and ours.ms > 0 else None,
            "roofline": roofline_fraction(run, "optimized", peaks), "peaks": peaks.source,
            "check": "FAIL" if "FAIL" in checks or not run.ok else "ok" if checks else "-",
            "error": run.error})
    return rows


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(rows: list[dict]) -> str:
    devices = sorted({r["device"] for r in rows if r["device"]})
    lines = [f"GPU: {', '.join(devices) or 'unknown'}", "",
             "| benchmark | naive (ms) | ours (ms) | reference | ref (ms) | x naive | x ref | ours GB/s | "
             "ours GFLOP/s | roofline | check |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['benchmark']} | {_fmt(r['naive_ms'], '.4f')} | {_fmt(r['ours_ms'], '.4f')} | "
                     f"{r['reference'] or '-'} | {_fmt(r['reference_ms'], '.4f')} | {_fmt(r['speedup'], '.2f')} | "
                     f"{_fmt(r['vs_reference'], '.2f')} | {_fmt(r['ours_gbs'], '.1f')} | "
                     f"{_fmt(r['ours_gflops'], '.1f')} | {_fmt(r['roofline'], '.0%')} | {r['check']} |")
    lines.append("")
    lines.append("x naive: naive time / ours; x ref: reference time / ours (1.00 = as fast as the reference); "
                 "roofline: the nearer of bandwidth and FP32 peak reached by ours.")
    return "\n".join(lines)


def to_json(rows: list[dict], runs: list[HarnessRun]) -> str:
    return json.dumps({"benchmarks": rows, "runs": [r.as_dict() for r in runs]}, indent=2)


def plot(rows: list[dict], path: str) -> None:
    """Two bar charts: speedup over naive (log scale) and fraction of the roofline, per benchmark."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("--plot needs matplotlib (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["benchmark"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(names) + 4), 4.5))
    left.bar(names, [r["speedup"] or 0 for r in rows], color="tab:blue")
    left.set_yscale("log")
    left.axhline(1.0, color="grey", linewidth=0.8)
    left.set_title("speedup over the naive kernel")
    right.bar(names, [r["roofline"] or 0 for r in rows], color="tab:green")
    right.set_ylim(0, 1.05)
    right.set_title("fraction of the roofline (ours)")
    for axis in (left, right):
        axis.tick_params(axis="x", rotation=45)
    devices = sorted({r["device"] for r in rows if r["device"]})
    fig.suptitle(f"gpgpu-opt bench on {', '.join(devices) or 'an unknown GPU'}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
