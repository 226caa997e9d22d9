"""Races in the naive launch itself: threads of the launch the program makes that store to the same element.

A 1-D kernel (`x1[i] += ...` with `i = blockIdx.x * blockDim.x + threadIdx.x`) launched with 32x8 blocks has
8 threads per `i`, differing only in threadIdx.y, all updating `x1[i]`. The store's subscript ignores a
launched dimension whose extent is more than 1. That is only a race when nothing else tells those threads
apart: no condition on the way to the store, no bound of an enclosing loop, depends on that dimension.
"""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.symbolic import BID, TID
from gpgpu_opt.ast_util import member_of, walk
from gpgpu_opt.kernel import Kernel

_BUILTIN_DIMENSIONS = {("threadIdx", "x"): "threadIdx.x", ("threadIdx", "y"): "threadIdx.y",
                       ("blockIdx", "x"): "blockIdx.x", ("blockIdx", "y"): "blockIdx.y"}
_SYMBOLS = {"threadIdx.x": TID["x"], "threadIdx.y": TID["y"], "blockIdx.x": BID["x"], "blockIdx.y": BID["y"]}
_ALL = frozenset(_SYMBOLS)
_ALL_SYMBOLS = frozenset(_SYMBOLS.values())


@dataclass(frozen=True)
class RacyWrite:
    subject: str            # `x1[i]`
    dimension: str          # 'threadIdx.y'
    extent: int             # how many threads differ only in it
    node: c_ast.Node


def launch_races(kernel: Kernel, block: tuple[int, int], grid: tuple[int | None, int | None]) -> list[RacyWrite]:
    """Stores that several threads of a `grid` x `block` launch make to the same element (None in grid: the
    extent is not known, so no race is claimed along it)."""
    extents = {"threadIdx.x": block[0], "threadIdx.y": block[1], "blockIdx.x": grid[0], "blockIdx.y": grid[1]}
    launched = {d for d, n in extents.items() if n is not None and n > 1}
    if not launched:
        return []
    dependence = _dimension_dependence(kernel.body)
    told_apart = set()
    for node in walk(kernel.body):
        if isinstance(node, (c_ast.If, c_ast.TernaryOp, c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch)) \
                and node.cond is not None:
            told_apart |= dependence(node.cond)
    found = []
    seen = set()
    for access in collect_accesses(kernel):
        if access.mode != "write" or access.evaluable_index is None or access.kind == "unresolved":
            continue  # an unresolved subscript (`?c`) says nothing of which threads store where
        used = set(access.evaluable_index.free_symbols)
        for loop in access.loops:
            used |= loop.start.free_symbols | (loop.bound.free_symbols if loop.bound is not None else _ALL_SYMBOLS)
        for dim in sorted(launched - told_apart):
            if _SYMBOLS[dim] not in used and (access.index_text, dim) not in seen:
                seen.add((access.index_text, dim))
                found.append(RacyWrite(f"{access.array}[{access.index_text}]", dim, extents[dim], access.node))
    return found


def _dimension_dependence(body: c_ast.Node):
    """A function giving the launch dimensions an expression may depend on, through the kernel's locals.
    A load from memory may depend on anything."""
    local: dict[str, set[str]] = {}

    def dims(expr) -> set[str]:
        out: set[str] = set()
        for n in walk(expr):
            if member_of(n) is not None:
                dimension = _BUILTIN_DIMENSIONS.get(member_of(n))
                out |= {dimension} if dimension else set()
            elif isinstance(n, c_ast.ID):
                out |= local.get(n.name, set())
            elif isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall)) or (isinstance(n, c_ast.UnaryOp) and n.op == "*"):
                out |= _ALL
        return out

    changed = True
    while changed:  # to a fixed point: a local may be assigned from another defined later in a loop
        changed = False
        for n in walk(body):
            target, value = None, None
            if isinstance(n, c_ast.Decl) and n.name and n.init is not None:
                target, value = n.name, n.init
            elif isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
                target, value = n.lvalue.name, n.rvalue
            if target is not None:
                new = dims(value) - local.get(target, set())
                if new:
                    local.setdefault(target, set()).update(new)
                    changed = True
    return dims
