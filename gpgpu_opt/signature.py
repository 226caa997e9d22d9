"""Editing a kernel's parameter list in the user's own text, for kernels no pass transformed: the
output keeps their macros, typedef names, comments and layout, and only gains `const` and `__restrict__`."""
from __future__ import annotations

import re

from gpgpu_opt.frontend import scanner
from gpgpu_opt.host_expr import split_top_level
from gpgpu_opt.kernel import Kernel, Param


def requalified(source: str, kernel: Kernel) -> str:
    """`source` (a kernel definition as the user wrote it) with each pointer parameter qualified as in
    `kernel`'s signature."""
    if not kernel.arrays:
        return source
    tokens = scanner.tokenize(source)
    open_at = next(k for k, t in enumerate(tokens) if t.text == "(" and k and tokens[k - 1].text == kernel.name)
    close_at = scanner.matching(tokens, open_at, "(", ")")
    if close_at == -1:
        raise ValueError("unbalanced parameter list")
    start, end = tokens[open_at].end, tokens[close_at].start
    written = source[start:end]
    pieces = [p for p in split_top_level(written) if p]
    params = kernel.params
    if len(pieces) != len(params):
        raise ValueError(f"'{kernel.name}': {len(pieces)} parameters as written, {len(params)} parsed")
    edited, cursor = "", 0
    for piece, param in zip(pieces, params):  # in place, so the user's spacing and line breaks stay
        at = written.index(piece, cursor)
        edited += written[cursor:at] + qualify(piece, param)
        cursor = at + len(piece)
    return source[:start] + edited + written[cursor:] + source[end:]


def qualify(text: str, param: Param) -> str:
    """One parameter as written (`float *a`, or unnamed `float *`), with `param`'s const/__restrict__."""
    if not param.is_pointer:
        return text
    if param.is_const and not re.search(r"\bconst\b", text.split("*")[0]):
        text = f"const {text}"
    if param.is_restrict and not re.search(r"\b__restrict(__)?\b", text):
        star = text.rindex("*")
        text = text[:star + 1] + "__restrict__ " + text[star + 1:].lstrip()
    return text
