"""The staged-tile plans (coalesce's staging, block merge's re-staging): for one block shape, which reads are
staged, in which tile, and why the others are not.

A read is planned if its tile can be made safely: the array is read-only and not aliased by stores the
tile would hide, the loop it is unrolled around (its *anchor*) counts up or down by a fixed step to an
ordered bound (`<`, `<=`; `>`, `>=`) that is the same for the block's threads and whose guards can be
sunk, and its subscript has a stageable shape (`geometry.classify`). Reads of the same element share a
tile, a staged loop inside another staged loop wins, and tiles are sized, padded against bank conflicts
and fitted into the block's shared memory; each plan's loader is built by `loader`.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis import AccessReport, analyze_kernel
from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.loops import Loop
from gpgpu_opt.analysis.symbolic import BDIM, GDIM, iterator_symbol
from gpgpu_opt.ast_util import walk
from gpgpu_opt.cuda_types import size_of
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.rewriting.tiles.geometry import Tile, choose_padding, classify, plan_loader, tile_extent
from gpgpu_opt.rewriting.tiles.loader import build_loader
from gpgpu_opt.rewriting.tiles.staged import Plan, anchor_loop

if TYPE_CHECKING:
    from gpgpu_opt.pass_api.context import PassContext     # the type only: the tiles take the pass's context

_ELEMENT = {t: size_of(t) for t in ("float", "double", "int", "unsigned int", "unsigned")}  # stageable types


def plan_reads(kernel: Kernel, ctx: PassContext, info: KernelInfo, block: tuple[int, int],
          threads: tuple[int, int] | None = None, steps: int = 1):
    """Plans for the reads staged when a block covers `block` outputs (the naive threads the tiles are
    planned for) with `threads` threads (who loads what: the same as `block`, or fewer rows of threads
    that each compute several rows of outputs). `steps`: tile steps of the request width taken at once
    by a loop (thread-block merge widens them so that every thread of a merged block loads)."""
    t = ctx.options.target
    threads = threads or block
    W = t.request_threads
    info.taken = set(info.base_taken)
    analysis = analyze_kernel(kernel, t, block, ctx.facts.bindings)
    plans: list[Plan] = []
    skipped: list[tuple[AccessReport, str]] = []
    for rep in analysis.reports:
        a = rep.access
        if a.mode != "read" or not a.understood or rep.coalescing is None or rep.coalescing.coalesced \
                or not rep.reuse:
            continue
        try:
            plans.append(_plan_access(rep, info, block, W))
        except Unsupported as why:
            skipped.append((rep, str(why)))
    # Share a tile between reads of the same element.
    merged: list[Plan] = []
    for p in plans:
        twin = next((q for q in merged if q.access.array == p.access.array and q.anchor is p.anchor
                     and sympy.expand(q.access.index - p.access.index) == 0 and q.frames_key == p.frames_key),
                    None)
        if twin is not None:
            twin.nodes.append(p.access.node)
        else:
            merged.append(p)
    plans = merged
    # One staging level per loop nest: a staged loop inside another staged loop wins.
    anchors = {id(p.anchor.node): p.anchor.node for p in plans if p.anchor is not None}
    kept = []
    for p in plans:
        if p.anchor is not None and any(other is not p.anchor.node and _inside(other, p.anchor.node, info)
                                        for other in anchors.values()):
            skipped.append((p.report, f"a loop inside '{p.anchor.var}' is staged already"))
            continue
        kept.append(p)
    plans = kept
    tops = [p.top_index for p in plans if p.anchor is None]
    first_top = min(tops) if tops else None
    for p in plans:
        p.load_index = first_top
    # Unroll factors per loop.
    unroll: dict[int, int] = {}
    for p in plans:
        if p.anchor is not None:
            u = p.shape.unroll_factor(W) * steps
            unroll[id(p.anchor.node)] = math.lcm(unroll.get(id(p.anchor.node), 1), u)
    chunk_vars: dict[int, str] = {}
    budget = t.shared_per_block
    row_var, col_var = info.fresh("rr"), info.fresh("cc")
    final = []
    for p in plans:
        p.unroll = unroll.get(id(p.anchor.node), 1) if p.anchor is not None else 1
        rows, cols = tile_extent(p.shape, p.unroll)
        param = info.params[p.access.array]
        elem = param.base_type
        name = info.fresh(f"tile_{p.access.array}")
        p.tile = Tile(name, elem, _ELEMENT[elem], p.shape, rows, cols)
        p.loader = plan_loader(rows, cols, threads, row_var, col_var)
        p.loader_vars = {row_var, col_var}
        pad, rdeg, wdeg = choose_padding(p.tile, threads, p.loader, t.shared_banks, t.bank_bytes, W)
        p.tile.pad = pad
        p.padding_note = (f"rows padded by {pad} so that reads are "
                          + ("conflict-free" if rdeg == 1 else f"{rdeg}-way bank conflicted")
                          + f" on {t.shared_banks} banks"
                          + ("" if wdeg == 1 else f" (loader writes {wdeg}-way)"))
        if p.tile.bytes > budget:
            info.taken.discard(name)
            skipped.append((p.report, f"the tile needs {p.tile.bytes} bytes of shared memory, "
                                      f"{budget} are left"))
            continue
        if p.anchor is not None:
            key = id(p.anchor.node)
            if key not in chunk_vars:
                chunk_vars[key] = info.fresh(f"{p.anchor.var}0")
            p.chunk_var = chunk_vars[key]
        try:
            build_loader(p, info, block, threads)
        except Unsupported as why:
            info.taken.discard(name)
            skipped.append((p.report, str(why)))
            continue
        budget -= p.tile.bytes
        final.append(p)
    # Thread-only tiles are loaded before the first top-level statement that uses one; the data must not
    # be overwritten between there and the read.
    tops = [p for p in final if p.anchor is None]
    if tops:
        first = min(p.top_index for p in tops)
        out = []
        for p in final:
            if p.anchor is None:
                why = _write_between(p, info, first)
                if why:
                    skipped.append((p.report, why))
                    continue
            out.append(p)
        final = out
    return final, skipped


def _inside(inner: c_ast.Node, outer: c_ast.Node, info: KernelInfo) -> bool:
    node = info.parents.get(id(inner))
    while node is not None:
        if node is outer:
            return True
        node = info.parents.get(id(node))
    return False


def _plan_access(rep: AccessReport, info: KernelInfo, block, W) -> Plan:
    a = info.by_node.get((id(rep.access.node), "read"))
    if a is None or a.index is None:
        raise Unsupported("the access cannot be analysed")
    param = info.params[a.array]
    if param.base_type not in _ELEMENT:
        raise Unsupported(f"elements of type {param.base_type} are not staged")
    if a.array in info.written:
        raise Unsupported(f"'{a.array}' is also written by the kernel")
    if not (isinstance(a.node.name, c_ast.ID) and a.node.name.name == a.array):
        raise Unsupported("the array is read through a pointer alias")
    frames = g.frames_to(a.node, info.parents, info.body)
    anchor = anchor_loop(a)
    index = sympy.expand(a.index.subs({BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: 1}))
    if index.free_symbols & set(GDIM.values()):
        raise Unsupported("the subscript uses gridDim")
    stride = 1
    if anchor is not None:
        # The loader's predicates test the loop condition at values up to a step ahead: it must hold at a
        # value exactly when the loop gets there, as an ordered bound in the loop's direction does.
        ordered = (">", ">=") if anchor.is_downward else ("<", "<=")
        if not (anchor.is_upward or anchor.is_downward) or anchor.comparison not in ordered \
                or anchor.bound is None:
            raise Unsupported(f"the '{anchor.var}' loop does not count up or down by a fixed step to a "
                              "bound it approaches (<, <= up; >, >= down)")
        stride = abs(anchor.step)
        if anchor.is_downward and not _signed_iterator(anchor, info):
            raise Unsupported(f"the '{anchor.var}' loop counts down with an iterator that is not a signed "
                              "integer (its steps end below the last value, which would wrap around)")
        for part in (anchor.node.init, anchor.node.cond, anchor.node.next):
            if part is not None and not info.uniform_header(part):
                raise Unsupported(f"the bounds of the '{anchor.var}' loop differ between the threads of a block")
        var, _, declared = g.loop_var(anchor.node)
        if not declared and _used_outside(var, anchor.node, info):
            raise Unsupported(f"'{anchor.var}' is used after its loop")
    shape = classify(index, block, iterator_symbol(anchor.var) if anchor else None, stride, W)
    if shape.col is None and shape.row is not None:
        raise Unsupported("each row would contribute a single element: staging cannot coalesce it")
    if shape.col is not None and shape.col.kind == "x" and int(shape.col.coef) == 1:
        raise Unsupported("neighbouring threads already read neighbouring words (the access is only "
                          "misaligned); staging would read the same segments")
    if shape.col is not None and shape.col.kind == "u" and int(shape.col.coef) % stride:
        raise Unsupported("the column stride is not a multiple of the loop step")
    path = g.path_to(anchor.node if anchor else a.node, info.parents, info.body)
    top_index = (info.body.block_items or []).index(path[1])
    if anchor is not None:
        g.check_sinkable(path, info.uniform, info.uniform_header, info.decl_counts)
        for node in path[1:-1]:
            if isinstance(node, c_ast.For):
                v, _, declared = g.loop_var(node)
                if v is None or (not declared and _used_outside(v, node, info)):
                    raise Unsupported("an enclosing loop's iterator is used after the loop")
        _check_loop_writes(a, anchor, info)
    plan = Plan(rep, a, anchor, shape, frames, path, top_index, [a.node])
    plan.frames_key = tuple((f.kind, id(f.node)) for f in frames)
    return plan


def _signed_iterator(loop: Loop, info: KernelInfo) -> bool:
    """Whether the loop's iterator is declared (once) with a signed integer type."""
    init = loop.node.init
    decls = init.decls if isinstance(init, c_ast.DeclList) else \
        [n for n in walk(info.body) if isinstance(n, c_ast.Decl) and n.name == loop.var]
    if len(decls) != 1:
        return False
    t = decls[0].type
    return isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType) \
        and set(t.type.names) <= {"signed", "int", "long", "short"}


def _used_outside(var: str, loop: c_ast.For, info: KernelInfo) -> bool:
    inside = {id(n) for n in walk(loop)}
    return any(isinstance(n, c_ast.ID) and n.name == var and id(n) not in inside for n in walk(info.body)
               if not isinstance(n, c_ast.Decl))


def _check_loop_writes(a: Access, anchor: Loop, info: KernelInfo) -> None:
    """A tile lives for one step of the unrolled loop: a store in the loop to an array that may alias
    the staged one could be read back by a later iteration of the same thread."""
    inside = {id(n) for n in walk(anchor.node.stmt)}
    for w in info.accesses:
        if w.mode == "write" and id(w.node) in inside:
            if not (info.params[a.array].is_restrict or info.params[w.array].is_restrict):
                raise Unsupported(f"the '{anchor.var}' loop writes '{w.array}', which may alias '{a.array}' "
                                  "(declare the pointers __restrict__)")
    for n in walk(anchor.node.stmt):
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) \
                and n.name.name not in info.pure_calls:
            raise Unsupported(f"the '{anchor.var}' loop calls {n.name.name}")


def _write_between(p: Plan, info: KernelInfo, first: int) -> str | None:
    """A thread-index tile is loaded before top-level statement `first`: a store after that point that can
    come before the read in the same thread (earlier in the code, or in a loop around both) to an array
    that may alias the staged one would be seen by the naive read and missed by the tile."""
    items = info.body.block_items or []
    region = {id(n) for s in items[first:p.top_index + 1] for n in walk(s)}
    restrict = info.params[p.access.array].is_restrict
    for w in info.accesses:
        if w.mode != "write" or id(w.node) not in region or restrict or info.params[w.array].is_restrict:
            continue
        if any(_may_precede(w.node, node, info) for node in p.nodes):
            return (f"'{w.array}' may be stored to before the read, and may alias '{p.access.array}' "
                    "(declare the pointers __restrict__)")
    return None


def _may_precede(write: c_ast.Node, read: c_ast.Node, info: KernelInfo) -> bool:
    pw = g.path_to(write, info.parents, info.body)
    pr = g.path_to(read, info.parents, info.body)
    k = 0
    while k + 1 < min(len(pw), len(pr)) and pw[k + 1] is pr[k + 1]:
        k += 1
    if any(isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)) for n in pw[:k + 1]):
        return True                       # a loop around both: an earlier iteration's store
    lca = pw[k]
    if k + 1 >= len(pw) or k + 1 >= len(pr):
        return True
    if isinstance(lca, c_ast.Assignment) and pw[k + 1] is lca.lvalue:
        return False                      # `out[..] = .. in[..] ..`: the store follows the read
    children = [c for _, c in lca.children()]
    wi = next(i for i, c in enumerate(children) if c is pw[k + 1])
    ri = next(i for i, c in enumerate(children) if c is pr[k + 1])
    return wi < ri
