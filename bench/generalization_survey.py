"""What the compiler does today with each kernel of the generalization benchmark (bench/generalization/), as the
markdown table of bench/generalization/README.md: the transformations applied (from `compile --report`), the
refusals quoted, the peer, and whether `bench` can make its harness.

    python bench/generalization_survey.py [--target sm_90] [NAME ...]     (run from the repository root)

Each kernel is compiled as a new user would: `python -m gpgpu_opt compile -v --strict --target sm_90 FILE`.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpgpu_opt.diagnostics import CompileError  # noqa: E402
from gpgpu_opt.gpu import benchmarks, generalization  # noqa: E402

#: The passes whose refusals say why a kernel kept its naive form (restrict's is the same on every kernel-only
#: file: no launch in the file, so no alias proof).
TELLING = ("vectorize", "coalesce", "merge", "stencil7", "prefetch")


def _short(text: str, limit: int = 170) -> str:
    text = " ".join(text.replace("|", "/").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def compile_report(path: Path, target: str) -> tuple[int, dict | None, str]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", "-v", "--strict", "--target", target,
                               str(path), "-o", str(Path(tmp) / "out.cu"), "--report", str(report)],
                              capture_output=True, text=True, cwd=ROOT)
        data = json.loads(report.read_text()) if report.exists() else None
    return proc.returncode, data, proc.stderr


def describe(kernel: dict) -> tuple[str, str]:
    """(what was applied, the refusals that kept the rest naive)."""
    applied = [d for d in kernel["decisions"] if d["action"] == "applied" and d["subject"] != "launch"]
    skipped = [d for d in kernel["decisions"] if d["action"] == "skipped" and d["pass"] != "restrict"]
    done = "; ".join(f"**{d['pass']}**: {_short(d['reason'], 110)}" for d in applied) or "nothing (naive kept)"
    telling = [d for d in skipped if d["pass"] in TELLING] or skipped
    why = " / ".join(f"{d['pass']}: \"{_short(d['reason'])}\"" for d in telling[:2]) or "-"
    return done, why


def harness_status(name: str, target: str) -> str:
    try:
        benchmarks.generate(name, target, None, 1)
    except CompileError as err:
        why = str(err).replace(f"{ROOT}/", "").removeprefix("error: ")
        return f"no: \"{_short(why, 150)}\""
    text = benchmarks.BENCHMARKS[name].path.read_text()
    if "blockIdx.z" in text or "threadIdx.z" in text:   # the harness's launches are 2-D
        return "built, but its launch has one z (one batch, or one plane of threads): not representative"
    return "yes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--target", default="sm_90")
    args = parser.parse_args()
    chosen = [b for b in benchmarks.BENCHMARKS.values() if b.suite == generalization.SUITE
              and (not args.names or b.name in args.names)]
    print("| kernel | what the compiler does today | refusals quoted | peer | harness |")
    print("|---|---|---|---|---|")
    status = 0
    for bench in chosen:
        rc, report, stderr = compile_report(bench.path, args.target)
        if rc != 0 or report is None:
            print(f"| {bench.file.rpartition('/')[2]} | compile failed (exit {rc}) | {_short(stderr, 200)} | - | - |")
            status = 1
            continue
        kernel = next(k for k in report["kernels"] if k["name"] == bench.kernel)
        done, why = describe(kernel)
        peer = bench.reference or "none"
        if bench.note:
            peer += f" ({bench.note})"
        print(f"| `{bench.file.rpartition('/')[2]}` | {done} | {why} | {peer} | "
              f"{harness_status(bench.name, args.target)} |")
    return status


if __name__ == "__main__":
    sys.exit(main())
