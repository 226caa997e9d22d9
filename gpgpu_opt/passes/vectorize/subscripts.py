"""Subscripts through locals of x (widen.py): `dst[c + k * xy]` with `int c = i + j * nx;`, and edge clamps
(`int N = (j == 0) ? c : c - nx;`, `int W = (i == 0) ? c : c - 1;`), as a 3-D stencil marching z writes them.

- A vector access reads its lanes' elements from where lane 0's starts: its subscript with the lane locals
  written out by their one definition (`i + j * nx + k * xy`), less the x index, is the row its vectors
  start at (`dst + j * nx + k * xy`), which reads no lane local (the run-time alignment tests read it
  before the lanes exist).
- A clamp whose condition does not depend on x (`j == 0`: the V lanes share y) takes the same piece in
  every lane: the lanes' elements stay consecutive, one vector. One whose condition does (`i == 0`) is read
  lane by lane, each lane its own clamped element (a scalar load of the naive thread's subscript): the
  lanes of a group at the edge do not read consecutive elements. Such a read is a neighbour of the lane's
  own element, not an indirect load: it is not a gather (vectorize.gather_body).
"""
from __future__ import annotations

import copy

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, TID

from gpgpu_opt.ast_util import call_name, ids_in, transform, walk

_MIN_MAX = {"min", "max", "umin", "umax"}


def definitions(stmts: list, lanes: set[str], assigned: set[str], counts) -> dict[str, c_ast.Node]:
    """name -> initializer of each lane local declared once with a value at the top level of `stmts` and
    never assigned, whose value reads no memory, no call and no name the kernel assigns: the same value
    wherever it is in scope, which its initializer written there gives."""
    return {s.name: s.init for s in stmts if isinstance(s, c_ast.Decl) and s.name in lanes and s.init is not None
            and s.name not in assigned and counts[s.name] == 1 and not ids_in(s.init) & assigned
            and not any(isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall, c_ast.Assignment, c_ast.UnaryOp))
                        and not (isinstance(n, c_ast.UnaryOp) and n.op == "-") for n in walk(s.init))}


def written_out(subscript: c_ast.Node, lanes: set[str], defs: dict[str, c_ast.Node]) -> c_ast.Node | None:
    """`subscript` with every lane local replaced by its definition (recursively); None where one has none."""
    if not ids_in(subscript) & lanes:
        return subscript

    def replace(n):
        if isinstance(n, c_ast.ID) and n.name in lanes:
            if n.name not in defs:
                raise KeyError(n.name)
            return written_out(copy.deepcopy(defs[n.name]), lanes, defs)
        return None
    try:
        return transform(copy.deepcopy(subscript), replace, skip_member_names=True)
    except KeyError:
        return None


def clamped_along_x(subscript: c_ast.Node, idx: str) -> bool:
    """Whether a clamp in `subscript` (written out) picks its piece by x: a conditional expression whose
    condition reads x, or a min/max of which an argument does."""
    for n in walk(subscript):
        if isinstance(n, c_ast.TernaryOp) and idx in ids_in(n.cond):
            return True
        if call_name(n) in _MIN_MAX and idx in ids_in(n):
            return True
    return False


def without_index(expr: c_ast.Node, idx: str) -> c_ast.Node | None:
    """`expr - idx` written without idx (`j * nx + k * xy` for `i + j * nx + k * xy`, each branch of a
    conditional expression on something else than idx alike), or None where idx is not one term of it."""
    if isinstance(expr, c_ast.ID) and expr.name == idx:
        return c_ast.Constant("int", "0")
    if isinstance(expr, c_ast.BinaryOp) and expr.op in ("+", "-"):
        left_has, right_has = idx in ids_in(expr.left), idx in ids_in(expr.right)
        if left_has and not right_has:
            left = without_index(expr.left, idx)
            if left is None:
                return None
            if _is_zero(left):
                return expr.right if expr.op == "+" else c_ast.UnaryOp("-", expr.right)
            return c_ast.BinaryOp(expr.op, left, expr.right)
        if right_has and not left_has and expr.op == "+":
            right = without_index(expr.right, idx)
            if right is None:
                return None
            return expr.left if _is_zero(right) else c_ast.BinaryOp("+", expr.left, right)
        return None
    if isinstance(expr, c_ast.TernaryOp) and idx not in ids_in(expr.cond):
        a, b = without_index(expr.iftrue, idx), without_index(expr.iffalse, idx)
        return None if a is None or b is None else c_ast.TernaryOp(expr.cond, a, b)
    return None


def clamps_in(subscript: c_ast.Node) -> frozenset:
    """The texts of the clamps (conditional expressions, min/max) in a subscript."""
    from gpgpu_opt.rewriting.cbuild import text
    return frozenset(text(n) for n in walk(subscript)
                     if isinstance(n, c_ast.TernaryOp) or call_name(n) in _MIN_MAX)


def zero_folded(expr: c_ast.Node) -> c_ast.Node:
    """`expr` without its zero terms: `j * nx + 0 * xy` is `j * nx` (a loop's first row, its iterator 0)."""
    def fold(n):
        if isinstance(n, c_ast.BinaryOp) and n.op == "*" and (_is_zero(n.left) or _is_zero(n.right)):
            return c_ast.Constant("int", "0")
        if isinstance(n, c_ast.BinaryOp) and n.op in ("+", "-") and _is_zero(n.right):
            return n.left
        if isinstance(n, c_ast.BinaryOp) and n.op == "+" and _is_zero(n.left):
            return n.right
        return None
    return transform(expr, fold)


def _is_zero(n: c_ast.Node) -> bool:
    return isinstance(n, c_ast.Constant) and n.value == "0"


def hoistable_uniform(stmts: list, lanes: set[str], idx: str, assigned: set[str], known: set[str]) -> list:
    """The declarations among `stmts` that may move ahead of the x-dependent ones (in order): a value of
    integer arithmetic that reads no x, no memory and no call, only names never assigned and already
    declared ahead (`known`, which grows): `int xy = nx * ny;`, which the alignment tests read."""
    out = []
    for s in stmts:
        if not (isinstance(s, c_ast.Decl) and s.init is not None and s.name not in lanes and s.name not in assigned):
            continue
        names = ids_in(s.init)
        if idx in names or names & lanes or names & assigned or not names <= known \
                or any(isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall, c_ast.Assignment)) for n in walk(s.init)):
            continue
        out.append(s)
        known.add(s.name)
    return out


def clamped(info, a, node: c_ast.ArrayRef, idx: str, lane_defs) -> c_ast.Node | None:
    """The subscript of an edge-clamped read written out where the V lanes take the same
    piece and every piece runs along x one element per lane (a vector), else None (read lane by lane)."""
    vectors, defs = lane_defs
    whole = written_out(node.subscript, vectors, defs)
    if whole is None or clamped_along_x(whole, idx) or a.analysis_index is None \
            or (id(node), "write") in info.by_node or without_index(whole, idx) is None:
        return None
    x = BID["x"] * BDIM["x"] + TID["x"]
    f = sympy.expand(a.analysis_index - x)
    return whole if {TID["x"], BID["x"]} & a.analysis_index.free_symbols and \
        not {TID["x"], BID["x"]} & f.free_symbols else None


def index_of(a) -> sympy.Expr | None:
    """An access's index, or the interior piece of an edge clamp (the same step along x in every piece
    where widen reads it as a vector: clamped)."""
    return a.index if a.index is not None or a.kind != "clamped" else a.analysis_index


def without_unused(stmts: list, vectors: set[str]) -> list:
    """The vector path without the declarations of `vectors` (lane locals written out in a vector's row
    start) it no longer reads (`int4 N`, whose every use became a row start)."""
    while True:
        used = set().union(*(ids_in(s) for s in stmts)) if stmts else set()
        unused = [s for s in stmts if isinstance(s, c_ast.Decl) and s.name in vectors and s.name not in used
                  and not any(isinstance(n, c_ast.FuncCall) and not (call_name(n) or "").startswith("make_")
                              for n in walk(s))]   # index arithmetic only (in the lanes' vector constructor)
        if not unused:
            return stmts
        stmts = [s for s in stmts if not any(s is u for u in unused)]


__all__ = ["clamped", "clamped_along_x", "clamps_in", "definitions", "hoistable_uniform", "index_of", "without_index",
           "without_unused", "written_out", "zero_folded"]
