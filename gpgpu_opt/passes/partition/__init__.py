"""partition: removing partition camping (paper §3.8).

Detection reuses the access analysis (`analysis.partition`): an access that involves blockIdx.x and whose
blocks running at once reach few DRAM partitions camps. The fix depends on the grid:
- `diagonal` (the kernel uses blockIdx.y, a 2-D grid): the blocks take their tiles in diagonal order;
- `rotation` (a 1-D grid): the loop that walks the camping access starts at a different step in each
  block.
It works on whatever the earlier passes left (staged tiles, merged blocks, a new launch): the analysis
uses the kernel's current block. A loop the prefetch pass staged in registers carries them from one step
to the next, so the rotation is planned on the schedule's lowering without its prefetch entry, which is then
lowered after it (passes/schedule.py: the block order comes before the prefetch).

On by default only for targets that camp (g80, gt200). Later GPUs hash addresses across their channels,
so there the pass only says what it would do, unless `--passes ...,partition` names it: it then runs
against `REFERENCE_GEOMETRY` (what `tune` measures).
"""
from __future__ import annotations

from gpgpu_opt.analysis.accesses import Access, collect_accesses
from gpgpu_opt.analysis.partition import REFERENCE_GEOMETRY, camps_between_blocks, describe, partition_camping
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.record import PassRecord
from gpgpu_opt.pass_api.schedule import remember
from gpgpu_opt.pass_api.schedule import BlockOrder, Schedule, schedule_of
from gpgpu_opt.passes.partition import diagonal, rotation
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Remove `kernel`'s partition camping, recording the block order in the schedule
    (`schedule.BlockOrder`; it is lowered before the prefetch entry)."""
    geometry = ctx.options.target.partition_camping
    asked = geometry is None and "partition" in ctx.options.named
    rotating = not diagonal.uses_block_y(kernel)
    schedule = schedule_of(ctx, kernel)
    unprefetched = schedule.without("prefetch")
    # The rotation is planned on the loop before prefetching (a prefetched loop carries the next step's
    # data from one iteration to the next); the diagonal order only renames blocks, found where they are.
    base = ctx.lower(unprefetched) if schedule.prefetch is not None else kernel
    campers = camping_accesses(base if rotating else kernel, ctx, geometry or REFERENCE_GEOMETRY)
    if not campers:
        return kernel
    access, found = campers[0]
    subject = f"{access.array}[{access.index_text}]"
    where = access.location or Location.of(kernel.funcdef)
    width, count = geometry or REFERENCE_GEOMETRY
    if geometry is None and not asked:
        ctx.log.skip(subject, f"not applied: {ctx.options.target.name} hashes addresses across its memory channels, so the "
                          f"blocks do not camp as they would on {count} partitions of {width} bytes; ask with "
                          "--passes ...,partition", where)
        return kernel
    block = kernel.launch.block if kernel.launch is not None else ctx.facts.naive_block
    why = f"{describe(access, found, block, ctx.facts.bindings)} ({count} partitions of {width} bytes" + \
        (f", asked for with --passes although {ctx.options.target.name} hashes addresses)" if asked else ")")
    work = base.copy()
    order = BlockOrder("rotation" if rotating else "diagonal", subject)
    try:
        if not rotating:
            plan = diagonal.plan_diagonal(work, ctx)
            diagonal.apply_diagonal(work, plan)
            notes = [f"{why}: {diagonal.describe(plan)}"]
        else:
            notes = [f"{why}: {rotation.describe(plan)}" for plan in _rotate(work, ctx)]
        remember(unprefetched.with_(block_order=order), work)
        ctx.schedule = schedule.with_(block_order=order)
        done = _prefetched_again(ctx.schedule, ctx)
    except Unsupported as reason:
        ctx.log.skip(subject, f"camping left as it is: {reason}", where)
        ctx.schedule = schedule
        return kernel
    if rotating and schedule.prefetch is not None:
        notes = [f"{note}; the prefetch of {schedule.prefetch.subject} is made again on the rotated loop: each "
                 "step loads the rotated next step's data, the last step none" for note in notes]
    for note in notes:
        ctx.log.applied(subject, note, where)
    return done


def lower_block_order(kernel: Kernel, ctx: PassContext, kind: str) -> Kernel:
    """A `schedule.BlockOrder` lowered on `kernel` (rewritten in place)."""
    if kind == "diagonal":
        diagonal.apply_diagonal(kernel, diagonal.plan_diagonal(kernel, ctx))
    else:
        _rotate(kernel, ctx)
    return kernel


def _prefetched_again(schedule: Schedule, ctx: PassContext) -> Kernel:
    """The lowering of `schedule`, whose prefetch entry (if any) is made again on the reordered loop."""
    try:
        return ctx.lower(schedule)
    except Unsupported as failed:
        if schedule.prefetch is None:
            raise
        raise Unsupported(f"the prefetch pass's loop could not be prefetched again once rotated ({failed}); "
                          "the prefetch stays") from failed


def camping_accesses(kernel: Kernel, ctx: PassContext, geometry: tuple[int, int]) -> list[tuple[Access, dict]]:
    """The accesses of `kernel` that camp on `geometry`, with the analysis's finding for each."""
    block = kernel.launch.block if kernel.launch is not None else ctx.facts.naive_block
    found = []
    for access in collect_accesses(kernel):
        result = partition_camping(access, ctx.options.target, block, ctx.facts.bindings, geometry)
        if camps_between_blocks(access, result, geometry[0]):
            found.append((access, result))
    return found


def _rotate(work: Kernel, ctx: PassContext) -> list:
    """Rotate (in place) each loop that walks a camping access (the outermost such loop of each); returns
    the rotations."""
    info = KernelInfo.of(work, ctx)
    loops = []
    for access, _ in camping_accesses(work, ctx, ctx.options.target.partition_camping or REFERENCE_GEOMETRY):
        loop = rotation.loop_to_rotate(access)
        if loop is not None and all(loop.node is not l.node for l in loops):
            loops.append(loop)
    inside = {id(n) for loop in loops for n in walk(loop.node.stmt)}
    loops = [loop for loop in loops if id(loop.node) not in inside]
    rotated = {id(n) for loop in loops for n in walk(loop.node)}
    volatile = sorted({a.array for a in info.accesses if a.volatile and id(a.node) in rotated})
    if volatile:
        raise Unsupported(f"the loop accesses volatile {', '.join(volatile)}, whose accesses keep their order")
    if not loops:
        raise Unsupported("no loop moves the camping accesses' addresses (a 1-D grid has no other fix)")
    plans = [rotation.plan_rotation(work, ctx, loop, info) for loop in loops]
    for plan in plans:
        rotation.apply_rotation(work, info, plan)
    return plans


def _lower_block_order_entry(kernel: Kernel, ctx: PassContext, order: BlockOrder) -> Kernel:
    return lower_block_order(kernel, ctx, order.kind)


PASS = PassRecord("partition", "partition camping removed: diagonal block order on 2-D grids, a rotated loop start "
                  "on 1-D ones (by default only on targets that camp)", run,
                  steps={"block_order": _lower_block_order_entry})
