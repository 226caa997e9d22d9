"""Building a program in a copy of its tree, running it with the user's arguments, and what a run left: its
output, its exit status, the files it wrote (new or changed in the tree), and its wall time."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str
    seconds: float
    written: dict[str, bytes] = field(default_factory=dict)   # path in the tree -> the bytes it holds now


def copy_tree(source: str, destination: str) -> None:
    shutil.copytree(source, destination, symlinks=True)


def build(tree: str, command: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """The build command (a shell line) in the tree, with `env` (NVCC names the compiler for this build)."""
    return subprocess.run(command, shell=True, cwd=tree, env=env, capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def run(tree: str, workdir: str, command: list[str], env: dict[str, str], timeout: float) -> Run:
    """One run of the program in `workdir` (inside `tree`), and the files of the tree it wrote."""
    before = _snapshot(tree)
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, errors="replace",
                              timeout=timeout)
        status, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as expired:
        status, out, err = 124, _text(expired.stdout), _text(expired.stderr) + f"\n(timed out after {timeout} s)"
    except OSError as failed:
        status, out, err = 127, "", f"cannot run {command[0]}: {failed.strerror or failed}"
    seconds = time.perf_counter() - started
    after = _snapshot(tree)
    written = {path: _read(os.path.join(tree, path)) for path, digest in after.items() if before.get(path) != digest}
    return Run(status, out, err, seconds, written)


def _snapshot(tree: str) -> dict[str, tuple[int, int]]:
    """Every file of the tree by size and modification time (a program's data files are not read)."""
    found = {}
    for root, _, names in os.walk(tree):
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                stat = os.stat(path)
                found[os.path.relpath(path, tree)] = (stat.st_size, stat.st_mtime_ns)
    return found


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
