"""Device-only builds of many small CUDA files in one nvcc run, for tests that only need each file accepted.

Most of a small file's `nvcc -cubin` is fixed cost: the front end reading CUDA's own headers, about 0.6 of
0.7 CPU-seconds. `build_device_only` pastes the files into one translation unit instead, each in a namespace of
its own with a `#line` naming it, and each macro it defines undefined after it, so that no file sees another's
names or macros: a file that builds there builds alone. A file with an `#include` is built alone (what it
includes would be read once, inside the first file's namespace), and so is one that defines `main` (which a
namespace would free from the rules of the global one). When the batch fails, every file is built
alone, and those are the results: an error is always one file's own.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

_INCLUDE = re.compile(r"^\s*#\s*include\b", re.M)
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
_MAIN = re.compile(r"\bmain\s*\(")


def batch_text(paths: list[Path]) -> str:
    """One translation unit holding every file, each in its own namespace."""
    parts = []
    for number, path in enumerate(paths):
        text = path.read_text()
        undefs = "".join(f"#undef {name}\n" for name in dict.fromkeys(_DEFINE.findall(text)))
        parts.append(f'namespace batch_unit_{number} {{\n#line 1 "{path}"\n{text}\n}}\n{undefs}')
    return "".join(parts)


def _nvcc(source: Path, out: Path, flags: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(out), *flags, str(source)],
                          capture_output=True, text=True, timeout=600)


def build_device_only(files: dict[Path, list[str]], work: Path) -> dict[Path, str | None]:
    """nvcc's errors for each file (None: it built), as `nvcc -arch=sm_90 -cubin FLAGS FILE` of each alone
    would give; `files` maps each file to its own flags. Files batched need none but include directories,
    which a file without an `#include` does not read."""
    batched = [p for p, flags in files.items()
               if not (_INCLUDE.search(p.read_text()) or _MAIN.search(p.read_text()))
               and all(f.startswith("-I") for f in flags)]
    if len(batched) > 1:
        batch = work / "batch_of_files.cu"
        batch.write_text(batch_text(batched))
        if _nvcc(batch, work / "batch_of_files.cubin", []).returncode == 0:
            return {p: None for p in batched} | _each({p: f for p, f in files.items() if p not in batched}, work)
    return _each(files, work)


def _each(files: dict[Path, list[str]], work: Path) -> dict[Path, str | None]:
    results = {}
    for number, (path, flags) in enumerate(files.items()):
        proc = _nvcc(path, work / f"alone_{number}.cubin", flags)
        results[path] = None if proc.returncode == 0 else proc.stderr
    return results
