"""The loader of one planned tile: the global address each tile element is loaded from and the predicate
under which it is loaded.

Staged loads are predicated: a tile element is loaded only if the naive kernel reads it (the guard and
loop conditions of the thread and iteration that reads it, as `witness.Witness` copies them), and set to 0
otherwise, so no access is added that the naive kernel would not make.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import substitute, walk
from gpgpu_opt.rewriting.tiles import vector_rows
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.tiles.staged import Plan
from gpgpu_opt.rewriting.cbuild import Unsupported, add, conj, const, mul, parse_expr, text
from gpgpu_opt.rewriting.tiles.geometry import loader_statements
from gpgpu_opt.rewriting.witness import Witness, check_monotone, fold



def _visible(plan: Plan, info: KernelInfo) -> set[str]:
    """Names declared where the tile is loaded: before the site along its path, and enclosing iterators."""
    names = set()
    if plan.anchor is None:
        # Loaded before the first top-level statement with a staged thread-index read.
        return {item.name for item in (info.body.block_items or [])[:plan.load_index]
                if isinstance(item, c_ast.Decl) and item.name}
    path = plan.site_path
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, c_ast.Compound):
            for item in parent.block_items or []:
                if item is child:
                    break
                if isinstance(item, c_ast.Decl) and item.name:
                    names.add(item.name)
        elif isinstance(parent, c_ast.For) and parent is not path[-1]:
            var, _, _ = g.loop_var(parent)
            if var:
                names.add(var)
    return names


def _ceil_div(node: c_ast.Node, m: int) -> c_ast.Node:
    if m == 1:
        return node
    return c_ast.BinaryOp("/", c_ast.BinaryOp("+", node, const(m - 1)), const(m))


def _signed(node: c_ast.Node) -> c_ast.Node:
    """`node` as an int: a thread index is unsigned and would make the iterator's value unsigned."""
    if not any(isinstance(n, c_ast.StructRef) for n in walk(node)):
        return node
    return parse_expr(f"(int) ({text(node)})")


def _later_read(col: c_ast.Node, per_iteration: int, down: bool) -> c_ast.Node:
    """The iteration (counted from the step's lowest value) whose read makes tile column `col` part of
    what the naive kernel reads: the column's own read when it is one (every m-th column from the tile's
    lead on, m = `per_iteration`), else the later of the two reads it lies between, which is in range
    whenever the loop gets there. Going up that is the higher read (`ceil(col / m)`); going down, with
    the tile starting m - 1 columns early, the lower one (`(col + 1) / m - 1`; -1 is the first value of
    the next step)."""
    if per_iteration == 1:
        return col
    if not down:
        return _ceil_div(col, per_iteration)
    return c_ast.BinaryOp("-", c_ast.BinaryOp("/", c_ast.BinaryOp("+", col, const(1)), const(per_iteration)),
                          const(1))


def build_loader(p: Plan, info: KernelInfo, block, threads=None) -> None:
    """`p.statements`: the tile's loads by the block's `threads` (16-byte ones where `vector_rows` can)."""
    load, predicate = element_load(p, info, block, parse_expr(p.loader.row), parse_expr(p.loader.col))
    p.statements = loader_statements(p.tile, p.loader, load, conj(predicate))
    if threads is not None:
        vector_rows.vectorize_loads(p, info, block, threads, lambda row, col, names: element_load(
            p, info, block, row, col, names))


def element_load(p: Plan, info: KernelInfo, block, row_ast: c_ast.Node, col_ast: c_ast.Node,
                 names: set[str] = frozenset()) -> tuple[c_ast.ArrayRef, list]:
    """The global element tile[row_ast][col_ast] is loaded from, and the clauses under which the naive
    kernel reads it (`names`: the loader's own variables that the two expressions use)."""
    a, shape = p.access, p.shape
    env = a.extra.get("env", {})
    visible = _visible(p, info)
    allowed = set(p.loader_vars) | ({p.chunk_var} if p.chunk_var else set()) | set(names)
    step = p.step

    def iteration(offset: c_ast.Node | None) -> c_ast.Node:
        """The value of the iterator `offset` iterations above the step's lowest value."""
        base = step.lowest()
        return base if offset is None else add(base, mul(offset, step.stride))

    # Going down, the iterator's values that a loader tests run below the step's first one (and below 0
    # at the loop's end): the loader's tile index must not make them unsigned.
    in_iteration = _signed if step is not None and step.down else (lambda node: node)

    addr_axes, pred_axes = {}, {}
    addr_iter, pred_iter = {}, {}
    unpinned = []
    for axis, extent in (("x", block[0]), ("y", block[1])):
        if extent == 1:
            addr_axes[axis] = pred_axes[axis] = None
        elif shape.row is not None and shape.row.kind == axis:
            addr_axes[axis] = pred_axes[axis] = row_ast
        elif shape.col is not None and shape.col.kind == axis:
            addr_axes[axis] = const(0)
            pred_axes[axis] = _ceil_div(col_ast, int(shape.col.coef))
        else:
            addr_axes[axis] = pred_axes[axis] = const(0)
            unpinned.append(axis)
    if p.anchor is not None:
        var = p.anchor.var
        if shape.row is not None and shape.row.kind == "u":
            addr_iter[var] = pred_iter[var] = iteration(in_iteration(row_ast))
        else:
            addr_iter[var] = iteration(None)
            pred_iter[var] = iteration(_later_read(in_iteration(col_ast), int(shape.col.coef), step.down))
    # The global address of tile[row][col]: the subscript at the step's lowest value (at the first thread
    # of the block along the column's axis), plus the column, less the tile's lead.
    address_of = Witness(info, env, block, addr_axes, addr_iter, visible, allowed)
    subscript = address_of(a.node.subscript)
    if shape.col is not None:
        subscript = c_ast.BinaryOp("+", subscript, col_ast)
        lead = step.lead(int(shape.col.coef)) if step is not None and shape.col.kind == "u" else 0
        if lead:
            subscript = c_ast.BinaryOp("-", subscript, const(lead))
    load = c_ast.ArrayRef(c_ast.ID(a.array), subscript)
    # The conditions under which the naive kernel reads that element (thread and iteration that read it).
    clauses = []
    anchor_seen = p.anchor is None
    for f in p.frames:
        if f.kind == "for":
            if not anchor_seen:
                if f.node is p.anchor.node:
                    anchor_seen = True
                    clauses.append(Witness(info, env, block, pred_axes, pred_iter, visible, allowed)(f.node.cond))
                continue
            var, start, _ = g.loop_var(f.node)
            if var is None or f.node.cond is None:
                raise Unsupported("an enclosing loop is not in canonical form")
            iters = dict(pred_iter)
            iters[var] = Witness(info, env, block, pred_axes, pred_iter, visible, allowed)(start)
            first = substitute(f.node.cond, {var: start})
            for clause in g.clauses(first):
                check_monotone(clause, env, unpinned, block)
            clauses.append(Witness(info, env, block, pred_axes, iters, visible | {var}, allowed)(f.node.cond))
            continue
        cond = g.frame_condition(f)
        if cond is None:
            continue
        for clause in g.clauses(cond):
            check_monotone(clause, env, unpinned, block)
            clauses.append(Witness(info, env, block, pred_axes, pred_iter, visible, allowed)(clause))
    clauses = [c for c in (fold(c) for c in clauses) if c is not True]
    if any(c is False for c in clauses):
        raise Unsupported("the access is never executed")
    return load, clauses
