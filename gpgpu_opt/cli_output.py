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


@dataclass
class PendingWrites:
    """Files and a directory's files to write together: `commit` writes each to a temporary file beside
    its destination, and only when all of them are written renames them into place."""
    files: list[tuple[str, str]] = field(default_factory=list)          # (path, text); path '-': stdout
    directories: list[tuple[str, str]] = field(default_factory=list)    # (destination, filled temp dir)

    def add_file(self, path: str, text: str) -> None:
        self.files.append((path, text))

    def add_directory(self, destination: str, filled: str) -> None:
        self.directories.append((destination, filled))

    def commit(self) -> None:
        staged: list[tuple[str, str]] = []
        try:
            for path, text in self.files:
                if path != STDOUT:
                    staged.append((_stage(path, text), path))
            for destination, filled in self.directories:
                os.makedirs(destination, exist_ok=True)
                for name in sorted(os.listdir(filled)):
                    target = os.path.join(destination, name)
                    with open(os.path.join(filled, name)) as fh:
                        staged.append((_stage(target, fh.read()), target))
        except OSError as err:
            for tmp, _ in staged:
                _remove(tmp)
            raise CompileError(f"cannot write '{err.filename or ''}': {err.strerror or err}") from None
        for tmp, path in staged:
            os.replace(tmp, path)
        for path, text in self.files:
            if path == STDOUT:
                sys.stdout.write(text)
                sys.stdout.flush()
        for _, filled in self.directories:
            shutil.rmtree(filled, ignore_errors=True)


def _stage(path: str, text: str) -> str:
    """`text` in a temporary file beside `path`, with the mode a normal new file gets (mkstemp's is private)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".gpgpu-opt-")
    try:
        with os.fdopen(fd, "w") as fh:
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
