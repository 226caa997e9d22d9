"""The coalesce pass's rewrite of the kernel with its planned tiles: staged reads become shared-memory
reads, loops are unrolled around the tiles they stage, thread-index tiles are loaded before the first
statement that reads one (once per block, or with several rows of outputs per thread: `rows`), the
tiles are declared, and thread-dependent guards around staged loops are sunk into the statements so that
the loads and `__syncthreads()` run in block-uniform control flow.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.ast_util import substitute, transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import conj, const, is_builtin, is_placeholder, parse_statements, text
from gpgpu_opt.rewriting.tiles.geometry import read_ref
from gpgpu_opt.rewriting.tiles.staged import Plan
from gpgpu_opt.rewriting.tiles.rows import rows_rewrite
from gpgpu_opt.templating import render

if TYPE_CHECKING:
    from gpgpu_opt.pass_api.context import PassContext     # the type only: the tiles take the pass's context


def apply_plans(kernel: Kernel, ctx: PassContext, info: KernelInfo, block, threads, plans: list[Plan]) -> None:
    body = kernel.body
    # 1. The staged reads become shared-memory reads.
    replacement = {}
    for p in plans:
        for node in p.nodes:
            replacement[id(node)] = read_ref(p.tile, p.step)
    transform(body, lambda n: copy.deepcopy(replacement[id(n)]) if id(n) in replacement else None)
    # 2. Loops that are unrolled around their tiles.
    groups: dict[int, list[Plan]] = {}
    for p in plans:
        if p.anchor is not None:
            groups.setdefault(id(p.anchor.node), []).append(p)
    anchors = {key: _chunk_builder(group, ctx) for key, group in groups.items()}
    on_path = set()
    for group in groups.values():
        on_path.update(id(n) for n in group[0].site_path[1:])
    # 3. Tiles of thread-index reads: loaded once, before the first statement that reads one.
    items = list(body.block_items or [])
    tops = [p for p in plans if p.anchor is None]
    insert_at = None
    if tops:
        insert_at = min(p.top_index for p in tops)
        if threads != block:
            # Fewer rows of threads than rows of outputs: the statements after the load run once per row.
            items, insert_at = rows_rewrite(items, insert_at, info, block, threads)
        loads = []
        for p in tops:
            loads.append(Comment(_load_comment(p)))
            loads.extend(p.statements)
        loads.extend(parse_statements("__syncthreads();"))
        items[insert_at:insert_at] = loads
    # 4. Tile declarations at the top of the body, after the leading declarations.
    prefix = 0
    while prefix < len(items) and isinstance(items[prefix], c_ast.Decl) \
            and (insert_at is None or prefix < insert_at):
        prefix += 1
    decls = parse_statements("\n".join(p.tile.declaration() for p in plans))
    items[prefix:prefix] = decls
    # 5. Guards around staged loops sink into the statements; the loops become unrolled steps.
    sinker = g.Sinker(anchors, on_path, info.uniform)
    body.block_items = sinker.rewrite(items, [])
    if threads != block:
        # blockDim.y, wherever the naive kernel used it (the loads copy it too), is the height of the
        # block's outputs, not of its threads.
        transform(body, lambda n: const(block[1]) if is_builtin(n, "blockDim", "y") else None)


def _without_zero_terms(node: c_ast.Node) -> c_ast.Node:
    """`e + 0`, `0 + e` and `e - 0` become `e` (left by substituting a step variable that starts at 0)."""
    def is_zero(n):
        return isinstance(n, c_ast.Constant) and n.type == "int" and n.value == "0"

    def drop(n):
        if isinstance(n, c_ast.BinaryOp) and n.op in ("+", "-"):
            if is_zero(n.right):
                return n.left
            if n.op == "+" and is_zero(n.left):
                return n.right
        return None
    return transform(node, drop)


def _at_start(node: c_ast.Node, chunk: str, start: c_ast.Constant) -> c_ast.Node:
    """`node` with the step variable at the loop's (constant) start; the `chunk - c` that a step counting
    down has (its lowest value, the end of its iterations) becomes the constant it then is."""
    def fold(n):
        if isinstance(n, c_ast.BinaryOp) and n.op == "-" and isinstance(n.left, c_ast.ID) and n.left.name == chunk \
                and isinstance(n.right, c_ast.Constant):
            return const(int(start.value) - int(n.right.value))
        return None
    return _without_zero_terms(substitute(transform(copy.deepcopy(node), fold), {chunk: start}))


def _load_comment(p: Plan) -> str:
    t = p.tile
    dims = f"{t.rows}x{t.cols}" if t.two_d else f"{t.cols}"
    what = f"rows of {p.access.array} read by the block" if t.two_d else f"{p.access.array}'s segment"
    if p.anchor is not None:
        what += f" in this step of '{p.anchor.var}'"
    return f"coalesce: stage {p.access.array}[{p.access.index_text}] in {t.name} ({dims}: {what})"


def _chunk_builder(group: list[Plan], ctx: PassContext):
    anchor = group[0].anchor
    loop = anchor.node
    chunk = group[0].chunk_var
    unroll = group[0].unroll
    var, start, declared = g.loop_var(loop)
    decl_type = "int"
    if declared:
        t = loop.init.decls[0].type
        if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
            decl_type = " ".join(t.type.names)
    trip = anchor.trip_count()
    divisible = False
    if trip is not None:
        trip = trip.subs({param_symbol(k): v for k, v in ctx.facts.bindings.items()})
        divisible = bool(trip.is_Integer and int(trip) % unroll == 0)
    span = unroll * abs(anchor.step)
    # A step runs from the chunk variable's value in the loop's own direction, over `span` values: going
    # down, k0 - span < k <= k0, so that the iterations keep their order (and float sums their rounding).
    if anchor.is_downward:
        chunk_next, in_step = f"{chunk} -= {span}", f"{var} > {chunk} - {span}"
    else:
        chunk_next, in_step = f"{chunk} += {span}", f"{var} < {chunk} + {span}"
    # A loop of exactly one step (16 iterations unrolled by 16) needs no step loop: its body runs once
    # with the step variable at the start value.
    single_step = divisible and int(trip) == unroll and isinstance(start, c_ast.Constant) and start.type == "int" \
        and start.value.isdigit()

    def rename(node):
        return substitute(node, {var: c_ast.ID(chunk)})

    def build(guards: list) -> list:
        inner_cond = in_step + ("" if divisible else f" && {text(loop.cond)}")
        source = render("coalesce_chunk.cu.j2", unroll=unroll, chunk_init=f"{decl_type} {chunk} = {text(start)}",
                        chunk_cond=text(rename(loop.cond)), chunk_next=chunk_next,
                        guard=text(conj(guards)) if guards else None, unrolled=divisible,
                        inner_init=(f"{decl_type} {var} = {chunk}" if declared else f"{var} = {chunk}"),
                        inner_cond=inner_cond, inner_next=text(loop.next))
        stmts = parse_statements(source)
        loads = []
        for p in group:
            loads.append(Comment(_load_comment(p)))
            loads.extend(p.statements)
        for n in walk(stmts[0]):
            if isinstance(n, c_ast.Compound):
                new = []
                for item in n.block_items or []:
                    if is_placeholder(item, "__coalesce_loads__"):
                        new.extend(loads)
                    else:
                        new.append(item)
                n.block_items = new
            if isinstance(n, c_ast.For) and is_placeholder(n.stmt, "__coalesce_body__"):
                n.stmt = loop.stmt
        if single_step:
            note = f"coalesce: the {unroll} iterations of '{var}' read one staged step"
            body = [_at_start(item, chunk, start) for item in stmts[0].stmt.block_items]
            return [Comment(note), c_ast.Compound(body)] if any(isinstance(i, c_ast.Decl) for i in body) \
                else [Comment(note)] + body
        note = (f"coalesce: '{var}' loop unrolled by {unroll} around the staged tiles"
                + (", counting down as it did" if anchor.is_downward else "")
                + ("" if divisible else " (the last step may be partial)"))
        return [Comment(note)] + stmts

    return build
