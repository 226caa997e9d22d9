"""Chained assignments to locals split into statements (part of normalize): `lo = mid = src[c];` becomes
`mid = src[c]; lo = mid;`, the one-effect-per-statement form widen and the hoisting of loads read.

Exact where the inner target is a plain local (an `ID`, not volatile): the value of `mid = e` is `mid`'s
value after the assignment, which `lo = mid;` reads right after it. Only `=` chains that are whole
statements, at any depth (`a = b = c = e;`)."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import walk


def split_chained_assignments(body: c_ast.Compound, volatile: set[str]) -> None:
    """Rewrites every chain in `body` in place; `volatile`: locals declared volatile (left as written)."""
    for block in [n for n in walk(body) if isinstance(n, c_ast.Compound)]:
        items = []
        for s in block.block_items or []:
            items.extend(_split(s, volatile))
        block.block_items = items


def _split(stmt: c_ast.Node, volatile: set[str]) -> list[c_ast.Node]:
    if not (isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and isinstance(stmt.rvalue, c_ast.Assignment)
            and stmt.rvalue.op == "=" and isinstance(stmt.rvalue.lvalue, c_ast.ID)
            and stmt.rvalue.lvalue.name not in volatile):
        return [stmt]
    inner = stmt.rvalue
    return _split(inner, volatile) + [c_ast.Assignment("=", stmt.lvalue, c_ast.ID(inner.lvalue.name, inner.coord),
                                                       stmt.coord)]


__all__ = ["split_chained_assignments"]
