"""Long lines of printed CUDA wrapped as a person wraps them: code after a comma or before `&&`, `||`, `?`
and `:`, at the shallowest depth of brackets that fits, the rest aligned after the bracket it is inside; a
`//` comment at a space, as more `//` lines. Strings, preprocessor lines and the `// gpgpu_opt launch` lines
that tools read back stay whole."""
from __future__ import annotations

from dataclasses import dataclass

#: Lines are wrapped past this many characters.
LIMIT = 110
_OPERATORS = (" && ", " || ", " ? ", " : ")


def wrap_lines(text: str, limit: int = LIMIT) -> str:
    return "\n".join(piece for line in text.split("\n") for piece in _wrap(line, limit))


@dataclass
class _Break:
    at: int             # where the next line starts, in the line being cut
    depth: int          # brackets open there
    operator: bool      # before an operator (a comma is preferred at the same depth)
    opens: list[int]    # the columns of the brackets open there


def _wrap(line: str, limit: int) -> list[str]:
    stripped = line.lstrip(" ")
    if len(line) <= limit or stripped.startswith(("#", "// gpgpu_opt launch")):
        return [line]
    if stripped.startswith("//"):
        return _wrap_comment(line, limit)
    base = len(line) - len(stripped)
    out, opens = [], []
    while len(line) > limit:
        cut = _cut(line, limit, opens, base)
        if cut is None:
            break
        indent = cut.opens[-1] + 1 if cut.opens and cut.opens[-1] + 1 < limit - 40 else base + 8
        rest = line[cut.at:].lstrip(" ")
        out.append(line[:cut.at].rstrip())
        opens = cut.opens if cut.opens and cut.opens[-1] + 1 < limit - 40 else []
        line = " " * indent + rest
    return out + [line]


def _cut(line: str, limit: int, inherited: list[int], base: int) -> _Break | None:
    """Where to break `line`: the last break before `limit` at the shallowest depth (else the first one
    after it), never in a string. `inherited`: the columns of the brackets open when the line starts."""
    opens = list(inherited)
    breaks: list[_Break] = []
    quote = None
    k = len(line) - len(line.lstrip(" "))
    while k < len(line):
        ch = line[k]
        if quote:
            if ch == "\\":
                k += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            opens.append(k)
        elif ch in ")]}" and opens:
            opens.pop()
        elif ch == "," and line[k + 1:k + 2] == " ":
            breaks.append(_Break(k + 2, len(opens), False, list(opens)))
        elif any(line.startswith(op, k) for op in _OPERATORS):
            breaks.append(_Break(k + 1, len(opens), True, list(opens)))
        k += 1
    fitting = [b for b in breaks if b.at <= limit and b.at > base + 20]
    if fitting:
        shallowest = min((b.depth, b.operator) for b in fitting)
        return [b for b in fitting if (b.depth, b.operator) == shallowest][-1]
    later = [b for b in breaks if b.at > base + 20]
    return later[0] if later else None


def _wrap_comment(line: str, limit: int) -> list[str]:
    indent = len(line) - len(line.lstrip(" "))
    prefix = " " * indent + "// "
    words = line.strip()[2:].strip().split(" ")
    out, current = [], ""
    for word in words:
        if current and len(prefix) + len(current) + 1 + len(word) > limit:
            out.append(prefix + current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return out + [prefix + current]


__all__ = ["LIMIT", "wrap_lines"]
