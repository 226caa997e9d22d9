"""coalesce: stage non-coalesced global reads that have reuse through shared memory (paper §3.3).

This module is the pass's driver: which reads to stage, the notes for those it leaves alone, and putting
the result together (trying block shapes until one gets a plan, rewriting the kernel, its new launch).

For every global read that the analysis finds not coalesced on the target and whose data is reused, the
block loads the data the read needs over one *tile step* into a shared tile with coalesced requests
(consecutive threads read consecutive words of a row), then every thread reads its element from the tile:

- thread-index and constant subscripts (`A[idy]`, transpose's `in[x*cols + y]`): the block's footprint
  is loaded once, before the statement that uses it. A thread index in the row (`A[idx*W + c]`) makes a
  2-D tile whose rows are loaded by consecutive threads and read back transposed (`tile[threadIdx.x][..]`).
- loop-index subscripts `A[m*i + n]`: the loop is unrolled by U = W/gcd(m*step, W) (W = request width)
  and each step of U iterations stages the segment those iterations read; the unrolled loop keeps the
  original bound, so trip counts that are not a multiple of U (and steps other than 1) stay exact.
  A loop that counts down is unrolled the same way and keeps its order: its steps run from the loop's
  first value down, each step's tile holds the step's elements in address order (from the step's lowest
  value), and the step's iterations read it from the top.

Staged loads are predicated: a tile element is loaded only if the naive kernel reads it (the guard and
loop conditions of the thread and iteration that reads it), and set to 0 otherwise, so no access is added
that the naive kernel would not make. A thread-dependent guard around a staged loop is sunk into the
statements so that the loads and `__syncthreads()` run in block-uniform control flow. Tiles are padded
so that the shared reads and the loader's writes are free of bank conflicts on the target.

The kernel gets a new block shape (LaunchConfig): the paper's one request of W threads per block on the
paper's GPUs, a W x W block where a tile is read back transposed, and an occupancy-chosen block on
modern GPUs. Kernels whose meaning depends on the block shape are left alone, and so are kernels that
call a function that is not pure (`analysis.calls`: a `__device__` helper of its arguments only is fine).
Transposed tiles on GPUs whose requests are a whole warp (fermi and later) use the shape of NVIDIA's tiled
transpose: W x W/4 threads, each computing 4 rows of outputs (see `rewriting.tiles.rows`).

The pass's parts, one module each:

- `launch_shape`: the blocks to try, best first;
- `halo`: a stencil's footprint (reads at offsets around the thread's element, `analysis.footprint`) in
  one 2-D tile of the block's outputs plus the reach, where the model says it pays.

The staged tiles themselves are in `gpgpu_opt.rewriting.tiles`, which block merge shares: `plan` (for one
block, which reads are staged in which tiles, and why the others are not), `loader` (each tile's loader, its
global addresses and predicates), `rewrite` (the kernel rewritten with the tiles), `rows` (several rows of
outputs per thread for transposed tiles), `geometry` (tile shapes, padding). Another thread's view of an
expression and control flow are `rewriting.witness` and `rewriting.guards`.
"""
from __future__ import annotations

from typing import Callable, Mapping

from gpgpu_opt.analysis import AccessReport, analyze_kernel
from gpgpu_opt.analysis.accesses import AS_WRITTEN, Access
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.schedule import remember
from gpgpu_opt.pass_api.schedule import Staging, schedule_of
from gpgpu_opt.passes.coalesce.launch_shape import block_choices
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.pass_api.record import PassRecord
from gpgpu_opt.rewriting.tiles.plan import plan_reads
from gpgpu_opt.rewriting.tiles.rewrite import apply_plans
from gpgpu_opt.rewriting.tiles.rows import rows_problem
from gpgpu_opt.passes.coalesce.halo import stage_halos
from gpgpu_opt.analysis.footprint import footprints


#: A later pass's answer to "will you take this kernel as normalize left it?": why it will, or None.
Claim = Callable[[Kernel, PassContext, KernelInfo], "str | None"]


def run(kernel: Kernel, ctx: PassContext, later: Mapping[str, Claim] | None = None) -> Kernel:
    """Stage `kernel`'s reads, recording the staging in the schedule (`schedule.Staging`). `later`: the
    later passes that may claim the kernel, by name (the pass registry wires merge's); a claimed kernel is
    left to that pass where this compile runs it."""
    schedule = schedule_of(ctx, kernel)
    work = kernel.copy()
    fps, in_footprint, wanted = _reads_to_stage(work, ctx)
    staged, kind = _staged(kernel, work, ctx, fps, in_footprint, wanted, later or {})
    if kind is None or staged.launch is None:
        return staged
    launch = staged.launch
    ctx.schedule = schedule.with_(staging=Staging(kind, launch.outputs_per_block, launch.block))
    return remember(ctx.schedule, staged)


def _reads_to_stage(work: Kernel, ctx: PassContext) -> tuple[list, set[int], list[AccessReport]]:
    """`work`'s early returns normalized (in place), its footprints, the reads in them (by node id) and the
    other reads worth staging (with notes for those that are not)."""
    g.normalize_early_returns(work.body)
    naive = analyze_kernel(work, ctx.options.target, ctx.facts.naive_block, ctx.facts.bindings)
    fps = footprints([r.access for r in naive.reports], ctx.facts.bindings)
    in_footprint = {id(a.node) for fp in fps for a in fp.reads}
    return fps, in_footprint, _candidates(naive, ctx, in_footprint)


def lower_halo(kernel: Kernel, ctx: PassContext) -> Kernel:
    """A `Staging('halo')` lowered: the halo tiles `run` stages in `kernel` (rewritten in place)."""
    fps, _, wanted = _reads_to_stage(kernel, ctx)
    info = KernelInfo.of(kernel, ctx)
    info.check_kernel()
    if fps:
        stage_halos(kernel, ctx, info, footprints(info.accesses, ctx.facts.bindings), wanted)
    if kernel.launch is None:
        raise Unsupported("no halo tile is staged")
    return kernel


def lower_reads(kernel: Kernel, ctx: PassContext, block: tuple[int, int], threads: tuple[int, int],
                steps: int = 1, comment: str | None = None) -> Kernel:
    """A `Staging('reads')` lowered: `kernel` (rewritten in place) with the reads `plan_reads` stages for
    blocks of `threads` threads covering `block` outputs, loops taking `steps` tile steps at once;
    `comment` goes before the first tile."""
    g.normalize_early_returns(kernel.body)
    info = KernelInfo.of(kernel, ctx)
    info.check_kernel()
    plans, _ = plan_reads(kernel, ctx, info, block, threads, steps)
    if not plans:
        raise Unsupported(f"no read is staged for blocks of {threads[0]}x{threads[1]} threads")
    apply_plans(kernel, ctx, info, block, threads, plans)
    if comment:
        items = kernel.body.block_items
        items.insert(next(i for i, s in enumerate(items) if _is_tile(s)), Comment(comment))
    kernel.launch = LaunchConfig(block=threads, outputs_per_block=block)
    return kernel


def _is_tile(statement) -> bool:
    return "__shared__" in (getattr(statement, "storage", None) or [])


def _staged(kernel: Kernel, work: Kernel, ctx: PassContext, fps, in_footprint,
            wanted, later: Mapping[str, Claim]) -> tuple[Kernel, str | None]:
    """`work` with the reads staged and how ('reads' or 'halo'), or `kernel` (with notes on why not)."""
    if not wanted and not fps:
        return kernel, None
    where = Location.of(work.funcdef)
    if kernel.launch is not None:
        ctx.log.skip("kernel", "no access staged: an earlier pass fixed the block shape, which the tiles depend on",
                 where)
        return kernel, None
    try:
        info = KernelInfo.of(work, ctx)
        info.check_kernel()
    except Unsupported as why:
        ctx.log.skip("kernel", f"no access staged: {why}", where)
        return kernel, None
    if fps:
        fps = footprints(info.accesses, ctx.facts.bindings)       # the same reads, with their definitions
        with_halos = stage_halos(work, ctx, info, fps, wanted)
        if with_halos is not None:
            return work, "halo"
        if not wanted:
            return kernel, None
    for name, claim in later.items():
        why = claim(work, ctx, info) if name in ctx.options.passes else None
        if why:
            ctx.log.skip("kernel", f"no access staged: left to {name}: {why}", where)
            return kernel, None
    last_reason = None
    rows_note = None
    for block, threads, why_block in block_choices(work, ctx, wanted):
        reason = info.coverage_problem(ctx.facts.naive_block, block)
        if reason:
            last_reason = reason
            continue
        plans, skipped = plan_reads(work, ctx, info, block, threads)
        skipped = [(rep, why) for rep, why in skipped if id(rep.access.node) not in in_footprint]  # noted already
        if plans and threads != block:
            problem = rows_problem(info, plans)
            if problem:
                rows_note = (f"not {block[1] // threads[1]} rows per thread in {threads[0]}x{threads[1]} "
                             f"blocks: {problem}")
                continue
        if plans:
            break
        last_reason = None
    else:
        if last_reason:
            ctx.log.skip("kernel", f"no access staged: {last_reason}", where)
        else:
            for rep, why in skipped:
                ctx.log.skip(_subject(rep.access), f"not staged: {why}", rep.access.location)
        return kernel, None
    for rep, why in skipped:
        ctx.log.skip(_subject(rep.access), f"not staged: {why}", rep.access.location)
    apply_plans(work, ctx, info, block, threads, plans)
    work.launch = LaunchConfig(block=threads, outputs_per_block=block)
    for p in plans:
        ctx.log.applied(_subject(p.access), p.describe(ctx.options.target), p.access.location)
    if threads == block:
        how = f"blocks of {block[0]}x{block[1]} threads, one thread per output: {why_block}"
        if rows_note:
            how += f" ({rows_note})"
    else:
        how = (f"blocks of {threads[0]}x{threads[1]} threads, each covering {block[0]}x{block[1]} outputs "
               f"({block[1] // threads[1]} rows per thread, {threads[1]} apart): {why_block}")
    ctx.log.applied("launch", how, where)
    return work, "reads"


def _subject(a: Access) -> str:
    return f"{a.array}[{a.index_text}]"


def _candidates(analysis, ctx: PassContext, in_footprint: set[int]) -> list[AccessReport]:
    """The reads to stage (not coalesced, with reuse); reads of a footprint are the halo tile's."""
    out = []
    for rep in analysis.reports:
        a = rep.access
        if a.mode != "read" or id(a.node) in in_footprint:
            continue
        if a.kind in AS_WRITTEN:
            ctx.log.skip(_subject(a), f"not staged: {a.why_unresolved}; left as written", a.location)
            continue
        if not a.understood or rep.coalescing is None:
            ctx.log.skip(_subject(a), f"not staged: the subscript cannot be analysed ({a.why_unresolved or 'unknown'}); "
                                  "left as a global read", a.location)
            continue
        if rep.coalescing.coalesced:
            continue
        if not rep.reuse and rep.neighbours:
            ctx.log.skip(_subject(a), f"not staged: not coalesced; {rep.neighbours[0]['description']}: registers "
                                  "carried along z (merge's z march) and the L1 serve that reuse, not a shared tile", a.location)
            continue
        if not rep.reuse:
            ctx.log.skip(_subject(a), "not staged: not coalesced, but no other thread or iteration reads the same "
                                  "data, so staging through shared memory would not pay off", a.location)
            continue
        out.append(rep)
    return out


__all__ = ["run"]


def _lower_staging_entry(kernel: Kernel, ctx: PassContext, staging: Staging) -> Kernel:
    if staging.kind == "halo":
        return lower_halo(kernel, ctx)
    return lower_reads(kernel, ctx, staging.block, staging.threads, staging.steps, staging.comment)


PASS = PassRecord("coalesce", "uncoalesced reads with reuse staged through shared-memory tiles by coalesced loads "
                  "(a stencil's footprint in a halo tile)", run, steps={"staging": _lower_staging_entry},
                  asks=("merge",))
