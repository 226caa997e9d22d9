"""Where `compile` writes: every destination is checked before anything is written, then all are written
at once, each atomically, so a failed command leaves nothing behind (no output without its report, no
source overwritten by its own output)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

from gpgpu_opt.diagnostics import CompileError

STDOUT = "-"


def same_file(a: str, b: str) -> bool:
    """`x.cu`, `./x.cu`, an absolute path or a link to it: the same file."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _check_parent(option: str, path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(parent):
        raise CompileError(f"{option} '{path}': directory '{parent}' does not exist")
    if not os.path.isdir(parent):
        raise CompileError(f"{option} '{path}': '{parent}' is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CompileError(f"{option} '{path}': directory '{parent}' is not writable")


def check_file_destination(option: str, path: str, others: dict[str, str]) -> None:
    """A file `option` may write: its directory exists and is writable, it is not a directory, and it
    is none of `others` (what -> path: the input, a file another option writes)."""
    if not path:
        raise CompileError(f"{option}: empty file name")
    if os.path.isdir(path):
        raise CompileError(f"{option} '{path}' is a directory; give a file name")
    for what, other in others.items():
        if same_file(path, other):
            raise CompileError(f"{option} '{path}' is the same file as {what} '{other}'")
    _check_parent(option, path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise CompileError(f"{option} '{path}' is not writable")


def check_directory_destination(option: str, path: str) -> None:
    """A directory `option` fills: it exists and is writable, or the nearest existing ancestor is a
    writable directory in which it can be made."""
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            raise CompileError(f"{option} '{path}': directory is not writable")
        return
    if os.path.exists(path):
        raise CompileError(f"{option} '{path}' exists and is not a directory")
    ancestor = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise CompileError(f"{option} '{path}': '{ancestor}' is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise CompileError(f"{option} '{path}': directory '{ancestor}' is not writable")


def is_directory_output(output: str) -> bool:
    """`-o OUTDIR/` (a path ending in a separator) or `-o` an existing directory: write the program there."""
    return output != STDOUT and (output.endswith(("/", os.sep)) or os.path.isdir(output))


def mirrored(output_dir: str, paths: list[str]) -> dict[str, str]:
    """Where each user file goes in `output_dir`: the tree of the program's files, from the deepest
    directory holding them all (the main file's, unless an include reaches above it: `../common/x.h`), so
    that the copy builds with the same relative includes and -I flags."""
    reals = {p: os.path.realpath(p) for p in paths}
    root = os.path.commonpath([os.path.dirname(r) for r in reals.values()])
    return {p: os.path.join(output_dir, os.path.relpath(r, root)) for p, r in reals.items()}


def check_mirrored_destinations(destinations: dict[str, str], report: str | None) -> None:
    """Every file `-o OUTDIR/` writes may be written, and none is an input of the program or the report."""
    inputs = list(destinations)
    for source, path in destinations.items():
        for other in inputs:
            if same_file(path, other):
                raise CompileError(f"-o: writing '{path}' would overwrite the input '{other}'; give another directory")
        if report and same_file(path, report):
            raise CompileError(f"--report '{report}' is the same file as the output '{path}'")
        if os.path.isdir(path):
            raise CompileError(f"-o: '{path}' (for '{source}') is a directory")
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise CompileError(f"-o: '{path}' is not writable")
    for other in inputs:
        if report and same_file(report, other):
            raise CompileError(f"--report '{report}' is the same file as the input '{other}'")


@dataclass
class PendingWrites:
    """Files and a directory's files to write together: `commit` writes each to a temporary file beside
    its destination, and only when all of them are written renames them into place."""
    files: list[tuple[str, str]] = field(default_factory=list)          # (path, text); path '-': stdout
    directories: list[tuple[str, str]] = field(default_factory=list)    # (destination, filled temp dir)
    parents: list[str] = field(default_factory=list)                    # directories to make first

    def add_file(self, path: str, text: str, make_parents: bool = False) -> None:
        """`text` keeps bytes that are not UTF-8 as surrogates (as the front end read them)."""
        self.files.append((path, text))
        if make_parents and path != STDOUT:
            self.parents.append(os.path.dirname(os.path.abspath(path)))

    def add_directory(self, destination: str, filled: str) -> None:
        self.directories.append((destination, filled))

    def commit(self) -> None:
        staged: list[tuple[str, str]] = []
        try:
            for parent in self.parents:
                os.makedirs(parent, exist_ok=True)
            for path, text in self.files:
                if path != STDOUT:
                    staged.append((_stage(path, text), path))
            for destination, filled in self.directories:
                os.makedirs(destination, exist_ok=True)
                for name in sorted(os.listdir(filled)):
                    target = os.path.join(destination, name)
                    with open(os.path.join(filled, name), errors="surrogateescape", newline="") as fh:
                        staged.append((_stage(target, fh.read()), target))
        except OSError as err:
            for tmp, _ in staged:
                _remove(tmp)
            raise CompileError(f"cannot write '{err.filename or ''}': {err.strerror or err}") from None
        for tmp, path in staged:
            os.replace(tmp, path)
        for path, text in self.files:
            if path == STDOUT:
                sys.stdout.flush()
                sys.stdout.buffer.write(text.encode("utf-8", errors="surrogateescape"))
                sys.stdout.buffer.flush()
        for _, filled in self.directories:
            shutil.rmtree(filled, ignore_errors=True)


def _stage(path: str, text: str) -> str:
    """`text` in a temporary file beside `path`, with the mode a normal new file gets (mkstemp's is private)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".gpgpu-opt-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    except OSError:
        _remove(tmp)
        raise
    return tmp


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
