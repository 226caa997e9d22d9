"""coalesce: stage non-coalesced global reads that have reuse through shared memory (paper §3.3).

For every global read that the analysis finds not coalesced on the target and whose data is reused, the
block loads the data the read needs over one *tile step* into a shared tile with coalesced requests
(consecutive threads read consecutive words of a row), then every thread reads its element from the tile:

- thread-index and constant subscripts (`A[idy]`, transpose's `in[x*cols + y]`): the block's footprint
  is loaded once, before the statement that uses it. A thread index in the row (`A[idx*W + c]`) makes a
  2-D tile whose rows are loaded by consecutive threads and read back transposed (`tile[threadIdx.x][..]`).
- loop-index subscripts `A[m*i + n]`: the loop is unrolled by U = W/gcd(m*step, W) (W = request width)
  and each step of U iterations stages the segment those iterations read; the unrolled loop keeps the
  original bound, so trip counts that are not a multiple of U (and steps other than 1) stay exact.

Staged loads are predicated: a tile element is loaded only if the naive kernel reads it (the guard and
loop conditions of the thread and iteration that reads it), and set to 0 otherwise, so no access is added
that the naive kernel would not make. A thread-dependent guard around a staged loop is sunk into the
statements so that the loads and `__syncthreads()` run in block-uniform control flow. Tiles are padded
so that the shared reads and the loader's writes are free of bank conflicts on the target.

The kernel gets a new block shape (LaunchConfig): the paper's one request of W threads per block on the
paper's GPUs, a W x W block where a tile is read back transposed, and an occupancy-chosen block on
modern GPUs. Kernels whose meaning depends on the block shape are left alone.

Transposed tiles on GPUs whose requests are a whole warp (fermi and later) use the shape of NVIDIA's tiled
transpose instead of one thread per output: a W x W/4 block covers W x W outputs, loads the tile in 4
passes of W/4 rows and, after the barrier, computes 4 rows of outputs, W/4 apart, per thread. One load
per thread before a barrier keeps too few bytes in flight on those GPUs (the W x W shape is no faster than
the naive kernel on an H200); 4 independent loads per thread do. This is only done where it is a pure
re-scheduling of the naive threads: the tiles are loaded once, before the per-output statements (no
staged loop, hence no barrier among them), and every statement before the load is a declaration. The
per-output statements then run once per row with threadIdx.y replaced by threadIdx.y + r (blockDim.y by
W); declarations that do not depend on the row stay before the load, and one that is the global y index
plus a row-independent part becomes `y0` there and `y = y0 + r` in the rows.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis import AccessReport, analyze_kernel, uses_y
from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.loops import Loop
from gpgpu_opt.analysis.symbolic import BDIM, GDIM, TID, NotAffine, iterator_symbol, param_symbol, to_sympy
from gpgpu_opt.ast_util import ids_in, substitute, transform, walk
from gpgpu_opt.codegen import Comment
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.passes import guards as g
from gpgpu_opt.passes.context import PassContext
from gpgpu_opt.passes.staging import (Shape, Tile, Unsupported, Witness, add, check_monotone, choose_padding,
                                      classify, conj, const, fold, loader_statements, mul, parse_expr,
                                      parse_statements, plan_loader, read_ref, text, tile_extent)
from gpgpu_opt.templating import render

_ELEMENT = {"float": 4, "double": 8, "int": 4, "unsigned int": 4, "unsigned": 4}
#: Rows of a transposed tile's outputs that one thread computes on GPUs with warp-wide requests (NVIDIA's
#: tiled transpose: TILE 32, blocks of 32x8).
_ROWS_PER_THREAD = 4


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    work = kernel.copy()
    g.normalize_early_returns(work.body)
    naive = analyze_kernel(work, ctx.target, ctx.naive_block, ctx.bindings)
    wanted = _candidates(naive, ctx)
    if not wanted:
        return kernel
    where = Location.of(work.funcdef)
    if kernel.launch is not None:
        ctx.skip("kernel", "no access staged: an earlier pass fixed the block shape, which the tiles depend on",
                 where)
        return kernel
    try:
        info = g.KernelInfo(work, ctx)
        info.check_kernel()
    except Unsupported as why:
        ctx.skip("kernel", f"no access staged: {why}", where)
        return kernel
    last_reason = None
    rows_note = None
    for block, threads, why_block in _block_choices(work, ctx, wanted):
        reason = info.coverage_problem(ctx.naive_block, block)
        if reason:
            last_reason = reason
            continue
        plans, skipped = _plan(work, ctx, info, block, threads)
        if plans and threads != block:
            problem = _rows_problem(info, plans)
            if problem:
                rows_note = (f"not {block[1] // threads[1]} rows per thread in {threads[0]}x{threads[1]} "
                             f"blocks: {problem}")
                continue
        if plans:
            break
        last_reason = None
    else:
        if last_reason:
            ctx.skip("kernel", f"no access staged: {last_reason}", where)
        else:
            for rep, why in skipped:
                ctx.skip(_subject(rep.access), f"not staged: {why}", rep.access.location)
        return kernel
    for rep, why in skipped:
        ctx.skip(_subject(rep.access), f"not staged: {why}", rep.access.location)
    _apply(work, ctx, info, block, threads, plans)
    work.launch = LaunchConfig(block=threads, outputs_per_block=block)
    for p in plans:
        ctx.applied(_subject(p.access), p.describe(ctx.target), p.access.location)
    if threads == block:
        how = f"blocks of {block[0]}x{block[1]} threads, one thread per output: {why_block}"
        if rows_note:
            how += f" ({rows_note})"
    else:
        how = (f"blocks of {threads[0]}x{threads[1]} threads, each covering {block[0]}x{block[1]} outputs "
               f"({block[1] // threads[1]} rows per thread, {threads[1]} apart): {why_block}")
    ctx.applied("launch", how, where)
    return work


def _subject(a: Access) -> str:
    return f"{a.array}[{a.index_text}]"


def _candidates(analysis, ctx: PassContext) -> list[AccessReport]:
    out = []
    for rep in analysis.reports:
        a = rep.access
        if a.mode != "read":
            continue
        if a.kind == "unresolved" or rep.coalescing is None:
            ctx.skip(_subject(a), f"not staged: the subscript cannot be analysed ({a.why_unresolved or 'unknown'}); "
                                  "left as a global read", a.location)
            continue
        if rep.coalescing.coalesced:
            continue
        if not rep.reuse:
            ctx.skip(_subject(a), "not staged: not coalesced, but no other thread or iteration reads the same "
                                  "data, so staging through shared memory would not pay off", a.location)
            continue
        out.append(rep)
    return out


# -- choosing the block ---------------------------------------------------------------------------------
def _block_choices(kernel: Kernel, ctx: PassContext, wanted: list[AccessReport]):
    """Blocks to try, best first: (outputs per block, threads per block, the reason for the report)."""
    t = ctx.target
    W = t.request_threads
    two_d = uses_y(kernel, [r.access for r in wanted]) or ctx.naive_block[1] > 1
    transposed = False
    for r in wanted:
        e = sympy.expand(r.access.index)
        cy, cx = e.coeff(TID["y"]), e.coeff(TID["x"])
        if cy.is_Integer and 0 < int(cy) < W and cx != 0 and not (cx.is_Integer and 0 < int(cx) < W):
            transposed = True
    choices = []
    if transposed:
        k = _ROWS_PER_THREAD
        if t.request_threads == t.warp_size and W % k == 0 and W * (W // k) <= t.max_threads_per_block:
            # A warp-wide request reads a whole tile row: W x W/k threads load the tile in k passes, each
            # thread with k independent loads in flight before the barrier, then compute k rows each.
            choices.append(((W, W), (W, W // k),
                            f"the {W}x{W} tile is loaded with x and y swapped, so the global read is coalesced, "
                            f"in {k} passes of {W // k} rows (each thread has {k} loads in flight before the "
                            f"barrier), and read back transposed"))
        choices.append(((W, W), (W, W), f"a {W}x{W} block loads a {W}x{W} tile with x and y swapped, so the "
                                        f"global read is coalesced, and reads it back transposed"))
    elif t.coalescing_rule in ("strict", "segments"):
        what = "rows of the 2-D thread space" if two_d else "a 1-D block"
        block = (W, 1)
        choices.append((block, block, f"one request of {W} threads per block ({what}), as in the paper; "
                                      "merging enlarges it later"))
    else:
        block, why = _occupancy_block(kernel, ctx, wanted, two_d)
        choices.append((block, block, why))
    limit = _launch_bound(kernel)
    if limit:
        choices = [c for c in choices if c[1][0] * c[1][1] <= limit]
    naive = tuple(ctx.naive_block)
    if naive not in [c[0] for c in choices] and naive[0] * naive[1] <= t.max_threads_per_block:
        choices.append((naive, naive, "the naive block (the preferred block does not cover the naive thread "
                                      "space exactly and the kernel has no guard)"))
    return choices


def _launch_bound(kernel: Kernel) -> int | None:
    """The maximum threads per block of `__launch_bounds__(N[, ...])`, if the kernel has it."""
    if not kernel.launch_bounds:
        return None
    try:
        return int(str(kernel.launch_bounds[0]).split(",")[0].strip().rstrip("uUlL"), 0)
    except ValueError:
        return 1   # not a literal: only the naive block is safe


def _occupancy_block(kernel, ctx, wanted, two_d):
    t = ctx.target
    W = t.request_threads
    shapes = [(W, h) for h in (1, 2, 4, 8)] if two_d else [(W * k, 1) for k in (1, 2, 4, 8)]
    best = None
    for block in shapes:
        threads = block[0] * block[1]
        if threads > t.max_threads_per_block:
            continue
        smem = 0
        for r in wanted:
            smem += _estimate_tile_bytes(r.access, block, W)
        if smem > t.shared_per_block:
            continue
        resident = min(t.max_blocks_per_sm, t.max_threads_per_sm // threads,
                       t.shared_per_sm // smem if smem else 1 << 30)
        key = (resident * threads, -threads)
        if best is None or key > best[0]:
            best = (key, block, resident, smem)
    if best is None:
        return (W, 1), "one warp per block (larger tiles do not fit)"
    _, block, resident, smem = best
    return block, (f"{block[0] * block[1]} threads per block keep the most threads resident per SM "
                   f"({resident} blocks of {smem} bytes of shared memory)")


def _estimate_tile_bytes(a: Access, block, W) -> int:
    try:
        index = a.index.subs({BDIM["x"]: block[0], BDIM["y"]: block[1]})
        anchor = _anchor(a)
        shape = classify(index, block, iterator_symbol(anchor.var) if anchor else None,
                         anchor.step if anchor else 1, W)
        rows, cols = tile_extent(shape, shape.unroll_factor(W))
        return rows * (cols + (1 if rows > 1 else 0)) * a.element_bytes
    except Unsupported:
        return 0


def _anchor(a: Access) -> Loop | None:
    """The innermost enclosing loop whose iterator the subscript uses: the loop that gets unrolled."""
    free = a.index.free_symbols
    for loop in reversed(a.loops):
        if iterator_symbol(loop.var) in free:
            return loop
    return None


# -- planning -------------------------------------------------------------------------------------------
@dataclass
class Plan:
    report: AccessReport
    access: Access
    anchor: Loop | None
    shape: Shape
    frames: list
    site_path: list                  # body ... anchor loop (or the top-level statement)
    top_index: int                   # index of the top-level statement containing the access
    nodes: list = field(default_factory=list)
    tile: Tile | None = None
    loader: object = None
    unroll: int = 1
    chunk_var: str | None = None
    statements: list = field(default_factory=list)
    padding_note: str = ""
    frames_key: tuple = ()
    load_index: int | None = None
    loader_vars: set = field(default_factory=set)

    def describe(self, target) -> str:
        t = self.tile
        dims = f"[{t.rows}][{t.cols + t.pad}]" if t.two_d else f"[{t.cols}]"
        if self.anchor is not None:
            m = int(self.shape.col.coef) if self.shape.col is not None and self.shape.col.kind == "u" else None
            how = (f"the '{self.anchor.var}' loop is unrolled by {self.unroll}"
                   + (f" (W/gcd({m}, W) = {target.request_threads // math.gcd(m, target.request_threads)})"
                      if m else "")
                   + f" and each step's data is loaded with coalesced requests into {t.name}{dims}")
        else:
            how = f"the block's data is loaded once with coalesced requests into {t.name}{dims}"
        if t.two_d:
            how += f", rows read back transposed; {self.padding_note}"
        return f"staged through shared memory: {how}"


def _plan(kernel: Kernel, ctx: PassContext, info: g.KernelInfo, block: tuple[int, int],
          threads: tuple[int, int] | None = None):
    """Plans for the reads staged when a block covers `block` outputs (the naive threads the tiles are
    planned for) with `threads` threads (who loads what: the same as `block`, or fewer rows of threads
    that each compute several rows of outputs)."""
    t = ctx.target
    threads = threads or block
    W = t.request_threads
    info.taken = set(info.base_taken)
    analysis = analyze_kernel(kernel, t, block, ctx.bindings)
    plans: list[Plan] = []
    skipped: list[tuple[AccessReport, str]] = []
    for rep in analysis.reports:
        a = rep.access
        if a.mode != "read" or a.kind == "unresolved" or rep.coalescing is None or rep.coalescing.coalesced \
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
            u = p.shape.unroll_factor(W)
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
            _build_loader(p, info, block)
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


def _inside(inner: c_ast.Node, outer: c_ast.Node, info: g.KernelInfo) -> bool:
    node = info.parents.get(id(inner))
    while node is not None:
        if node is outer:
            return True
        node = info.parents.get(id(node))
    return False


def _plan_access(rep: AccessReport, info: g.KernelInfo, block, W) -> Plan:
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
    anchor = _anchor(a)
    index = sympy.expand(a.index.subs({BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: 1}))
    if index.free_symbols & set(GDIM.values()):
        raise Unsupported("the subscript uses gridDim")
    step = 1
    if anchor is not None:
        if anchor.multiplicative or anchor.step <= 0 or anchor.comparison not in ("<", "<=") \
                or anchor.bound is None:
            raise Unsupported(f"the '{anchor.var}' loop is not an upward loop with a fixed step")
        step = anchor.step
        for part in (anchor.node.init, anchor.node.cond, anchor.node.next):
            if part is not None and not info.uniform_header(part):
                raise Unsupported(f"the bounds of the '{anchor.var}' loop differ between the threads of a block")
        var, _, declared = g.loop_var(anchor.node)
        if not declared and _used_outside(var, anchor.node, info):
            raise Unsupported(f"'{anchor.var}' is used after its loop")
    shape = classify(index, block, iterator_symbol(anchor.var) if anchor else None, step, W)
    if shape.col is None and shape.row is not None:
        raise Unsupported("each row would contribute a single element: staging cannot coalesce it")
    if shape.col is not None and shape.col.kind == "x" and int(shape.col.coef) == 1:
        raise Unsupported("neighbouring threads already read neighbouring words (the access is only "
                          "misaligned); staging would read the same segments")
    if shape.col is not None and shape.col.kind == "u" and int(shape.col.coef) % step:
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


def _used_outside(var: str, loop: c_ast.For, info: g.KernelInfo) -> bool:
    inside = {id(n) for n in walk(loop)}
    return any(isinstance(n, c_ast.ID) and n.name == var and id(n) not in inside for n in walk(info.body)
               if not isinstance(n, c_ast.Decl))


def _check_loop_writes(a: Access, anchor: Loop, info: g.KernelInfo) -> None:
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
                and n.name.name not in g.pure_functions():
            raise Unsupported(f"the '{anchor.var}' loop calls {n.name.name}")


def _write_between(p: Plan, info: g.KernelInfo, first: int) -> str | None:
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


def _may_precede(write: c_ast.Node, read: c_ast.Node, info: g.KernelInfo) -> bool:
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


# -- the loader of one tile -------------------------------------------------------------------------------
def _visible(plan: Plan, info: g.KernelInfo) -> set[str]:
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


def _build_loader(p: Plan, info: g.KernelInfo, block) -> None:
    a, shape, tile, loader = p.access, p.shape, p.tile, p.loader
    env = a.extra.get("env", {})
    row_ast = parse_expr(loader.row)
    col_ast = parse_expr(loader.col)
    visible = _visible(p, info)
    allowed = set(p.loader_vars) | ({p.chunk_var} if p.chunk_var else set())
    step = p.anchor.step if p.anchor is not None else 1

    def iteration(offset: c_ast.Node | None) -> c_ast.Node:
        base = c_ast.ID(p.chunk_var)
        return base if offset is None else add(base, mul(offset, step))

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
            addr_iter[var] = pred_iter[var] = iteration(row_ast)
        else:
            addr_iter[var] = iteration(None)
            # Element col is read at iteration col / m (m elements per iteration) when that is whole;
            # otherwise it lies between two reads of the row, and is in range if the later one is.
            pred_iter[var] = iteration(_ceil_div(col_ast, int(shape.col.coef)))
    # The global address of tile[row][col]: the subscript at the step's first column, plus the column.
    address_of = Witness(info, env, block, addr_axes, addr_iter, visible, allowed)
    subscript = address_of(a.node.subscript)
    if shape.col is not None:
        subscript = c_ast.BinaryOp("+", subscript, col_ast)
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
            first = g_subst_id(f.node.cond, var, start)
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
    p.statements = loader_statements(tile, loader, load, conj(clauses))


# -- rewriting the kernel -------------------------------------------------------------------------------
def _apply(kernel: Kernel, ctx: PassContext, info: g.KernelInfo, block, threads, plans: list[Plan]) -> None:
    body = kernel.body
    # 1. The staged reads become shared-memory reads.
    replacement = {}
    for p in plans:
        step = p.anchor.step if p.anchor is not None else 1
        for node in p.nodes:
            replacement[id(node)] = read_ref(p.tile, p.anchor.var if p.anchor else None, p.chunk_var, step)
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
            items, insert_at = _rows_rewrite(items, insert_at, info, block, threads)
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
        transform(body, lambda n: const(block[1]) if _is_builtin(n, "blockDim", "y") else None)


# -- several rows of outputs per thread ---------------------------------------------------------------------
def _rows_problem(info: g.KernelInfo, plans: list[Plan]) -> str | None:
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
    return any(_is_builtin(n, "threadIdx", "y") for n in walk(node))


def _split_rows(leading: list[c_ast.Decl], info: g.KernelInfo) -> list[tuple[c_ast.Decl, str]]:
    """Where each declaration before the tile load goes when a thread computes several rows: 'hoist' (a
    value that is the same in every row: stays before the load), 'offset' (row-independent part + the
    thread's y index: `v0` before the load, `v = v0 + r` in the rows) or 'row' (computed in the rows)."""
    env = info._flat_env()
    per_row: set[str] = set()
    out = []
    for d in leading:
        fixed = d.init is not None and isinstance(d.type, c_ast.TypeDecl) and d.name not in info.assigned \
            and info.decl_counts.get(d.name, 0) == 1 and g.is_pure(d.init)
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


def _rows_rewrite(items: list, first: int, info: g.KernelInfo, block, threads) -> tuple[list, int]:
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
                             for s in (rows if _is_placeholder(item, "__coalesce_rows__") else [item])]
            break
    note = (f"coalesce: each thread computes {height // step} rows of the block's {block[0]}x{height} outputs, "
            f"{step} apart")
    return hoisted + [Comment(note)] + loop, len(hoisted)


def _is_builtin(n: c_ast.Node, name: str, axis: str) -> bool:
    return isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name == name \
        and isinstance(n.field, c_ast.ID) and n.field.name == axis


def _shift_rows(stmt: c_ast.Node, var: str) -> c_ast.Node:
    """`stmt` for the thread's row `threadIdx.y + var` of the block's outputs."""
    def shift(n):
        if _is_builtin(n, "threadIdx", "y"):
            return c_ast.BinaryOp("+", n, c_ast.ID(var))
        return None
    return transform(copy.deepcopy(stmt), shift)


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
        trip = trip.subs({param_symbol(k): v for k, v in ctx.bindings.items()})
        divisible = bool(trip.is_Integer and int(trip) % unroll == 0)
    step = anchor.step
    span = unroll * step

    def rename(node):
        return g_subst_id(node, var, c_ast.ID(chunk))

    def build(guards: list) -> list:
        inner_cond = f"{var} < {chunk} + {span}" + ("" if divisible else f" && {text(loop.cond)}")
        source = render("coalesce_chunk.cu.j2", unroll=unroll, chunk_init=f"{decl_type} {chunk} = {text(start)}",
                        chunk_cond=text(rename(loop.cond)), chunk_var=chunk, chunk_step=span,
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
                    if _is_placeholder(item, "__coalesce_loads__"):
                        new.extend(loads)
                    else:
                        new.append(item)
                n.block_items = new
            if isinstance(n, c_ast.For) and _is_placeholder(n.stmt, "__coalesce_body__"):
                n.stmt = loop.stmt
        note = (f"coalesce: '{var}' loop unrolled by {unroll} around the staged tiles"
                + ("" if divisible else " (the last step may be partial)"))
        return [Comment(note)] + stmts

    return build


def _is_placeholder(node, name: str) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and node.name.name == name


def g_subst_id(node: c_ast.Node, name: str, value: c_ast.Node) -> c_ast.Node:
    return substitute(node, {name: value})


__all__ = ["run"]
