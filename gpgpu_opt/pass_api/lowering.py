"""Lowering: the kernel a schedule describes, generated from its source in one fixed order (schedule.py):

    widening -> staging (with its final block) -> merge -> rows per thread -> block order -> prefetch

Each step applies one pass's builder to the kernel the steps before it lowered; it decides nothing the entry
does not say. The steps are the passes' own, registered beside their entries in their records
(`PassRecord.steps`); the registry gathers them into one `Lowering`, which the pipeline hands to the passes
through their context (`ctx.lower`), so that no pass imports another's builder. Its notes are not told: the
pass told them when it decided.

Lowered kernels are kept by entries (`Schedule.lowered`), so a schedule whose prefix was lowered before
starts from that kernel; a pass that built its own step while deciding (coalesce tries blocks by building
them) hands it over with `schedule.remember` instead of having it built twice.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import DecisionLog, PassContext
from gpgpu_opt.pass_api.schedule import ENTRY_ORDER, Schedule


@dataclass(frozen=True)
class Lowering:
    """The lowering steps of every schedule entry, by entry name (each a pass's builder)."""
    steps: Mapping[str, object]

    def __post_init__(self):
        unknown = set(self.steps) - set(ENTRY_ORDER)
        if unknown:
            raise ValueError(f"a lowering step for no schedule entry: {', '.join(sorted(unknown))}")

    def __call__(self, schedule: Schedule, ctx: PassContext) -> Kernel:
        """The kernel `schedule` describes (a new copy, the caller's to change). A step that cannot be built
        raises Unsupported."""
        entries = schedule.entries()
        kept = schedule.lowered.get(entries)
        if kept is None:
            last = max((i for i, entry in enumerate(entries) if entry is not None), default=None)
            if last is None:
                kept = schedule.source.copy()
            else:
                name = ENTRY_ORDER[last]
                if name not in self.steps:
                    raise LookupError(f"no pass registers the lowering of a '{name}' entry")
                before = self(schedule.without(*ENTRY_ORDER[last:]), ctx)
                kept = self.steps[name](before, quiet(ctx), entries[last])
            schedule.lowered[entries] = kept
        return kept.copy()


def quiet(ctx: PassContext) -> PassContext:
    """`ctx` with a log of its own that nobody reads: a lowering step's notes were the deciding pass's."""
    return replace(ctx, log=DecisionLog(Diagnostics(quiet=True), ctx.kernel_name, ctx.log.pass_name))


__all__ = ["Lowering", "quiet"]
