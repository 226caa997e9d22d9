"""The matrix-product loop nest that the register tile and the tensor-core tile both start from.

A kernel with one output per thread of a 2-D thread space and one accumulation loop (rewriting/
accumulation.py), whose reads in the loop each depend on the loop and on one axis of the output:

    if (row < n && col < n) { float sum = 0; for (k...) sum += A[row*n + k] * B[k*n + col]; C[...] = sum; }

`A[row*n + k]` depends on the output's row (shared by every output of the row), `B[k*n + col]` on its
column. `recognize_product` finds the loop, its accumulator, the guard clauses per axis and the operands
(reads that change with the loop along one axis); the merges decide what to build from them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, iterator_symbol
from gpgpu_opt.ast_util import walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.output_tile import AXIS_SYMBOL, check_start, global_position, guard_clauses, uses_both_axes
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.accumulation import (NotAccumulation, accumulation, accumulator, canonical_header,
                                              check_path, trip_count)
from gpgpu_opt.rewriting.cbuild import Unsupported, text
from gpgpu_opt.rewriting.kernel_info import KernelInfo


@dataclass
class Operand:
    """Reads in the loop of one array at one subscript that depends on the loop and one output axis."""
    array: str
    axis: str                       # 'y': one value per output row; 'x': per output column
    index: sympy.Expr               # in the axis' global index, the loop iterator and parameters
    along_loop: bool                # contiguous along the loop rather than along the axis
    nodes: list[c_ast.ArrayRef] = field(default_factory=list)
    tile: str = ""
    fragment: str = ""


@dataclass
class Product:
    """A matrix-product loop nest: the loop (`var` from `start`), its accumulator, the path of statements
    to it, the operands, the guard clauses by axis ('' = neither), the operands' element type, and the
    loop's trip count where known."""
    loop: c_ast.For
    var: str
    start: c_ast.Node
    acc: c_ast.Decl
    path: list[c_ast.Node]
    operands: list[Operand]
    clauses: dict[str, list[tuple[sympy.Expr, str, sympy.Expr]]]
    element: str
    trip: int | None


def recognize_product(kernel: Kernel, ctx: PassContext, info: KernelInfo,
                      element_types: frozenset[str] = frozenset({"float", "double"})) -> Product:
    """The product nest of `kernel`, or NotAccumulation where it has none, Unsupported where it has one that
    cannot be tiled. `element_types`: the operand types accepted (all operands of one of them)."""
    body = kernel.body
    loops = [n for n in walk(body) if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile))]
    if len(loops) != 1 or not isinstance(loops[0], c_ast.For):
        raise NotAccumulation("the kernel does not have exactly one loop")
    loop = loops[0]
    acc_name = accumulation(loop, info.pure_calls)
    if not uses_both_axes(info):
        raise NotAccumulation("the thread space is not 2-D")
    info.check_kernel()
    var, start = canonical_header(loop, body)
    if not (info.uniform(start) and info.uniform(loop.cond.right)):
        raise Unsupported(f"the bounds of '{var}' depend on the output's position ('{text(loop.cond)}'): the "
                          "outputs of a thread would need different steps")
    path = g.path_to(loop, info.parents, body)
    check_path(path, loop)
    acc = accumulator(body, loop, acc_name, path, info, updates_before=True)
    check_start(loop, acc, info)
    env = info.flat_env()
    operands = _operands(loop, var, info)
    if not operands:
        raise NotAccumulation("no read in the loop is shared along a row or a column of outputs")
    if not {o.axis for o in operands} >= {"x", "y"}:
        raise NotAccumulation("the loop's reads are shared along one axis only (a thread merge's case)")
    clauses = guard_clauses(path, env)
    element = _element_type(info, operands, element_types)
    return Product(loop, var, start, acc, path, operands, clauses, element, trip_count(loop, start, info, ctx))


def _operands(loop: c_ast.For, var: str, info: KernelInfo) -> list[Operand]:
    k = iterator_symbol(var)
    in_loop = {id(n) for n in walk(loop.stmt)}
    found: list[Operand] = []
    for a in info.accesses:
        if id(a.node) not in in_loop:
            continue
        if a.mode != "read":
            raise Unsupported(f"the loop writes {a.array}[{a.index_text}]")
        if a.index is None:
            raise Unsupported(f"the read {a.array}[{a.index_text}] cannot be analysed")
        index = global_position(a.index)
        stray = {s for s in index.free_symbols if s.name.startswith("?") or s in set(BID.values())
                 | set(BDIM.values()) | set(TID.values())}
        if stray:
            raise Unsupported(f"{a.array}[{a.index_text}] is not a function of the output's position and '{var}'")
        on = {axis for axis, sym in AXIS_SYMBOL.items() if index.has(sym)}
        if len(on) == 2:
            raise Unsupported(f"{a.array}[{a.index_text}] depends on both the row and the column of the output")
        if not on:
            continue  # the same for every output of a block: left as a (cached, broadcast) read
        axis = on.pop()
        pos = AXIS_SYMBOL[axis]
        if not index.has(k):
            raise Unsupported(f"{a.array}[{a.index_text}] does not change with '{var}' (hoist it first)")
        if any(sympy.diff(index, s1, s2) != 0 for s1 in (pos, k) for s2 in (pos, k)):
            raise Unsupported(f"{a.array}[{a.index_text}] is not affine in the output's position and '{var}'")
        if a.array in info.written:
            raise Unsupported(f"the kernel writes {a.array}, which the loop reads (a staged copy would be stale)")
        if not info.params[a.array].is_restrict:
            raise Unsupported(f"{a.array} may alias the array the kernel writes (declare it __restrict__)")
        same = next((o for o in found if o.array == a.array and o.axis == axis and o.index == index), None)
        if same is None:
            same = Operand(a.array, axis, index, sympy.diff(index, k) == 1 or sympy.diff(index, pos) != 1)
            same.tile = info.fresh(f"tile_{a.array}")
            same.fragment = info.fresh(f"{a.array}_frag")
            found.append(same)
        same.nodes.append(a.node)
    return found


def _element_type(info: KernelInfo, operands: list[Operand], accepted: frozenset[str]) -> str:
    types = {info.params[o.array].base_type for o in operands}
    if len(types) != 1 or not types <= accepted:
        raise Unsupported(f"the loop's operands are of type {', '.join(sorted(types))}, not all of one of "
                          f"{', '.join(sorted(accepted))}")
    return types.pop()


__all__ = ["Operand", "Product", "recognize_product"]
