"""Lowering: the kernel a schedule describes, generated from its source in one fixed order (schedule.py):

    widening -> staging (with its final block) -> merge -> rows per thread -> block order -> prefetch

Each step applies one pass's builder to the kernel the steps before it lowered; it decides nothing the entry
does not say (a builder may re-derive its plan from the kernel it is given, as its pass did: the plans point
into a kernel's own nodes, so they cannot be carried over from another copy). Its notes are not told: the
pass told them when it decided.

Lowered kernels are kept by entries (`Schedule.lowered`), so a schedule whose prefix was lowered before
starts from that kernel; a pass that built its own step while deciding (coalesce tries blocks by building
them) hands it over with `schedule.remember` instead of having it built twice.
"""
from __future__ import annotations

from dataclasses import replace

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.context import DecisionLog, PassContext
from gpgpu_opt.passes import coalesce, partition
from gpgpu_opt.passes import merge as merges
from gpgpu_opt.passes.merge.thread_merge_staged import lower_rows
from gpgpu_opt.passes.prefetch import prefetched
from gpgpu_opt.passes.prefetch.staged_loop import NotStaged
from gpgpu_opt.passes.vectorize import lower_widening
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.passes.schedule import ENTRY_ORDER, BlockOrder, Merge, Prefetch, Rows, Schedule, Staging, Widening


def lower(schedule: Schedule, ctx: PassContext) -> Kernel:
    """The kernel `schedule` describes (a new copy, the caller's to change). A step that cannot be built
    raises Unsupported."""
    entries = schedule.entries()
    kept = schedule.lowered.get(entries)
    if kept is None:
        last = max((i for i, entry in enumerate(entries) if entry is not None), default=None)
        if last is None:
            kept = schedule.source.copy()
        else:
            before = lower(schedule.without(*ENTRY_ORDER[last:]), ctx)
            kept = _STEPS[ENTRY_ORDER[last]](before, quiet(ctx), entries[last])
        schedule.lowered[entries] = kept
    return kept.copy()


def quiet(ctx: PassContext) -> PassContext:
    """`ctx` with a log of its own that nobody reads: a lowering step's notes were the deciding pass's."""
    return replace(ctx, log=DecisionLog(Diagnostics(quiet=True), ctx.kernel_name, ctx.log.pass_name))


# -- the steps: each pass's builder (the passes reach `lower` through their context, never import it) ------
def _widen(kernel: Kernel, ctx: PassContext, widening: Widening) -> Kernel:
    return lower_widening(kernel, ctx, widening.width)


def _stage(kernel: Kernel, ctx: PassContext, staging: Staging) -> Kernel:
    if staging.kind == "halo":
        return coalesce.lower_halo(kernel, ctx)
    return coalesce.lower_reads(kernel, ctx, staging.block, staging.threads, staging.steps, staging.comment)


def _merge(kernel: Kernel, ctx: PassContext, merge: Merge) -> Kernel:
    return merges.lower_merge(kernel, ctx, merge.kind)


def _rows(kernel: Kernel, ctx: PassContext, rows: Rows) -> Kernel:
    return lower_rows(kernel, ctx, rows.factor)


def _order(kernel: Kernel, ctx: PassContext, order: BlockOrder) -> Kernel:
    return partition.lower_block_order(kernel, ctx, order.kind)


def _prefetch(kernel: Kernel, ctx: PassContext, prefetch: Prefetch) -> Kernel:
    try:
        return prefetched(kernel, ctx)[0]
    except NotStaged as nothing:    # a step the schedule names that cannot be built: the builders' failure
        raise Unsupported(f"nothing to prefetch ({nothing})") from nothing


_STEPS = {"widening": _widen, "staging": _stage, "merge": _merge, "rows": _rows, "block_order": _order,
          "prefetch": _prefetch}


__all__ = ["lower", "quiet"]
