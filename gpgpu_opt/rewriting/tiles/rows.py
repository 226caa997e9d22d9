"""Several rows of outputs per thread, for transposed tiles on GPUs whose requests are a whole warp
(fermi and later): whether the kernel allows it, and the rewrite of the body that does it.

Such tiles use the shape of NVIDIA's tiled transpose instead of one thread per output: a W x W/4 block
covers W x W outputs, loads the tile in 4 passes of W/4 rows and, after the barrier, computes 4 rows of
outputs, W/4 apart, per thread. One load per thread before a barrier keeps too few bytes in flight on
those GPUs (the W x W shape is no faster than the naive kernel on an H200); 4 independent loads per thread
do. This is only done where it is a pure re-scheduling of the naive threads: the tiles are loaded once,
before the per-output statements (no staged loop, hence no barrier among them), and every statement before
the load is a declaration. The per-output statements then run once per row with threadIdx.y replaced by
threadIdx.y + r (blockDim.y by W); declarations that do not depend on the row stay before the load, and
one that is the global y index plus a row-independent part becomes `y0` there and `y = y0 + r` in the rows.
"""
from __future__ import annotations

import copy
import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import TID, NotAffine, to_sympy
from gpgpu_opt.ast_util import ids_in, transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.tiles.staged import Plan
from gpgpu_opt.rewriting.cbuild import is_builtin, is_placeholder, parse_statements
from gpgpu_opt.templating import render



def rows_problem(info: KernelInfo, plans: list[Plan]) -> str | None:
    """Why the kernel cannot compute several rows of outputs per thread (None: it can)."""
    if any(p.anchor is not None for p in plans):
        return "a staged loop's barriers would run once per row"
    first = min(p.top_index for p in plans)
    items = info.body.block_items or []
    if not all(isinstance(s, c_ast.Decl) for s in items[:first]):
        return "statements before the first staged read would move after the tile load"
    for s in items[first:]:
        if any(isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name == "__syncthreads"
               for n in walk(s)):
            return "the statements after the tile load have barriers"
    per_row = {d.name for d, how in _split_rows(items[:first], info) if how != "hoist"}
    for p in plans:
        used = set().union(*(ids_in(s) for s in p.statements)) & per_row
        if used:
            return f"the tile load uses '{sorted(used)[0]}', which differs between rows"
    return None


def _uses_thread_y(node: c_ast.Node) -> bool:
    return any(is_builtin(n, "threadIdx", "y") for n in walk(node))


def _split_rows(leading: list[c_ast.Decl], info: KernelInfo) -> list[tuple[c_ast.Decl, str]]:
    """Where each declaration before the tile load goes when a thread computes several rows: 'hoist' (a
    value that is the same in every row: stays before the load), 'offset' (row-independent part + the
    thread's y index: `v0` before the load, `v = v0 + r` in the rows) or 'row' (computed in the rows)."""
    env = info.flat_env()
    per_row: set[str] = set()
    out = []
    for d in leading:
        fixed = d.init is not None and isinstance(d.type, c_ast.TypeDecl) and d.name not in info.assigned \
            and info.decl_counts.get(d.name, 0) == 1 and g.is_pure(d.init, calls=info.pure_calls)
        if fixed and not (ids_in(d.init) & per_row):
            if not _uses_thread_y(d.init):
                out.append((d, "hoist"))
                continue
            try:
                value = sympy.expand(to_sympy(d.init, env))
            except NotAffine:
                value = None
            rest = None if value is None else sympy.expand(value - TID["y"])
            if rest is not None and TID["y"] not in rest.free_symbols \
                    and not any(s.name.startswith("?") for s in rest.free_symbols):
                out.append((d, "offset"))
                per_row.add(d.name)
                continue
        out.append((d, "row"))
        per_row.add(d.name)
    return out


def rows_rewrite(items: list, first: int, info: KernelInfo, block, threads) -> tuple[list, int]:
    """`items` (the body, tile reads already in place, `first` the index where the tiles are to be loaded)
    for blocks of `threads` threads covering `block` outputs: the declarations that do not change between
    rows, then the rest once per row of the thread. Returns the items and where the loads go."""
    height, step = block[1], threads[1]
    var = info.fresh("r")
    hoisted, rows = [], []
    for d, how in _split_rows(items[:first], info):
        if how == "hoist":
            hoisted.append(d)
        elif how == "offset":
            base = info.fresh(f"{d.name}0")
            d0 = copy.deepcopy(d)
            d0.name = d0.type.declname = base
            hoisted.append(d0)
            row = copy.deepcopy(d)
            row.init = c_ast.BinaryOp("+", c_ast.ID(base), c_ast.ID(var))
            rows.append(row)
        else:
            rows.append(_shift_rows(d, var))
    rows.extend(_shift_rows(s, var) for s in items[first:])
    loop = parse_statements(render("coalesce_rows.cu.j2", var=var, height=height, step=step))
    for n in walk(loop[-1]):
        if isinstance(n, c_ast.Compound):
            n.block_items = [s for item in n.block_items or []
                             for s in (rows if is_placeholder(item, "__coalesce_rows__") else [item])]
            break
    note = (f"coalesce: each thread computes {height // step} rows of the block's {block[0]}x{height} outputs, "
            f"{step} apart")
    return hoisted + [Comment(note)] + loop, len(hoisted)


def _shift_rows(stmt: c_ast.Node, var: str) -> c_ast.Node:
    """`stmt` for the thread's row `threadIdx.y + var` of the block's outputs."""
    def shift(n):
        if is_builtin(n, "threadIdx", "y"):
            return c_ast.BinaryOp("+", n, c_ast.ID(var))
        return None
    return transform(copy.deepcopy(stmt), shift)
