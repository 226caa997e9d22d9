"""partition: removing partition camping (paper §3.8).

Detection reuses the access analysis (`analysis.partition`): an access that involves blockIdx.x and whose
blocks running at once reach few DRAM partitions camps. The fix depends on the grid:
- `diagonal` (the kernel uses blockIdx.y, a 2-D grid): the blocks take their tiles in diagonal order;
- `rotation` (a 1-D grid): the loop that walks the camping access starts at a different step in each
  block.
It works on whatever the earlier passes left (staged tiles, merged blocks, a new launch): the analysis
uses the kernel's current block. A loop the prefetch pass staged in registers carries them from one step
to the next, so the rotation re-plans it from the kernel prefetch received, and prefetches it again.

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
from gpgpu_opt.passes.context import PassContext
from gpgpu_opt.passes.partition import diagonal, rotation
from gpgpu_opt.passes.prefetch import prefetched
from gpgpu_opt.passes.prefetch.staged_loop import NotStaged
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    geometry = ctx.options.target.partition_camping
    asked = geometry is None and "partition" in ctx.options.named
    rotating = not diagonal.uses_block_y(kernel)
    base = _before_prefetch(kernel, ctx) if rotating else None
    campers = camping_accesses(base or kernel, ctx, geometry or REFERENCE_GEOMETRY)
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
    work = (base or kernel).copy()
    try:
        if not rotating:
            plan = diagonal.plan_diagonal(work, ctx)
            diagonal.apply_diagonal(work, plan)
            ctx.log.applied(subject, f"{why}: {diagonal.describe(plan)}", where)
            return work
        return _rotate(work, ctx, subject, why, where, again=base is not None)
    except Unsupported as reason:
        ctx.log.skip(subject, f"camping left as it is: {reason}", where)
        return kernel


def _before_prefetch(kernel: Kernel, ctx: PassContext) -> Kernel | None:
    """The kernel as the prefetch pass received it, where that pass changed it: its staged loop carries
    the next step's registers from one iteration to the next, so the loop to rotate is the one before."""
    prefetched = any(d.pass_name == "prefetch" and d.action == "applied" for d in ctx.log.decisions)
    return ctx.received.get("prefetch") if prefetched else None


def camping_accesses(kernel: Kernel, ctx: PassContext, geometry: tuple[int, int]) -> list[tuple[Access, dict]]:
    """The accesses of `kernel` that camp on `geometry`, with the analysis's finding for each."""
    block = kernel.launch.block if kernel.launch is not None else ctx.facts.naive_block
    found = []
    for access in collect_accesses(kernel):
        result = partition_camping(access, ctx.options.target, block, ctx.facts.bindings, geometry)
        if camps_between_blocks(access, result, geometry[0]):
            found.append((access, result))
    return found


def _rotate(work: Kernel, ctx: PassContext, subject: str, why: str, where, again: bool) -> Kernel:
    """Rotate each loop that walks a camping access (the outermost such loop of each); `again`: `work` is
    the kernel before prefetching, which is then done again on the rotated loop."""
    info = KernelInfo(work, ctx)
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
    prefetch_note = ""
    if again:
        try:
            work, staged, _ = prefetched(work, ctx)
        except (NotStaged, Unsupported) as failed:
            raise Unsupported(f"the prefetch pass's loop could not be prefetched again once rotated ({failed}); "
                              "the prefetch stays") from failed
        prefetch_note = f"; the prefetch of {staged} is made again on the rotated loop: each step loads the " \
                        "rotated next step's data, the last step none"
    for plan in plans:
        ctx.log.applied(subject, f"{why}: {rotation.describe(plan)}{prefetch_note}", where)
    return work
