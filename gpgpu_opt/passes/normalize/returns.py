"""A `return;` that is the last thing a kernel does (`...; return; }`, or the last statement of a branch that
ends the kernel) ends the thread exactly as reaching the closing brace does: dropped, so that the passes
which refuse a kernel that returns from inside its statements see the same kernel without it."""
from __future__ import annotations

from pycparser import c_ast


def drop_trailing_returns(body: c_ast.Compound) -> None:
    body.block_items = _without_trailing_returns(body.block_items or [])


def _without_trailing_returns(items: list) -> list:
    items = list(items)
    while items:
        last = _tail(items[-1])
        if last is not None:
            items[-1] = last
            break
        items.pop()
    return items


def _tail(stmt: c_ast.Node) -> c_ast.Node | None:
    """`stmt`, the last statement the kernel runs, with the returns that end it dropped; None when
    nothing is left of it."""
    if isinstance(stmt, c_ast.Return) and stmt.expr is None:
        return None
    if isinstance(stmt, c_ast.Compound):
        stmt.block_items = _without_trailing_returns(stmt.block_items or [])
    elif isinstance(stmt, c_ast.If):
        stmt.iftrue = _tail(stmt.iftrue) or c_ast.Compound([], stmt.coord)
        stmt.iffalse = _tail(stmt.iffalse) if stmt.iffalse is not None else None
    return stmt


__all__ = ["drop_trailing_returns"]
