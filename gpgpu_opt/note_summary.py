"""How much a command says about what it did: every note under -v; by default, warnings in full and one line
per kernel (what was done to it, or the first reason why not); under -q, warnings only. The --report keeps
every note whatever is printed. (The command line and the nvcc drop-in both print this way.)"""
from __future__ import annotations

import sys
from typing import Protocol

from gpgpu_opt.diagnostics import Diagnostics, Location, Note


class Verbosity(Protocol):
    quiet: bool
    verbose: bool
    warnings_are_errors: bool

#: Decisions that say nothing a user acts on where a kernel is left as written (a target that does not camp).
_ROUTINE = ("partition",)


def print_notes(diagnostics: Diagnostics, verbosity: Verbosity, result=None) -> None:
    """The notes `diagnostics` collected (held back, not echoed), as much as `verbosity` asks; `result`: the
    compile's result, whose kernels are summarized."""
    notes = diagnostics.notes
    if verbosity.verbose:
        _emit(notes)
        return
    warnings = [n for n in notes if n.severity == "warning"]
    if verbosity.quiet:
        _emit(warnings)
        return
    _emit(_summary(notes, result))


def fail_on_warnings(diagnostics: Diagnostics, verbosity: Verbosity) -> bool:
    """-Werror: each warning printed as an error; True when there was one (the command then exits 1)."""
    warnings = [n for n in diagnostics.notes if n.severity == "warning"]
    if not verbosity.warnings_are_errors or not warnings:
        return False
    for w in warnings:
        prefix = f"{w.location}: " if w.location else ""
        print(f"{prefix}error: {w.message} [-Werror]", file=sys.stderr)
    return True


def _summary(notes: list[Note], result) -> list[Note]:
    """Warnings, notes about no kernel, and per kernel one line: its compile's outcome, else its first note."""
    out, seen = [], set()
    outcomes = {r.naive.name: r for r in result.kernels} if result is not None else {}
    summarized = 0
    for note in notes:
        if note.severity == "warning" or note.kernel is None:
            out.append(note)
            continue
        if note.kernel in seen:
            summarized += 1
            continue
        seen.add(note.kernel)
        kernel = outcomes.get(note.kernel)
        out.append(_outcome(kernel, note.location) if kernel is not None else note)
    for name, kernel in outcomes.items():   # a kernel that had no note of its own
        if name not in seen:
            out.append(_outcome(kernel, None))
    if summarized:
        out.append(Note(f"{summarized} more note{'s' if summarized > 1 else ''}: -v prints "
                        f"{'them' if summarized > 1 else 'it'}, --report keeps {'them' if summarized > 1 else 'it'}"))
    return out


def _outcome(kernel, where: Location | None) -> Note:
    """One line for a compiled kernel: the passes that changed it and its launch, or why it is as written."""
    name = kernel.naive.name
    decisions = kernel.context.log.as_dicts()
    if kernel.transformed:
        applied = list(dict.fromkeys(d["pass"] for d in decisions if d["action"] == "applied"))
        launch = kernel.optimized.launch
        shape = f"; blocks of {launch.block[0]}x{launch.block[1]} threads, each covering " \
                f"{launch.outputs_per_block[0]}x{launch.outputs_per_block[1]} naive threads" if launch else ""
        checked = f"; checked: {kernel.validation.status}" if kernel.validation is not None else ""
        return Note(f"'{name}': optimized ({', '.join(applied) or 'rewritten'}){shape}{checked}", where, name)
    reasons = [d for d in decisions if d["action"] != "applied"]
    first = next((d for d in reasons if d["pass"] not in _ROUTINE), reasons[0] if reasons else None)
    why = f": {first['pass']}: {first['subject']}: {first['reason']}" if first else ""
    return Note(f"'{name}': left as written{why}", where, name)


def _emit(notes: list[Note]) -> None:
    for note in notes:
        print(str(note), file=sys.stderr)

