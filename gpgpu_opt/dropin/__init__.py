"""`gpgpu-opt nvcc ARGS...`: nvcc with each .cu translation unit it compiles optimized first.

The command line is nvcc's, kept as it is: each unit's path is swapped for its optimized copy (dropin/units.py:
the program's files mirrored in the cache, with #line directives back to the user's), an include directory
that holds a rewritten header gets its mirror in front of it, and the real nvcc runs; its exit status is the
command's. A unit gpgpu-opt cannot read (invalid CUDA, which nvcc then reports as it would, or code it does not
support) or cannot improve goes to nvcc as written, and so does every command that compiles nothing it
optimizes (-E, -M, linking, --version...). A dependency file (-MD, -MF) names the user's files, not the
copies. Nothing gpgpu-opt finds stops a build: an internal error is a warning, and the unit is compiled as
written.

Environment: GPGPU_OPT_NVCC_DISABLE=1 passes every command through; GPGPU_OPT_VERBOSE=1 prints one line per
kernel (what was done, or why not), =2 every note; GPGPU_OPT_CACHE the cache directory."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from gpgpu_opt.dropin.arguments import NvccCommand, parse

#: Compute capabilities the targets are made for: sm_90 and later, sm_80 for the rest nvcc builds for.
_TARGET_FOR = ((90, "sm_90"), (75, "sm_80"))
#: What nvcc 13 builds for without -arch.
_NVCC_DEFAULT_ARCH = 75


def drop_in(nvcc: str | None, args: list[str]) -> int:
    """Run `nvcc args` with its units optimized; nvcc's exit status."""
    compiler = nvcc or _find_nvcc()
    if compiler is None:
        return 2
    command = parse(args)
    if os.environ.get("GPGPU_OPT_NVCC_DISABLE", "") not in ("", "0") or not command.compiles:
        return _run(compiler, args)
    target = _target(command)
    if target is None:
        _say(1, f"gpgpu-opt: compute capability {min(command.architectures)} is older than gpgpu-opt's targets; "
                "compiled as written")
        return _run(compiler, args)
    new_args, originals = list(args), {}
    inserted: dict[int, list[str]] = {}
    for unit in command.units:
        optimized = _optimized(unit.path, command, target)
        if optimized is None:
            continue
        mirrors = [(index, mirror) for index, directory in command.include_options
                   for mirror in [optimized.mirror_of(directory)] if mirror is not None]
        if mirrors and len(command.units) > 1:
            # one nvcc command compiles every unit with one -I list: another unit would find this one's
            # rewritten headers, made for this unit's launches
            _say(1, f"gpgpu-opt: {unit.path}: compiled as written: its rewritten headers are found through an "
                    "include directory the command's other units search too")
            continue
        new_args[unit.index] = optimized.main
        originals.update(optimized.originals)
        originals[optimized.main] = unit.path
        for index, mirror in mirrors:
            inserted.setdefault(index, []).append(f"-I{mirror}")
    final = []
    for index, arg in enumerate(new_args):
        final += inserted.get(index, [])
        final.append(arg)
    final += inserted.get(len(new_args), [])        # in front of what NVCC_APPEND_FLAGS adds
    status = _run(compiler, final)
    if status == 0 and originals:
        _restore_depfile(command, originals)
    return status


def _optimized(path: str, command: NvccCommand, target):
    """The unit optimized, or None (as written: nothing to gain, or what gpgpu-opt cannot read)."""
    from gpgpu_opt.diagnostics import CompileError, Diagnostics
    from gpgpu_opt.dropin.units import optimize

    diagnostics = Diagnostics(quiet=True)
    try:
        optimized, result = optimize(path, command.defines, command.include_dirs, target, diagnostics)
    except CompileError as err:
        _say(1, f"gpgpu-opt: {path}: compiled as written: {err}")
        return None
    except Exception as err:  # noqa: BLE001 - a bug of gpgpu-opt never stops the user's build
        print(f"{path}: warning: internal error in gpgpu-opt ({type(err).__name__}: {err}); compiled as written",
              file=sys.stderr)
        return None
    from gpgpu_opt.note_summary import print_notes

    level = _verbosity()
    print_notes(diagnostics, _Verbosity(quiet=level == 0, verbose=level >= 2), result)
    if optimized is not None:
        _record(optimized, path)
    return optimized


class _Verbosity:
    """GPGPU_OPT_VERBOSE: 0 (a build's default) warnings only, 1 one line per kernel, 2 every note."""
    warnings_are_errors = False

    def __init__(self, quiet: bool, verbose: bool):
        self.quiet, self.verbose = quiet, verbose


def _record(optimized, path: str) -> None:
    """GPGPU_OPT_NVCC_MANIFEST=FILE: a line per file nvcc compiled in place of the user's, `copy<TAB>original`
    (which files a build replaced; the GPU batch puts them in place of the originals, bench/dropin_gpu.sh)."""
    manifest = os.environ.get("GPGPU_OPT_NVCC_MANIFEST")
    if not manifest:
        return
    with open(manifest, "a", encoding="utf-8", errors="surrogateescape") as fh:
        for copy, original in sorted(optimized.originals.items()):
            fh.write(f"{copy}\t{original}\n")


def _target(command: NvccCommand):
    from gpgpu_opt.targets import get_target

    lowest = min(command.architectures) if command.architectures else _NVCC_DEFAULT_ARCH
    for capability, name in _TARGET_FOR:
        if lowest >= capability:
            return get_target(name)
    return None


def _restore_depfile(command: NvccCommand, originals: dict[str, str]) -> None:
    """The dependency file nvcc wrote names the copies: make it name the user's files."""
    path = command.depfile
    if path is None and command.writes_depfile:
        output = command.output or os.path.splitext(os.path.basename(command.units[0].path))[0] + ".o"
        path = os.path.splitext(output)[0] + ".d"
    if path is None or not os.path.isfile(path):
        return
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        text = fh.read()
    copies = {os.path.normpath(copy): original for copy, original in originals.items()}

    def original_of(match: re.Match) -> str:
        spelled = match.group(0)
        original = copies.get(os.path.normpath(os.path.abspath(spelled.replace("\\ ", " "))))
        return spelled if original is None else original.replace(" ", "\\ ")

    text = re.sub(r"(?:[^\s\\]|\\ )+", original_of, text)   # each path; `\ ` escapes a space in one
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)


def _run(compiler: str, args: list[str]) -> int:
    try:
        return subprocess.run([compiler, *args]).returncode
    except OSError as err:
        print(f"gpgpu-opt: error: cannot run {compiler}: {err.strerror or err}", file=sys.stderr)
        return 2


def _find_nvcc() -> str | None:
    from gpgpu_opt.toolchain import ToolchainError, find_nvcc

    try:
        return find_nvcc()
    except ToolchainError as err:
        print(f"gpgpu-opt: error: {err}", file=sys.stderr)
        return None


def _verbosity() -> int:
    try:
        return int(os.environ.get("GPGPU_OPT_VERBOSE", "0") or 0)
    except ValueError:
        return 1


def _say(level: int, message: str) -> None:
    if _verbosity() >= level:
        print(message, file=sys.stderr)
