"""Split mode: harnesses generated here with a shell script that builds and runs them on the GPU machine (no
Python there), and the results read back here.

    DIR/manifest.json  what was generated (kind, target, arch, entries and what `--from-results` needs)
    DIR/NAME.cu        one harness per entry
    DIR/run.sh         builds and runs them, writing DIR/results/NAME.out, .err, .rc (and copying manifest.json)
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from gpgpu_opt.gpu.results import HarnessRun, parse_output
from gpgpu_opt.templating import render

MANIFEST = "manifest.json"


def emit(directory: str, kind: str, arch: str, harnesses: dict[str, str], cublas: set[str], extra: dict) -> Path:
    """Write the harnesses, the manifest and run.sh into `directory`; returns run.sh's path."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in harnesses.items():
        (out / f"{name}.cu").write_text(text)
    manifest = {"kind": kind, "arch": arch, "entries": list(harnesses), **extra}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    script = out / "run.sh"
    script.write_text(render("run_split.sh.j2", kind=kind, arch=arch, names=list(harnesses),
                             cublas=sorted(cublas)))
    os.chmod(script, 0o755)
    return script


def read_results(directory: str) -> tuple[dict, dict[str, HarnessRun]]:
    """The manifest and each entry's parsed run, from a results folder (DIR/results, or DIR itself)."""
    base = Path(directory)
    if not (base / MANIFEST).exists() and (base / "results" / MANIFEST).exists():
        base = base / "results"
    if not (base / MANIFEST).exists():
        raise FileNotFoundError(f"{directory}: no {MANIFEST} (expected the results/ folder run.sh wrote)")
    manifest = json.loads((base / MANIFEST).read_text())
    runs = {}
    for name in manifest["entries"]:
        out = base / f"{name}.out"
        if not out.exists():
            runs[name] = HarnessRun(name=name, error="no output (not built or not run)")
            continue
        rc_file, err_file = base / f"{name}.rc", base / f"{name}.err"
        rc = int(rc_file.read_text().strip() or 0) if rc_file.exists() else None
        stderr = err_file.read_text() if err_file.exists() else ""
        runs[name] = parse_output(out.read_text(), name, rc, stderr)
    return manifest, runs
