"""`#line` directives that make nvcc's diagnostics, `__FILE__` and `__LINE__` in a rewritten file point into
the user's file: before every run of lines the rewriting kept, the line it had there; before code the
rewriting wrote (launch helpers, a rewritten kernel), the line of the user's code it stands for. A directive
goes only where one may (not inside a comment, a literal or a continued macro): elsewhere the numbering
runs on from the last one until the next."""
from __future__ import annotations

import difflib

from gpgpu_opt.frontend.scanner import directive_safe_lines


def with_line_directives(original: str, output: str, path: str) -> str:
    """`output` (a rewriting of `original`, the text of the user's file `path`) with its #line directives."""
    before, after = original.split("\n"), output.split("\n")
    safe = directive_safe_lines(output)
    marker = _marker(path)
    out = [marker(1)]
    matcher = difflib.SequenceMatcher(_trivial, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "delete":
            continue
        if j1 > 0 and j1 in safe:
            out.append(marker(i1 + 1))   # kept lines: their own line; written ones: the line they replace
        out.extend(after[j1:j2])
    return "\n".join(out)


def _trivial(line: str) -> bool:
    """Lines that say nothing of where they come from (a brace, a blank line): never where runs are matched,
    or inserted code would be numbered from any `}` of the user's."""
    return line.strip() in ("", "{", "}", "};", "else", "return 0;")


def _marker(path: str):
    spelled = path.replace("\\", "\\\\").replace('"', '\\"')
    return lambda line: f'#line {line} "{spelled}"'
