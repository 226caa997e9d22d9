"""The generalization benchmark's table from the results a `bench --emit` run.sh wrote (results/NAME.out), on the
GPU machine (Python's standard library only; torch where it is installed, for the peers only Python has).

    python3 bench/generalization_gpu_table.py RESULTS_DIR [--torch]

One row per kernel: naive, ours and the peer in ms (median, L2 flushed, as the harness times them), ours over
naive, ours over the peer, the check; then the geometric mean over kernels of naive / ours. A kernel whose
launch wrote no output element in either version (the 2-D harness running a 3-D kernel's z = 0 only) is shown
but left out of the mean. With --torch, torch's softmax, var_mean and amax at the row kernels' sizes, beside
the sum of ours over the three softmax kernels.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

RESULT = re.compile(r"^RESULT (\S+) (\S+) ([\d.]+) ([\d.]+) ([\d.]+) (\S+)$")
UNWRITTEN = re.compile(r"^# CHECK optimized \S+: (\d+) elements ok.*\((\d+) elements written by neither")


def read(directory: Path) -> list[dict]:
    manifest = json.loads((directory / "manifest.json").read_text())
    rows = []
    for name in manifest["entries"]:
        out = directory / f"{name}.out"
        rc_file = directory / f"{name}.rc"
        row = {"name": name, "rc": rc_file.read_text().strip() if rc_file.exists() else "-", "results": {},
               "empty": False}
        if out.exists():
            for line in out.read_text().splitlines():
                m = RESULT.match(line)
                if m:
                    row["results"][m.group(2)] = {"ms": float(m.group(3)), "check": m.group(6)}
                u = UNWRITTEN.match(line)
                if u and u.group(1) == u.group(2):
                    row["empty"] = True
        rows.append(row)
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(rows: list[dict]) -> tuple[str, list[float]]:
    lines = ["| kernel | naive ms | ours ms | peer | peer ms | x naive | x peer | check |",
             "|---|---:|---:|---|---:|---:|---:|---|"]
    speedups = []
    for row in rows:
        res = row["results"]
        naive, ours = res.get("naive"), res.get("optimized")
        peer_name = next((v for v in res if v not in ("naive", "optimized")), None)
        peer = res.get(peer_name) if peer_name else None
        x_naive = naive["ms"] / ours["ms"] if naive and ours and ours["ms"] > 0 else None
        x_peer = peer["ms"] / ours["ms"] if peer and ours and ours["ms"] > 0 else None
        checks = [r["check"] for r in res.values() if r["check"] not in ("base", "-")]
        check = "FAIL" if "FAIL" in checks or row["rc"] not in ("0",) else "ok"
        if not res:
            check = f"no result (exit {row['rc']})"
        elif row["empty"]:
            check += ", nothing written (not in the mean)"
        elif x_naive is not None and check == "ok":
            speedups.append(x_naive)
        lines.append(f"| {row['name']} | {_ms(naive and naive['ms'])} | {_ms(ours and ours['ms'])} | "
                     f"{peer_name or 'none'} | {_ms(peer and peer['ms'])} | {_x(x_naive)} | {_x(x_peer)} | {check} |")
    return "\n".join(lines), speedups


def torch_peers(rows: list[dict]) -> str:
    """torch's row kernels at the benchmark's sizes (16384 x 8192 floats), timed like the harness."""
    try:
        import torch
    except ImportError:
        return "torch peers: torch is not installed here"
    if not torch.cuda.is_available():
        return "torch peers: no GPU for torch"
    x = torch.randn(16384, 8192, device="cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def median_ms(fn, runs=20):
        for _ in range(3):
            fn()
        times = []
        for _ in range(runs):
            flush.fill_(1)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    ours = {r["name"]: r["results"].get("optimized", {}).get("ms") for r in rows}
    naive = {r["name"]: r["results"].get("naive", {}).get("ms") for r in rows}
    peers = [("softmax (row max + row sum of exp + normalize)", lambda: torch.softmax(x, dim=1),
              ["g_row_max", "g_row_sum_exp", "g_softmax_normalize"]),
             ("row max", lambda: torch.amax(x, dim=1), ["g_row_max"]),
             ("row mean and variance", lambda: torch.var_mean(x, dim=1, correction=0), ["g_row_mean_var"])]
    lines = ["| step | naive ms | ours ms | torch ms | x torch |", "|---|---:|---:|---:|---:|"]
    for label, fn, names in peers:
        t = median_ms(fn)
        o = sum(ours[n] for n in names) if all(ours.get(n) for n in names) else None
        nv = sum(naive[n] for n in names) if all(naive.get(n) for n in names) else None
        lines.append(f"| {label} | {_ms(nv)} | {_ms(o)} | {t:.4f} | {_x(t / o if o else None)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--torch", action="store_true", help="time torch's row kernels too")
    args = parser.parse_args()
    rows = read(args.results)
    gpu = args.results / "gpu.txt"
    if gpu.exists():
        print("GPU: " + " / ".join(gpu.read_text().split("\n")[1:3]).strip())
    text, speedups = table(rows)
    print(text)
    print()
    if speedups:
        geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(f"geomean over {len(speedups)} kernels of naive ms / ours ms: {geomean:.2f}x "
              f"({sum(s > 1.03 for s in speedups)} faster than naive by > 3%, "
              f"{sum(s < 0.97 for s in speedups)} slower by > 3%)")
    if args.torch:
        print()
        print(torch_peers(rows))
    return 0 if all(r["results"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
