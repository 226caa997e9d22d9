"""One translation unit optimized for the drop-in: the program it is (the .cu and the user files it includes)
compiled with the command's flags, and every file of it written into a directory of the cache named by the
files' content, mirroring their tree, each file with #line directives back to the user's. The same unit and
flags give the same directory and bytes, so builds that key on them (make, ninja, ccache, remote
execution) see the same input each time."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass

from gpgpu_opt.dropin.lines import with_line_directives


@dataclass(frozen=True)
class OptimizedUnit:
    main: str                       # the optimized copy of the unit, to give nvcc instead of it
    root: str                       # the mirror's root: the user's tree from `source_root` up
    source_root: str                # the deepest directory holding every file of the program
    originals: dict[str, str]       # each file of the mirror (absolute) -> the user's file (absolute)

    def mirror_of(self, directory: str) -> str | None:
        """The mirror of a directory of the user's tree (an include directory), or None outside it."""
        real = os.path.realpath(directory)
        if os.path.commonpath([real, self.source_root]) != self.source_root:
            return None
        return os.path.join(self.root, os.path.relpath(real, self.source_root))


def optimize(path: str, defines: dict[str, str], include_dirs: list[str], target,
             diagnostics) -> tuple[OptimizedUnit | None, object]:
    """The unit optimized into the cache, None where nothing changed (nvcc then compiles it as written), and
    the compile's result. A CompileError says why it cannot be read: the caller passes it to nvcc as written."""
    from gpgpu_opt.frontend import load_program
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import CompileOptions, compile_program

    program = load_program(path, defines, include_dirs, diagnostics, target=target)
    result = compile_program(program, CompileOptions.of(target, parse_pass_list(None), {}), diagnostics)
    if not result.changed_files():
        return None, result
    files = program.source_files()
    reals = {f.path: os.path.realpath(f.path) for f in files}
    source_root = os.path.commonpath([os.path.dirname(r) for r in reals.values()])
    texts = {os.path.relpath(reals[f.path], source_root):
             f.as_written(with_line_directives(f.text, result.outputs[f.path], f.path)) for f in files}
    root = _store(texts)
    originals = {os.path.join(root, relative): os.path.join(source_root, relative) for relative in texts}
    main = os.path.join(root, os.path.relpath(reals[files[0].path], source_root))
    return OptimizedUnit(main, root, source_root, originals), result


def cache_root() -> str:
    """Where optimized units are kept: $GPGPU_OPT_CACHE/nvcc, else the user's cache directory."""
    base = os.environ.get("GPGPU_OPT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gpgpu-opt")
    return os.path.join(base, "nvcc")


def _store(texts: dict[str, str]) -> str:
    """The files under cache/<sha256 of them all>: written once, into a temporary directory renamed into place
    (a parallel build that loses the race uses the winner's copy, the same bytes)."""
    key = hashlib.sha256(json.dumps(sorted(texts.items())).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    parent = cache_root()
    root = os.path.join(parent, key)
    if os.path.isdir(root):
        return root
    os.makedirs(parent, exist_ok=True)
    partial = tempfile.mkdtemp(dir=parent, prefix=".partial-")
    for relative, text in texts.items():
        destination = os.path.join(partial, relative)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        with open(destination, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
            fh.write(text)
    try:
        os.rename(partial, root)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return root
