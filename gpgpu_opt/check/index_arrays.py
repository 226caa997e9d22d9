"""Subscripts that go through locals and index arrays, as sizing an emulated check or a run harness needs them.

- Clamped locals: `int x0 = min(max((int)floorf(sx), 0), w - 1);` stays within [0, w - 1] whatever it clamps,
  so `in[y0 * w + x0]` is bounded though `sx` is a float (`local_ranges`: the range of each integer local with
  one definition, from the min/max/?: around what cannot be evaluated).
- Row pointers: `for (int p = rowptr[r]; p < rowptr[r + 1]; ++p)` (CSR): the loop runs over the elements
  `rowptr` delimits, so `rowptr` is an index array whose values rise from 0 to the number of elements, and
  what `p` subscripts (`val[p]`, `col[p]`) holds that many (`row_pointer_loops`).
- Gathers through a local: `int c = col[p]; ... x[c]` reads `x` at the values of `col` (`gathered_through`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import NotAffine, iterator_symbol, opaque, param_symbol, to_sympy
from gpgpu_opt.ast_util import call_args, call_name, walk
from gpgpu_opt.kernel import Kernel

Interval = tuple[float, float]
#: Casts that keep a value's range (an unsigned or narrower type may wrap it).
_SIGNED_WIDE = frozenset({"int", "signed", "signed int", "long", "long int", "long long", "long long int"})
UNKNOWN: Interval = (-math.inf, math.inf)


def straight_line_env(kernel: Kernel) -> dict[str, sympy.Expr]:
    """Each integer local declared once and never assigned, as its definition where it is affine (else
    opaque), scalars and loop iterators as themselves: what a subscript's or a guard's names stand for."""
    assigned = assigned_names(kernel.body)
    decls = [n for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name]
    counts: dict[str, int] = {}
    for d in decls:
        counts[d.name] = counts.get(d.name, 0) + 1
    env = {p.name: param_symbol(p.name) for p in kernel.scalars}
    for n in walk(kernel.body):
        if isinstance(n, c_ast.For) and isinstance(n.init, c_ast.DeclList):
            for d in n.init.decls:
                env.setdefault(d.name, iterator_symbol(d.name))
        elif isinstance(n, c_ast.Decl) and n.name and n.init is not None and isinstance(n.type, c_ast.TypeDecl) \
                and n.name not in assigned and counts[n.name] == 1:
            try:
                env[n.name] = to_sympy(n.init, env)
            except NotAffine:
                env[n.name] = opaque(n.name)
    return env


def local_ranges(kernel: Kernel, extreme: Callable[[sympy.Expr, dict, bool], float],
                 ranges: dict) -> dict[sympy.Symbol, tuple[int, int]]:
    """The range of each opaque integer local with one definition, as `opaque(name)` -> (lowest, highest),
    where min/max/?: bound it. `extreme(expr, ranges, max_)` bounds an affine expression over `ranges` (the
    thread and size symbols, then the locals found so far); it raises where it cannot."""
    env = straight_line_env(kernel)
    found: dict[sympy.Symbol, tuple[int, int]] = {}
    assigned = assigned_names(kernel.body)
    for n in walk(kernel.body):
        if not (isinstance(n, c_ast.Decl) and n.name and n.init is not None and isinstance(n.type, c_ast.TypeDecl)
                and n.name not in assigned and env.get(n.name) == opaque(n.name)):
            continue
        lo, hi = _interval(n.init, env, extreme, {**ranges, **found})
        if math.isfinite(lo) and math.isfinite(hi):
            found[opaque(n.name)] = (int(math.ceil(lo)), int(math.floor(hi)))
    return found


def _interval(node: c_ast.Node, env: dict, extreme, ranges: dict) -> Interval:
    name = call_name(node)
    args = call_args(node) if name is not None else []
    if name in ("min", "max", "umin", "umax") and len(args) == 2:
        (alo, ahi), (blo, bhi) = (_interval(a, env, extreme, ranges) for a in args)
        pick = min if name in ("min", "umin") else max
        return pick(alo, blo), pick(ahi, bhi)
    if isinstance(node, c_ast.TernaryOp):
        (alo, ahi), (blo, bhi) = (_interval(a, env, extreme, ranges) for a in (node.iftrue, node.iffalse))
        return min(alo, blo), max(ahi, bhi)
    if isinstance(node, c_ast.Cast) and isinstance(node.to_type.type, c_ast.TypeDecl) \
            and isinstance(node.to_type.type.type, c_ast.IdentifierType) \
            and " ".join(node.to_type.type.type.names) in _SIGNED_WIDE:
        return _interval(node.expr, env, extreme, ranges)   # (int)v: v truncated, within v's range
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        (alo, ahi), (blo, bhi) = (_interval(a, env, extreme, ranges) for a in (node.left, node.right))
        return (alo + blo, ahi + bhi) if node.op == "+" else (alo - bhi, ahi - blo)
    try:
        value = to_sympy(node, env)
        return float(extreme(value, ranges, False)), float(extreme(value, ranges, True))
    except Exception:  # noqa: BLE001 - a float, a load, a call: nothing known of it
        return UNKNOWN


@dataclass(frozen=True)
class RowPointerLoop:
    """`for (int p = rows[e]; p < rows[e + 1]; ++p)`: `rows` delimits the elements `p` runs over."""
    array: str
    var: str
    loop: c_ast.For
    start: c_ast.Node       # e, the subscript of the first element
    end: c_ast.Node         # e + 1


def row_pointer_loops(kernel: Kernel) -> list[RowPointerLoop]:
    """The CSR-style loops of the kernel (module docstring), each over an integer array parameter."""
    integers = {p.name for p in kernel.arrays if _integer(p.base_type)}
    env = straight_line_env(kernel)
    found = []
    for loop in (n for n in walk(kernel.body) if isinstance(n, c_ast.For)):
        init = loop.init.decls[0] if isinstance(loop.init, c_ast.DeclList) and len(loop.init.decls) == 1 else None
        cond, step = loop.cond, loop.next
        if init is None or not isinstance(init.init, c_ast.ArrayRef) or not isinstance(cond, c_ast.BinaryOp) \
                or cond.op not in ("<", "!=") or not isinstance(cond.right, c_ast.ArrayRef) \
                or not (isinstance(cond.left, c_ast.ID) and cond.left.name == init.name):
            continue
        first, last = init.init, cond.right
        if not (isinstance(first.name, c_ast.ID) and isinstance(last.name, c_ast.ID)
                and first.name.name == last.name.name and first.name.name in integers):
            continue
        if not (isinstance(step, c_ast.UnaryOp) and step.op in ("++", "p++") and isinstance(step.expr, c_ast.ID)
                and step.expr.name == init.name) or init.name in assigned_names(loop.stmt):
            continue
        try:
            gap = sympy.expand(to_sympy(last.subscript, env) - to_sympy(first.subscript, env))
        except NotAffine:
            continue
        if gap == 1:
            found.append(RowPointerLoop(first.name.name, init.name, loop, first.subscript, last.subscript))
    return found


def gathered_through(kernel: Kernel) -> dict[str, str]:
    """Gathers through a local: the gathered array -> the integer array whose loaded value the local is,
    for `int c = col[p]; ... x[c]` (the local declared once, never assigned, and the whole subscript)."""
    integers = {p.name for p in kernel.arrays if _integer(p.base_type)}
    assigned = assigned_names(kernel.body)
    loaded = {}
    for n in walk(kernel.body):
        if isinstance(n, c_ast.Decl) and n.name and isinstance(n.init, c_ast.ArrayRef) and n.name not in assigned \
                and isinstance(n.init.name, c_ast.ID) and n.init.name.name in integers:
            loaded[n.name] = n.init.name.name
    found = {}
    for n in walk(kernel.body):
        if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and isinstance(n.subscript, c_ast.ID) \
                and n.subscript.name in loaded:
            found[n.name.name] = loaded[n.subscript.name]
    return found


def _integer(base_type: str) -> bool:
    from gpgpu_opt import cuda_types

    t = cuda_types.scalar(base_type)
    return t is not None and t.kind in "iu"


__all__ = ["RowPointerLoop", "gathered_through", "local_ranges", "row_pointer_loops", "straight_line_env"]
