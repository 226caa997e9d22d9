"""The schedule: what the scheduling passes decided for one kernel, as data (in the spirit of Halide's and
loopy's schedules), and the source kernel it applies to.

The passes that canonicalize (restrict, normalize, grid_stride, and vectorize's pairs and struct loads)
rewrite the kernel source to source; what they leave is the schedule's `source`. The scheduling passes
(vectorize's widening, coalesce, merge, prefetch, partition) then each decide and record an entry here,
instead of handing the next pass a rewritten kernel to re-plan: a later pass that changes an earlier
decision amends its entry (block merge widens the staging's block and step; the convolution's register tile
drops the staging and records its own). `lowering.lower`
generates the kernel from the source and the entries, once, in one fixed order:

    widening -> staging (with its final block) -> merge -> rows per thread -> block order -> prefetch

so a decision planned on "the kernel without prefetch" (the rotation) is simply planned on the lowering of
the schedule without the prefetch entry. Every entry is a frozen record of plain values: two schedules with
the same source and entries lower to the same kernel (`lowering` caches by them).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Literal

from gpgpu_opt.dim3 import Dim3
from gpgpu_opt.kernel import Kernel

Block = Dim3


@dataclass(frozen=True)
class Widening:
    """vectorize: `width` consecutive x per thread, each access along x one `width`-element vector."""
    width: int


@dataclass(frozen=True)
class Staging:
    """coalesce: the reads staged through shared tiles. `kind` 'reads': `coalesce.plan_reads` for blocks
    covering `block` outputs with `threads` threads, loops taking `steps` tile steps at once; 'halo': a
    stencil's footprint in a halo tile (the block is the halo staging's own choice). `comment`: a line put
    before the first tile (block merge's)."""
    kind: Literal["reads", "halo"]
    block: Block = Dim3(1)
    threads: Block = Dim3(1)
    steps: int = 1
    comment: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "block", Dim3.of(self.block))
        object.__setattr__(self, "threads", Dim3.of(self.threads))


@dataclass(frozen=True)
class Merge:
    """merge: `kind` names the merge strategy (passes/merge/strategies.py: `reduction`, `register_tile`,
    `conv_tile`, `split_loop`, `stencil_window`, `stencil_rows`, `thread_merge`, `z_march` on an unstaged
    kernel; `block_merge` on a staged one, which then also amends the staging entry); `factors`: blocks
    merged in x and y (block_merge); `shape`: the choice the strategy made that the kernel alone does not
    fix (a register tile's outputs per thread in y and x), which lowering replays."""
    kind: str
    factors: Block = Dim3(1)
    shape: tuple[int, int] | None = None

    def __post_init__(self):
        object.__setattr__(self, "factors", Dim3.of(self.factors))


@dataclass(frozen=True)
class Rows:
    """merge of a staged kernel: `factor` rows of outputs per thread in y (thread_merge_staged)."""
    factor: int


@dataclass(frozen=True)
class BlockOrder:
    """partition: the order the blocks take their tiles in: 'diagonal' (2-D grids) or 'rotation' (each
    block starts the loops that walk `subject` at a step of its own)."""
    kind: Literal["diagonal", "rotation"]
    subject: str


@dataclass(frozen=True)
class Prefetch:
    """prefetch: the staged loop's next step loaded while this one computes; `subject` the copies
    prefetched (`A -> tile_A`), `form` 'stages' (cp.async) or 'registers' (the paper's)."""
    subject: str
    form: Literal["stages", "registers"]


#: The entries in the order `lowering` applies them. The widening comes first: a widened kernel has its
#: launch, so no staging, merge or prefetch follows it, and a block order is planned on the widened kernel.
ENTRY_ORDER = ("widening", "staging", "merge", "rows", "block_order", "prefetch")


@dataclass(frozen=True)
class Schedule:
    """One kernel's schedule: `source` (never changed: every lowering starts from a copy of it) and the
    entries decided so far (None: not decided)."""
    source: Kernel = field(compare=False)
    widening: Widening | None = None
    staging: Staging | None = None
    merge: Merge | None = None
    rows: Rows | None = None
    block_order: BlockOrder | None = None
    prefetch: Prefetch | None = None
    #: Kernels already lowered from `source`, by entries (shared by the schedules derived from this one).
    lowered: dict = field(default_factory=dict, compare=False, repr=False)

    def entries(self) -> tuple:
        """The entries, in lowering order (None where not decided)."""
        return tuple(getattr(self, name) for name in ENTRY_ORDER)

    @property
    def empty(self) -> bool:
        return not any(self.entries())

    def with_(self, **entries) -> "Schedule":
        """This schedule with the given entries set (or dropped, with None)."""
        unknown = set(entries) - set(ENTRY_ORDER)
        if unknown:
            raise TypeError(f"not a schedule entry: {', '.join(sorted(unknown))}")
        return replace(self, **entries)

    def without(self, *names: str) -> "Schedule":
        return self.with_(**{name: None for name in names})

    def describe(self) -> str:
        """The plan in one line: each entry decided, its values (`tune` compares variants by it)."""
        parts = []
        for name in ENTRY_ORDER:
            entry = getattr(self, name)
            if entry is None:
                continue
            values = ", ".join(f"{f.name} {_value(getattr(entry, f.name))}" for f in fields(entry)
                               if f.name != "comment" and getattr(entry, f.name) not in (None, ""))
            parts.append(f"{name} ({values})" if values else name)
        return "; ".join(parts) or "nothing scheduled"


def _value(value) -> str:
    if isinstance(value, tuple):
        return "x".join(str(v) for v in value)
    return str(value)


def schedule_of(ctx, kernel: Kernel) -> Schedule:
    """The schedule the pipeline keeps for `kernel` (`ctx.schedule`), or a fresh one from `kernel` where a
    pass runs on its own (a test, `tune`)."""
    schedule = getattr(ctx, "schedule", None)
    return schedule if schedule is not None else Schedule(kernel)


__all__ = ["remember", "BlockOrder", "ENTRY_ORDER", "Merge", "Prefetch", "Rows", "Schedule", "Staging", "Widening",
           "schedule_of"]


def remember(schedule: Schedule, kernel: Kernel) -> Kernel:
    """Keep `kernel` as the lowering of `schedule`: the pass that recorded the schedule's last entry built
    that step itself, with the builder `lower` would call, from the lowering of the entries before it."""
    schedule.lowered[schedule.entries()] = kernel.copy()
    return kernel
