"""Editing a kernel's parameter list in the user's own text, for kernels whose body no pass changed: the
output keeps their macros, typedef names, comments and layout, and only gains `const` and `__restrict__`."""
from __future__ import annotations

import re

from gpgpu_opt.frontend import scanner
from gpgpu_opt.kernel import Kernel, Param


def requalified(source: str, kernel: Kernel) -> str:
    """`source` (a kernel definition as the user wrote it) with each pointer parameter qualified as in
    `kernel`'s signature."""
    if not kernel.arrays:
        return source
    tokens = scanner.tokenize(source)
    open_at = next(k for k, t in enumerate(tokens) if t.text == "(" and k and tokens[k - 1].text == kernel.name)
    close_at = _matching(tokens, open_at)
    start, end = tokens[open_at].end, tokens[close_at].start
    pieces = _split_top_level(source[start:end])
    params = kernel.params
    if len(pieces) != len(params):
        raise ValueError(f"'{kernel.name}': {len(pieces)} parameters as written, {len(params)} parsed")
    edited = [_qualify(piece, p) for piece, p in zip(pieces, params)]
    return source[:start] + ",".join(edited) + source[end:]


def _qualify(text: str, param: Param) -> str:
    if not param.is_pointer:
        return text
    if param.is_const and not re.search(r"\bconst\b", text.split("*")[0]):
        leading = text[:len(text) - len(text.lstrip())]
        text = f"{leading}const {text.lstrip()}"
    if param.is_restrict and not re.search(r"\b__restrict(__)?\b", text):
        star = text.rindex("*")
        text = text[:star + 1] + "__restrict__ " + text[star + 1:].lstrip()
    return text


def _matching(tokens: list[scanner.Token], k: int) -> int:
    depth = 0
    for j in range(k, len(tokens)):
        depth += {"(": 1, ")": -1}.get(tokens[j].text, 0)
        if depth == 0:
            return j
    raise ValueError("unbalanced parameter list")


def _split_top_level(text: str) -> list[str]:
    pieces, depth, current = [], 0, ""
    for ch in text:
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            pieces.append(current)
            current = ""
        else:
            current += ch
    pieces.append(current)
    return [p for p in pieces if p.strip()] if any(p.strip() for p in pieces) else []
