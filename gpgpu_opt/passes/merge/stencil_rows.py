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

from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.footprint import Footprint, footprints
from gpgpu_opt.analysis.symbolic import BDIM, BID, NotAffine, TID, to_sympy
from gpgpu_opt.ast_util import ids_in, transform, walk
from gpgpu_opt.codegen import Comment
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.passes.context import PassContext
from gpgpu_opt.passes.merge.accumulation import NotAccumulation
from gpgpu_opt.passes.merge.thread_merge import _block
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.staging import Unsupported, parse_expr, parse_statements, text
from gpgpu_opt.templating import render

#: Rows per thread where nothing asks for a number: the loads per output of a 3-row stencil fall from 9 to
#: 3 + 6/R, most of the way at 4, with registers to spare.
DEFAULT_ROWS = 4


class NotStencil(NotAccumulation):
    """No footprint to keep in registers (no note: most kernels)."""


@dataclass
class StencilRows:
    rows: int
    block: tuple[int, int]
    footprints: list[Footprint]
    guard: c_ast.If
    y_decl: c_ast.Decl
    why: str

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return self.block[0], self.block[1] * self.rows


def plan_stencil_rows(kernel: Kernel, ctx: PassContext, info: g.KernelInfo) -> StencilRows:
    request = ctx.merge_request
    if request is not None and (request.x > 1 or request.y < 2):
        raise NotStencil("rows per thread not asked for")
    if request is None and not ctx.target.l1_bytes_per_clock:
        raise NotStencil("without an L1 for global loads the halo tile (coalesce) takes stencils")
    fps = [fp for fp in footprints(info.accesses, ctx.bindings) if not fp.loops]
    if not fps:
        raise NotStencil("no footprint of constant offsets")
    try:
        return _plan(ctx, info, fps)
    except Unsupported as why:
        if request is not None:
            raise Unsupported(f"stencil rows: {why}") from None
        # The model's choice only: other merges may still take the kernel.
        ctx.skip("kernel", f"no stencil rows: {why}", Location.of(kernel.funcdef))
        raise NotStencil(str(why)) from None


def _plan(ctx: PassContext, info: g.KernelInfo, fps: list[Footprint]) -> StencilRows:
    request = ctx.merge_request
    info.check_kernel()
    items = info.body.block_items or []
    guard = items[-1] if items else None
    if not (isinstance(guard, c_ast.If) and guard.iffalse is None):
        raise Unsupported("the kernel does not end in one guard holding its statements")
    y_decl = next((d for d in items[:-1] if isinstance(d, c_ast.Decl) and _is_global_y(d, info)), None)
    if y_decl is None or y_decl.name in info.assigned or info.decl_counts[y_decl.name] > 1:
        raise Unsupported("no declaration of the global y index that stays unchanged")
    for item in items[:-1]:
        if item is not y_decl and y_decl.name in ids_in(item):
            raise Unsupported(f"a statement before the guard uses '{y_decl.name}'")
    before = {d.name for d in items[:-1] if isinstance(d, c_ast.Decl)} | info.scalars
    for fp in fps:
        for a in fp.reads:
            if not ids_in(a.node.subscript) <= before:
                raise Unsupported(f"a read of {fp.array} uses a value computed inside the guard")
            frames = g.frames_to(a.node, info.parents, info.body)
            if any(f.kind not in ("block",) and f.node is not guard for f in frames):
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
    return StencilRows(rows, block, fps, guard, y_decl, why)


def _is_global_y(decl: c_ast.Decl, info: g.KernelInfo) -> bool:
    if decl.init is None:
        return False
    try:
        value = to_sympy(decl.init, {})
    except NotAffine:
        return False
    return sympy.expand(value - (BID["y"] * BDIM["y"] + TID["y"])) == 0


def apply_stencil_rows(kernel: Kernel, info: g.KernelInfo, plan: StencilRows) -> None:
    y = plan.y_decl.name
    first = info.fresh(f"{y}0")
    row = info.fresh("r")
    ran = info.fresh("prev_row_loaded")
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
            dy, dx = (int(v) for v in fp.offset_of[id(a.node)])
            node_at.setdefault((dy, dx), a.node)
            replacement[id(a.node)] = f"{name}[{dy - dy0}][{dx - dx0}]"
        for (dy, dx), node in sorted(node_at.items()):
            reg = f"{name}[{dy - dy0}][{dx - dx0}]"
            load = text(node)
            if (dy + 1, dx) in node_at:
                loads.append(f"{reg} = {ran} ? {name}[{dy + 1 - dy0}][{dx - dx0}] : {load};")
            else:
                loads.append(f"{reg} = {load};")
    transform(plan.guard.iftrue, lambda n: parse_expr(replacement[id(n)]) if id(n) in replacement else None)
    body = plan.guard.iftrue.block_items if isinstance(plan.guard.iftrue, c_ast.Compound) else [plan.guard.iftrue]
    source = render("merge_stencil_rows.cu.j2", rows=plan.rows, row=row, y=y, first=first, ran=ran,
                    windows=windows, loads=loads, guard=text(plan.guard.cond))
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
    items = kernel.body.block_items
    at = items.index(plan.y_decl)
    decl = parse_statements(f"const int {first} = ({text(plan.y_decl.init)}) * {plan.rows};")
    items[at:at + 1] = decl
    comment = Comment(f"merge: each thread computes {plan.rows} consecutive rows; the rows the stencil's "
                      "reads share stay in registers, each input row loaded once")
    items[-1:] = [comment] + stmts
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
