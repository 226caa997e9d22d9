"""A small FileCheck for the golden outputs: the shapes that matter, stated beside the byte comparison.

A `.checks` file holds directives, one a line (`#` starts a comment line):

    CHECK: __shared__ float tile_A[16][17];
    CHECK-NEXT: __syncthreads();
    CHECK-NOT: __syncthreads(); __syncthreads();

- `CHECK: p` finds p at or after the end of the previous match.
- `CHECK-NEXT: p` finds p on the line right after the one where the previous match ended.
- `CHECK-NOT: p` says p does not occur between the previous match and the next CHECK's match (the end of the
  text when no CHECK follows). Consecutive CHECK-NOTs share that range.

A pattern is literal text, except that `{{re}}` is a Python regular expression and each run of whitespace
matches any run of whitespace, newlines included (so `__syncthreads(); __syncthreads();` finds two barriers
with nothing but whitespace between them, on one line or two). Leading and trailing whitespace is ignored.
Why not the byte comparison alone: it says that something changed, not whether what changed mattered; these
say which lines are the optimization (the padded tile, one barrier, the float4 path) and must survive any
reformatting that the golden files are regenerated for.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

DIRECTIVE = re.compile(r"^\s*(CHECK(?:-NEXT|-NOT)?):(.*)$")
PIECE = re.compile(r"\{\{(.*?)\}\}|(\s+)|([^{\s]+|\{)")


@dataclass(frozen=True)
class Directive:
    kind: str        # "CHECK", "CHECK-NEXT" or "CHECK-NOT"
    pattern: str     # as written, stripped
    line: int        # in the .checks file, for the message
    regex: re.Pattern


class CheckFailure(AssertionError):
    """A directive that does not hold: the message names its line in the .checks file and what was seen."""


def compile_pattern(pattern: str) -> re.Pattern:
    """Literal text with `{{re}}` pieces; a whitespace run matches any whitespace run."""
    parts = []
    for regex, space, literal in PIECE.findall(pattern):
        if space:
            parts.append(r"\s+")
        elif literal:
            parts.append(re.escape(literal))
        else:
            parts.append(f"(?:{regex})")
    return re.compile("".join(parts))


def parse_checks(text: str) -> list[Directive]:
    """The directives of a .checks file, in order; a line that is neither blank, a comment nor a directive
    is an error (a typo such as `CHEK:` must not silently check nothing)."""
    directives = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found = DIRECTIVE.match(line)
        if not found or not found.group(2).strip():
            raise ValueError(f"line {number}: not a directive: {line!r}")
        pattern = found.group(2).strip()
        directives.append(Directive(found.group(1), pattern, number, compile_pattern(pattern)))
    if not any(d.kind != "CHECK-NOT" for d in directives):
        raise ValueError("no CHECK or CHECK-NEXT: a file of CHECK-NOTs alone is too easy to satisfy by accident")
    return directives


def _line_end(text: str, position: int) -> int:
    end = text.find("\n", position)
    return len(text) if end < 0 else end


def _fail(directive: Directive, text: str, position: int, why: str):
    line = text.count("\n", 0, position) + 1
    raise CheckFailure(f"checks line {directive.line}: {directive.kind}: {directive.pattern!r} {why} "
                       f"(searching from output line {line})")


def run_checks(directives: list[Directive], text: str, name: str = "") -> None:
    """Raise CheckFailure at the first directive that does not hold in `text`."""
    position = 0            # where the previous positive match ended
    pending_nots = []       # CHECK-NOTs waiting for the end of their range
    for directive in directives:
        if directive.kind == "CHECK-NOT":
            pending_nots.append(directive)
            continue
        found = _match_positive(directive, text, position)
        _check_nots(pending_nots, text, position, found.start())
        pending_nots = []
        position = found.end()
    _check_nots(pending_nots, text, position, len(text))


def _match_positive(directive: Directive, text: str, position: int) -> re.Match:
    if directive.kind == "CHECK":
        found = directive.regex.search(text, position)
        if found is None:
            _fail(directive, text, position, "not found")
        return found
    next_start = _line_end(text, position) + 1      # CHECK-NEXT: on the following line, nowhere else
    if next_start > len(text):
        _fail(directive, text, position, "has no next line")
    found = directive.regex.search(text, next_start, _line_end(text, next_start))
    if found is None:
        _fail(directive, text, next_start, "is not on the next line")
    return found


def _check_nots(nots: list[Directive], text: str, start: int, end: int) -> None:
    for directive in nots:
        found = directive.regex.search(text, start, end)
        if found is not None:
            _fail(directive, text, found.start(), "found where it must not be")


def check_text(checks: str, text: str) -> None:
    """Parse `checks` and run them over `text`."""
    run_checks(parse_checks(checks), text)
