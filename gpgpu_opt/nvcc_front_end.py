"""nvcc's own verdict on a source file: whether its front end accepts it, and its errors as diagnostics.

gpgpu-opt reads kernels with a C parser and a model of CUDA's environment, so a kernel it cannot read may be
valid CUDA it does not understand (C++, a name from a header it does not model) or invalid CUDA (a missing
`;`, an undeclared name). Only nvcc can tell them apart; this module asks it. `nvcc -cuda` runs the
preprocessor and the front end on host and device code (`-fdevice-syntax-only`: no device code generation,
about a second), and its errors (`file(12): error: ...`, the source line, a caret) become `file:12:9` diagnostics.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass

from gpgpu_opt.diagnostics import Location
from gpgpu_opt.nvcc import compiles_for, nvcc_available
from gpgpu_opt.toolchain import find_nvcc

#: `file(line): error: message` (EDG's form) and `file:line:col: fatal error: message` (the preprocessor's).
_EDG_ERROR = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<message>.*)$")
_GCC_ERROR = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: (?P<message>.*)$")
#: Device compilation ends after the front end (no ptxas: an extern __device__ function is no error here).
_SYNTAX_ONLY = "-fdevice-syntax-only"
#: What nvcc echoes of the offending line: two spaces, then the line as written.
_ECHO_INDENT = 2


@dataclass(frozen=True)
class NvccError:
    location: Location
    message: str

    def __str__(self) -> str:
        return f"{self.location}: error: {self.message}"


def front_end_errors(path: str, defines: dict[str, str], include_dirs: list[str],
                     arch: str) -> list[NvccError] | None:
    """The errors nvcc's front end finds in the file at `path` compiled with these -D and -I for `arch`
    (empty: nvcc accepts it); None where nvcc is not installed or gives no verdict (a timeout)."""
    if not nvcc_available() or not os.path.isfile(path):
        return None
    stat = os.stat(path)
    return _errors(os.path.abspath(path), path, stat.st_mtime_ns, stat.st_size,
                   tuple(sorted(defines.items())), tuple(include_dirs), arch)


@functools.lru_cache(maxsize=64)
def _errors(absolute: str, spelled: str, _mtime: int, _size: int, defines: tuple, include_dirs: tuple,
            arch: str) -> list[NvccError] | None:
    """One nvcc run per file version and flags (`_mtime`, `_size`: a changed file is asked again)."""
    flags = [f"-D{name}={value}" for name, value in defines] + [f"-I{d}" for d in include_dirs]
    if compiles_for(arch):
        flags.append(f"-arch={arch}")
    command = [find_nvcc(), "-x", "cu", "-cuda", _SYNTAX_ONLY, *flags, spelled, "-o", os.devnull]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)
        if proc.returncode != 0 and _SYNTAX_ONLY in proc.stderr and "nknown option" in proc.stderr:
            command.remove(_SYNTAX_ONLY)   # an nvcc older than the option: the whole device compilation
            proc = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return []
    return parse_errors(proc.stdout + proc.stderr)


def parse_errors(log: str) -> list[NvccError]:
    """nvcc's error lines with their places; the column from the caret under the echoed line (1 without)."""
    lines = log.splitlines()
    errors = []
    for i, line in enumerate(lines):
        gcc = _GCC_ERROR.match(line)
        if gcc:
            errors.append(NvccError(Location(gcc["file"], int(gcc["line"]), int(gcc["col"])), gcc["message"]))
            continue
        edg = _EDG_ERROR.match(line)
        if edg:
            column = _caret_column(lines[i + 1:i + 3], _source_line(edg["file"], int(edg["line"])))
            errors.append(NvccError(Location(edg["file"], int(edg["line"]), column), edg["message"]))
    return errors


def _caret_column(following: list[str], written: str | None) -> int:
    """EDG echoes the line and puts a caret under the place. The line it echoes has its own keywords
    expanded (`__device__` is `__attribute__((device))`), so the place is found in the line as written by
    what follows the caret (or, failing that, what precedes it); column 1 where neither matches."""
    if len(following) != 2 or following[1].strip() != "^":
        return 1
    echoed, caret = following[0][_ECHO_INDENT:], following[1].index("^") - _ECHO_INDENT
    if written is None:
        return max(1, caret + 1)
    after, before = echoed[caret:], echoed[:caret]
    if after and written.endswith(after):
        return len(written) - len(after) + 1
    if written.startswith(before):
        return caret + 1
    return 1


def _source_line(path: str, line: int) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            for number, text in enumerate(fh, 1):
                if number == line:
                    return text.rstrip("\r\n")
    except OSError:
        pass
    return None
