"""Codemod: a pass's reads of the old catch-all PassContext become reads of its three parts.

    ctx.target            -> ctx.options.target        (and pass_names -> options.passes, requested -> options.named)
    ctx.naive_block       -> ctx.facts.naive_block     (every per-kernel fact)
    ctx.skip(...)         -> ctx.log.skip(...)         (applied, skip, decisions, pass_name, diagnostics)

A receiver is a PassContext where it is spelled `ctx`, `self.ctx`, `info.ctx` or `<x>.context` (a
KernelResult's). A stand-in context built with SimpleNamespace(<old name>=...) gets the part around it.
The rewrite is textual and idempotent (a rewritten read no longer matches), so it can be run again after
merging a branch that still reads the old names:

    python tools/context_codemod.py [--check] [paths...]      (default: gpgpu_opt tests bench)

--check lists what would change and exits 1 if anything would.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

#: old attribute -> (part, new attribute)
RENAMES: dict[str, tuple[str, str]] = {
    "target": ("options", "target"),
    "pass_names": ("options", "passes"),
    "requested": ("options", "named"),
    "merge_request": ("options", "merge_request"),
    "vector_width": ("options", "vector_width"),
    **{name: ("facts", name) for name in (
        "naive_block", "naive_block_known", "bindings", "device_functions", "aliasing", "global_space",
        "launched_in_file", "launch_covers", "grid_rounds_down", "alignment", "launch_block",
        "launch_block_where", "stated_space_tiled_by")},
    **{name: ("log", name) for name in ("applied", "skip", "decisions", "pass_name", "diagnostics")},
}

_NAMES = "|".join(sorted(RENAMES, key=len, reverse=True))
#: A PassContext receiver followed by an old attribute name (a whole word: naive_block, not naive_block_known).
_READ = re.compile(rf"(?P<receiver>(?<![\w.])(?:(?:self|info)\.ctx|ctx)|\.context)\.(?P<name>{_NAMES})\b")
#: A stand-in context: SimpleNamespace(target=None) -> SimpleNamespace(options=SimpleNamespace(target=None)).
_STAND_IN = re.compile(rf"(?<!=)SimpleNamespace\((?P<name>{_NAMES})=(?P<value>[^()]*(?:\([^()]*\))?[^()]*)\)")
#: Files that must not be rewritten: the context itself (it defines the parts) and this script.
_SKIP = ("gpgpu_opt/passes/context.py", "tools/context_codemod.py")


def rewrite(text: str) -> str:
    def read(m: re.Match) -> str:
        part, name = RENAMES[m.group("name")]
        return f"{m.group('receiver')}.{part}.{name}"

    def stand_in(m: re.Match) -> str:
        part, name = RENAMES[m.group("name")]
        return f"SimpleNamespace({part}=SimpleNamespace({name}={m.group('value')}))"
    return _STAND_IN.sub(stand_in, _READ.sub(read, text))


def python_files(paths: list[str]) -> list[Path]:
    files = []
    for path in map(Path, paths):
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [f for f in files if not any(f.as_posix().endswith(skip) for skip in _SKIP) and ".venv" not in f.parts]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"] or ["gpgpu_opt", "tests", "bench"]
    changed = []
    for file in python_files(paths):
        text = file.read_text()
        new = rewrite(text)
        if new != text:
            changed.append(file)
            if not check:
                file.write_text(new)
    for file in changed:
        print(("would rewrite " if check else "rewrote ") + str(file))
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
