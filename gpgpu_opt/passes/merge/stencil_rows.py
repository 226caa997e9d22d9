"""Stencil rows: one thread computes R consecutive rows of a stencil's outputs, the rows that neighbouring
outputs in y share kept in registers (a sliding window), so that each input row is loaded once per thread
instead of once per output that reads it.

For GPUs whose L1 already absorbs the reuse between threads (where the coalesce pass declines a halo
tile), this is the form that cuts the loads a small stencil issues: a 3x3 blur loads 3 elements per output
instead of 9, with R rows of independent work in flight per thread.

The kernel's shape: statements that do not use the y index, then one `if (guard)` holding every read of
the footprint (`analysis.footprint`, offsets without loops) outside further conditions. The y index's
declaration becomes the thread's first row; the guard runs once per row:

    for (int r = 0; r < R; r++) {
        const int y = y0 + r;
        if (guard) {
            win[dy][dx] = prev_row_ran ? win[dy + 1][dx] : a[(y + dy) * P + x + dx];   // shifted or loaded
            ... the statements, reads from the window ...
        }
    }

A register is taken from the previous row only when that row passed the guard (and so loaded it); loads
happen only where the naive thread of that row reads, so no access is added. Reads move ahead of the
body's stores: the staged array must not be written and the pointers must not alias (`restrict`).
`--merge y=R` asks for R rows; on GPUs with an L1 for global loads the default is 4.
"""
from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.footprint import Footprint, footprints
from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import BDIM, BID, NotAffine, TID, cuda_text, iterator_symbol, to_sympy
from gpgpu_opt.ast_util import ids_in, substitute, transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import NotAccumulation
from gpgpu_opt.passes.merge.thread_merge import _block
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, const, parse_expr, parse_statements, text
from gpgpu_opt.templating import render

#: Rows per thread where nothing asks for a number: the loads per output of a 3-row stencil fall from 9 to
#: 3 + 6/R, most of the way at 4, with registers to spare.
DEFAULT_ROWS = 4
#: Iterations of the loops around a stencil's reads that are unrolled (imregionmax's 3x3 window is 9).
MAX_COPIES = 32


class NotStencil(NotAccumulation):
    """No footprint to keep in registers (no note: most kernels)."""


@dataclass
class StencilRows:
    rows: int
    block: tuple[int, int]
    footprints: list[Footprint]
    guard: c_ast.If | None             # the guard the statements run under, once per row
    y_decl: c_ast.Decl
    start: int                         # the first top-level statement run once per row
    why: str

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return self.block[0], self.block[1] * self.rows


def plan_stencil_rows(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> StencilRows:
    request = ctx.options.merge_request
    if request is not None and (request.x > 1 or request.y < 2):
        raise NotStencil("rows per thread not asked for")
    if request is None and not ctx.options.target.l1_bytes_per_clock:
        raise NotStencil("without an L1 for global loads the halo tile (coalesce) takes stencils")
    if not footprints(info.accesses, ctx.facts.bindings):
        raise NotStencil("no footprint")
    try:
        return _plan(ctx, info, footprints(info.accesses, ctx.facts.bindings))
    except Unsupported as why:
        if request is not None:
            raise Unsupported(f"stencil rows: {why}") from None
        # The model's choice only: other merges may still take the kernel.
        ctx.log.skip("kernel", f"no stencil rows: {why}", Location.of(kernel.funcdef))
        raise NotStencil(str(why)) from None


def _check_loops(fps: list[Footprint], info: KernelInfo) -> None:
    """The loops around the reads: constant bounds (the footprint enumerated them), an iterator of their
    own, at most MAX_COPIES iterations in all (the window is indexed by them: nvcc unrolls them)."""
    copies = 1
    for fp in fps:
        for var, values in fp.loops.items():
            copies *= len(values)
        for a in fp.reads:
            for loop in a.loops:
                name, _, declared = g.loop_var(loop.node)
                if not declared or name in assigned_names(loop.node.stmt):
                    raise Unsupported(f"the '{loop.var}' loop around the reads changes its iterator")
    if copies > MAX_COPIES:
        raise Unsupported(f"the loops around the reads run {copies} times (at most {MAX_COPIES} are unrolled)")


def _plan(ctx: PassContext, info: KernelInfo, fps: list[Footprint]) -> StencilRows:
    request = ctx.options.merge_request
    info.check_kernel()
    _check_loops(fps, info)
    items = info.body.block_items or []
    y_at = next((k for k, d in enumerate(items) if isinstance(d, c_ast.Decl) and _is_global_y(d, info)), None)
    if y_at is None or items[y_at].name in info.assigned or info.decl_counts[items[y_at].name] > 1:
        raise Unsupported("no declaration of the global y index that stays unchanged")
    y_decl = items[y_at]
    # The statements from the first that uses y on run once per row: one guard, or all of them.
    start = next((k for k in range(y_at + 1, len(items)) if y_decl.name in ids_in(items[k])), len(items))
    rest = items[start:]
    guard = rest[0] if len(rest) == 1 and isinstance(rest[0], c_ast.If) and rest[0].iffalse is None else None
    before = {d.name for d in items[:start] if isinstance(d, c_ast.Decl)} | info.scalars
    for fp in fps:
        for a in fp.reads:
            if not ids_in(a.node.subscript) - set(fp.loops) <= before:
                raise Unsupported(f"a read of {fp.array} uses a value computed inside the guard")
            frames = g.frames_to(a.node, info.parents, info.body)
            loops = {id(l.node) for l in a.loops if l.var in fp.loops}
            if any(f.kind not in ("block", "for") and f.node is not guard or f.kind == "for" and id(f.node) not in loops
                   for f in frames):
                raise Unsupported(f"a read of {fp.array} is under another condition or loop")
    for a in info.accesses:
        if a.mode == "write" and not info.params[a.array].is_restrict:
            raise Unsupported(f"the reads move ahead of the store to '{a.array}', which may "
                              "alias them (declare the pointers __restrict__)")
    rows = request.y if request is not None else DEFAULT_ROWS
    block, problem = _block(info, ctx, (1, rows))
    if problem:
        raise Unsupported(problem)
    why = f"asked for with --merge {request}" if request is not None else \
        ("the L1 absorbs the reuse between threads, so the loads themselves bound a small stencil: "
         f"{rows} rows per thread load each input row once")
    return StencilRows(rows, block, fps, guard, y_decl, start, why)


def _is_global_y(decl: c_ast.Decl, info: KernelInfo) -> bool:
    if decl.init is None:
        return False
    try:
        value = to_sympy(decl.init, {})
    except NotAffine:
        return False
    return sympy.expand(value - (BID["y"] * BDIM["y"] + TID["y"])) == 0


def apply_stencil_rows(kernel: Kernel, info: KernelInfo, plan: StencilRows) -> None:
    y = plan.y_decl.name
    first = info.fresh(f"{y}0")
    row = info.fresh("r")
    # Without a guard every row loads its window, so from the second row on it shifts.
    ran = info.fresh("prev_row_loaded") if plan.guard is not None else f"{row} > 0"
    windows, replacement, loads = [], {}, []
    for fp in plan.footprints:
        name = info.fresh(f"{fp.array}_rows")
        dy0, dx0 = fp.origin
        up, down, left, right = fp.reach
        rows, cols = down + up + 1, right + left + 1
        elem = info.params[fp.array].base_type
        windows.append(f"{elem} {name}[{rows}][{cols}];")
        node_at = {}
        for a in fp.reads:
            dy, dx = fp.offset_of[id(a.node)]
            replacement[id(a.node)] = f"{name}[{cuda_text(dy - dy0)}][{cuda_text(dx - dx0)}]"
            names = [v for v in fp.loops if iterator_symbol(v) in dy.free_symbols | dx.free_symbols]
            for combo in itertools.product(*(fp.loops[v] for v in names)):
                point = {iterator_symbol(v): k for v, k in zip(names, combo)}
                node = substitute(copy.deepcopy(a.node), {v: const(k) for v, k in zip(names, combo)})
                node_at.setdefault((int(dy.subs(point)), int(dx.subs(point))), node)
        for (dy, dx), node in sorted(node_at.items()):
            reg = f"{name}[{dy - dy0}][{dx - dx0}]"
            load = re.sub(r" \+ 0(?=[)\]])", "", text(node))      # `(idy + 0)` of a loop's first value
            load = re.sub(r" \+ -(?=\d)", " - ", load)               # `(y + -1)` of a negative offset
            if (dy + 1, dx) in node_at:
                loads.append(f"{reg} = {ran} ? {name}[{dy + 1 - dy0}][{dx - dx0}] : {load};")
            else:
                loads.append(f"{reg} = {load};")
    items = kernel.body.block_items
    if plan.guard is None:
        body = items[plan.start:]
    else:
        body = plan.guard.iftrue.block_items if isinstance(plan.guard.iftrue, c_ast.Compound) \
            else [plan.guard.iftrue]
    body = [transform(s, lambda n: parse_expr(replacement[id(n)]) if id(n) in replacement else None) for s in body]
    source = render("merge_stencil_rows.cu.j2", rows=plan.rows, row=row, y=y, first=first, ran=ran,
                    windows=windows, loads=loads, guard=text(plan.guard.cond) if plan.guard is not None else None)
    stmts = parse_statements(source)
    for n in _compounds(stmts):
        new = []
        for item in n.block_items or []:
            if isinstance(item, c_ast.FuncCall) and isinstance(item.name, c_ast.ID) \
                    and item.name.name == "__stencil_body__":
                new.extend(body)
            else:
                new.append(item)
        n.block_items = new
    at = items.index(plan.y_decl)
    comment = Comment(f"merge: each thread computes {plan.rows} consecutive rows; the rows the stencil's "
                      "reads share stay in registers, each input row loaded once")
    items[plan.start:] = [comment] + stmts
    items[at:at + 1] = parse_statements(f"const int {first} = ({text(plan.y_decl.init)}) * {plan.rows};")
    kernel.launch = LaunchConfig(block=plan.block, outputs_per_block=plan.outputs_per_block)


def _compounds(stmts):
    for s in stmts:
        for n in walk(s):
            if isinstance(n, c_ast.Compound):
                yield n


def describe(plan: StencilRows) -> str:
    arrays = ", ".join(fp.array for fp in plan.footprints)
    return f"{plan.rows} consecutive rows per thread, {arrays} kept in a sliding window of registers: " \
           f"{plan.why}"


def describe_launch(plan: StencilRows) -> str:
    per = plan.outputs_per_block
    return f"blocks of {plan.block[0]}x{plan.block[1]} threads, each covering {per[0]}x{per[1]} outputs"
