"""Thread-block merge (paper §3.5, Fig. 4-5): N neighbouring blocks of the coalesced kernel become one
block of N times the threads.

The coalesce pass gives each block of W threads (one request) its own shared tiles. A tile whose data
the neighbouring blocks read too (`analysis.sharing`: mm's row segment of A, read by every block of a row
of C; mv's and tmv's segment of the vector) is then loaded by each of them. Merged, the N blocks load it
once, and every thread of the merged block takes part in loading it:

- x: the loop a shared tile is staged around takes N tile steps at once (mm: `k0 += 16 * N`), so the tile
  is N times as long and the merged block's N*W threads load it with one coalesced request each; tiles
  the blocks do not share cover the merged block's outputs (an extra sub-block extent: mv's `tile_A` gets
  N*W rows) and grow with the step too, which the model below weighs;
- y: the blocks of a column share the tile as it is; the merged block's rows split its loading passes.

A block with too few threads to fill an SM (16 threads on the paper's GPU) is merged even without
sharing (§3.6), in x for a 1-D thread space and in y otherwise, without widening any step.

The merged kernel is the coalesce pass's staging planned again for the merged block (`rewriting.tiles.plan` with the
merged block and the widened step): the merge amends the schedule's staging entry (passes/schedule.py), which
is lowered from the schedule's source, so every load, predicate and barrier is the one coalesce proves for
that block. Kernels coalesce stages use thread ids only
through the global index (`KernelInfo.check_kernel`), which a merged block keeps, so no id needs
recomputing outside the loaders (whose `threadIdx.x % W`, `threadIdx.x / W` are the paper's sub-block
ids). The merged grid rounds up to whole merged blocks: `KernelInfo.coverage_problem` keeps every access
of the extra threads under a guard.

The factor: the largest number of resident threads per SM (threads per block, shared memory per block and
SM, blocks per SM of the target; a block's threads counted in whole warps), then, where a tile is shared,
the most blocks merged (each shared tile is loaded once for more outputs), else the fewest. `--merge`
gives the factor instead. Registers are not modelled here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.sharing import analyse_sharing
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.schedule import schedule_of
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.rewriting.tiles.plan import plan_reads
from gpgpu_opt.rewriting.tiles.staged import Plan
from gpgpu_opt.targets import Target


class NotMergeable(Unsupported):
    """Not a kernel block merge is for (no note: it was not staged, or its blocks are fine as they are)."""


@dataclass
class _Staging:
    """The coalesce staging planned for one block shape, on its own copy of the kernel."""
    kernel: Kernel
    info: KernelInfo
    plans: list[Plan]
    block: tuple[int, int]
    skipped: list = field(default_factory=list)

    @property
    def shared_bytes(self) -> int:
        return sum(p.tile.bytes for p in self.plans)

    @property
    def subjects(self) -> set[str]:
        return {f"{p.access.array}[{p.access.index_text}]" for p in self.plans}


@dataclass
class BlockMerge:
    axis: str                       # 'x' or 'y'
    factor: int                     # blocks merged
    block: tuple[int, int]          # the merged block's threads (one thread per output)
    unmerged: tuple[int, int]
    why: str                        # why this factor
    shared: list[str]               # staged reads the merged blocks share: their tile is loaded once
    steps: int                      # tile steps a staged loop takes at once
    staging: _Staging = field(repr=False)

    @property
    def factors(self) -> tuple[int, int]:
        return (self.factor, 1) if self.axis == "x" else (1, self.factor)

    @property
    def launch(self) -> LaunchConfig:
        return LaunchConfig(block=self.block, outputs_per_block=self.block)

    def tiles(self) -> str:
        return ", ".join(f"{p.tile.name}[{p.tile.rows}][{p.tile.cols + p.tile.pad}]" if p.tile.two_d
                         else f"{p.tile.name}[{p.tile.cols}]" for p in self.staging.plans)

    @property
    def shared_tiles(self) -> list[str]:
        return [p.tile.name for p in self.staging.plans if _subject(p) in self.shared]

    def describe(self) -> str:
        ub = self.unmerged
        head = f"{self.factor} blocks of {ub[0]}x{ub[1]} threads merged in {self.axis}"
        threads = self.block[0] * self.block[1]
        if self.shared:
            loads = []
            for p in self.staging.plans:
                if _subject(p) in self.shared:
                    elements = p.tile.rows * p.tile.cols
                    by = f"all {threads} threads" if elements >= threads else f"its first {elements} threads"
                    loads.append(f"{p.tile.name} ({_subject(p)}, loaded by {by})")
            how = f"they all read {', '.join(loads)}, loaded once per merged block"
            if self.steps > 1:
                how += f"; staged loops take {self.steps} steps at once so that every thread loads"
        else:
            how = "no staged tile is shared, but the blocks had too few threads"
        return f"{head}: {how}; tiles {self.tiles()}; {self.why}"

    def comment(self) -> str:
        what = f"they share {', '.join(self.shared_tiles)}, loaded once per merged block" if self.shared else \
            "more threads per block"
        return f"merge: {self.factor} blocks of {self.unmerged[0]}x{self.unmerged[1]} threads merged in " \
               f"{self.axis}: {what}"


def plan_block_merge(kernel: Kernel, ctx: PassContext, factors: tuple[int, int] | None = None) -> BlockMerge:
    """The block merge for the coalesced `kernel`, or Unsupported saying why not (NotMergeable: no note).
    `factors`: the blocks to merge in x and y instead of the model's choice (one of them 1). Does not
    change the kernel."""
    factor = None
    if factors is not None:
        if min(factors) > 1:
            raise Unsupported(f"blocks are merged in one direction, not {factors[0]}x{factors[1]}")
        if max(factors) == 1:
            raise NotMergeable("no merge asked for")
    schedule = schedule_of(ctx, kernel)
    base = schedule.source          # what the staging entry stages (and a merged block stages again)
    launch = kernel.launch
    if schedule.staging is None or launch is None or base.launch is not None:
        raise NotMergeable("not staged by the coalesce pass")
    if launch.block != launch.outputs_per_block or launch.fixed_grid:
        raise NotMergeable("each thread computes several outputs already")
    block = launch.block
    current = _stage(base, ctx, block, 1)
    if not current.plans:
        raise NotMergeable("no staged tile")
    axes = ("x", "y") if uses_y(base, [p.access for p in current.plans]) or ctx.facts.naive_block[1] > 1 else ("x",)
    sharing = {id(p): analyse_sharing(p.access, "G2S", block, ctx.facts.bindings, axes) for p in current.plans}
    by_axis = {axis: [_subject(p) for p in current.plans if sharing[id(p)] and sharing[id(p)].shared_in(axis)]
               for axis in axes}
    target = ctx.options.target
    now = _resident(target, block, current.shared_bytes)
    few = now < target.max_threads_per_sm
    tries = [axis for axis in axes if by_axis[axis]]
    if few and ("y" if len(axes) == 2 else "x") not in tries:
        tries.append("y" if len(axes) == 2 else "x")
    if factors is not None:
        factor = max(factors)
        tries = ["x" if factors[0] > 1 else "y"]
        if tries[0] not in axes:
            raise Unsupported(f"the thread space has no {tries[0]} dimension to merge blocks in")
    elif not tries:
        raise NotMergeable("no staged tile is shared between blocks and the blocks fill an SM")
    reasons = []
    for axis in tries:
        plan = _best_factor(base, ctx, current, axis, by_axis[axis], factor, now, reasons)
        if plan is not None:
            return plan
    kept = f"blocks of {block[0]}x{block[1]} kept ({now} threads resident per SM)"
    if reasons:
        grouped: dict[tuple[str, str], list[str]] = {}
        for n, axis, why in reasons:
            grouped.setdefault((axis, why), []).append(str(n))
        raise Unsupported(f"{kept}: " + "; ".join(f"{', '.join(ns)} in {axis}: {why}"
                                                  for (axis, why), ns in grouped.items()))
    raise Unsupported(f"{kept}: no larger block keeps more threads resident or fits the target")


def _best_factor(base, ctx, current: _Staging, axis, shared, factor, now, reasons) -> BlockMerge | None:
    target = ctx.options.target
    block = current.block
    # Merged in x, a loop that a shared tile is staged around takes several tile steps at once (no more
    # than its known trip count) so that every thread loads.
    max_steps = 1
    if axis == "x":
        for p in current.plans:
            if p.anchor is not None and _subject(p) in shared:
                trip = p.anchor.trip_count()
                trip = trip.subs({param_symbol(k): v for k, v in ctx.facts.bindings.items()}) if trip is not None else None
                cap = int(trip) // p.unroll if trip is not None and trip.is_Integer else 1 << 30
                max_steps = max(max_steps, cap)
    if factor is None:
        limit = target.max_threads_per_block // (block[0] * block[1])
        factors = [1 << k for k in range(1, int(math.log2(limit)) + 1)] if limit >= 2 else []
    else:
        factors = [factor]
    best, best_key = None, (now, 0, 0)
    why_not = {}
    for n in factors:
        merged = (block[0] * n, block[1]) if axis == "x" else (block[0], block[1] * n)
        # Widened steps let every thread load a shared tile, but grow the tiles not shared with them; one
        # step keeps those small (the shared tile's row is then loaded by its first threads).
        for steps in dict.fromkeys((max(1, min(n, max_steps)), 1)):
            staging = _candidate(base, ctx, merged, steps, current)
            if isinstance(staging, str):
                why_not.setdefault(n, staging)
                continue
            resident = _resident(target, merged, staging.shared_bytes)
            key = (resident, n if shared else -n, steps)
            if best is None if factor is not None else key > best_key:
                best, best_key = (n, merged, steps, staging), key
            why_not[n] = f"{resident} threads resident"
    reasons += [(n, axis, why) for n, why in why_not.items() if best is None or n != best[0]]
    if best is None:
        return None
    n, merged, steps, staging = best
    how = f"{n} asked for with --merge" if factor is not None else \
        f"{best_key[0]} threads resident per SM against {now} for {block[0]}x{block[1]} blocks " \
        f"({merged[0] * merged[1]} threads and {staging.shared_bytes} bytes of shared memory per block; " \
        f"{target.max_threads_per_sm} threads, {target.max_blocks_per_sm} blocks and {target.shared_per_sm} " \
        f"bytes per SM)" + (", merging the most blocks that do so" if shared else ", merging the fewest")
    return BlockMerge(axis, n, merged, block, how, shared, steps, staging)


def _stage(base: Kernel, ctx: PassContext, block: tuple[int, int], steps: int) -> _Staging:
    work = base.copy()
    g.normalize_early_returns(work.body)
    info = KernelInfo.of(work, ctx)
    info.check_kernel()
    plans, skipped = plan_reads(work, ctx, info, block, block, steps)
    return _Staging(work, info, plans, block, skipped)


def _candidate(base, ctx, merged, steps, current: _Staging) -> _Staging | str:
    """The staging for a merged block, or why that block cannot be used."""
    target = ctx.options.target
    if merged[0] * merged[1] > target.max_threads_per_block:
        return f"{merged[0] * merged[1]} threads exceed the target's {target.max_threads_per_block} per block"
    try:
        staging = _stage(base, ctx, merged, steps)
    except Unsupported as why:
        return str(why)
    # A merged block must tile the naive launch's blocks, or every access of the extra threads be guarded;
    # when the program does not launch the kernel, its block is not known and the guards are needed.
    naive = ctx.facts.naive_block if ctx.facts.naive_block_known else (1, 1)
    problem = None if ctx.facts.stated_space_tiled_by(merged) else staging.info.coverage_problem(naive, merged)
    if problem and not ctx.facts.naive_block_known:
        return "the program does not launch the kernel and not every access is guarded by the global index, " \
               "so the merged block might not divide its thread space"
    if problem:
        return problem
    if staging.subjects != current.subjects:
        why = [f"{rep.access.array}[{rep.access.index_text}] would not be staged ({reason})"
               for rep, reason in staging.skipped if f"{rep.access.array}[{rep.access.index_text}]" in current.subjects]
        return "; ".join(why) or "the block would stage other reads"
    return staging


def _resident(target: Target, block: tuple[int, int], shared_bytes: int) -> int:
    """Threads an SM keeps resident with blocks of this shape (each block's threads in whole warps)."""
    threads = block[0] * block[1]
    slots = -(-threads // target.warp_size) * target.warp_size
    blocks = min(target.max_blocks_per_sm, target.max_threads_per_sm // slots)
    if shared_bytes:
        blocks = min(blocks, target.shared_per_sm // shared_bytes)
    return blocks * threads


def _subject(p: Plan) -> str:
    return f"{p.access.array}[{p.access.index_text}]"


__all__ = ["BlockMerge", "NotMergeable", "plan_block_merge"]
