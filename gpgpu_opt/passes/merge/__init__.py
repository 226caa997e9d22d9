"""merge: more work per thread or more threads per piece of work (paper §3.5).

The merges, tried in order on a kernel not yet given a new launch:
- `reduction`: the paper's tree over a global array (moved into registers, bit-exact), and one atomicAdd
  per element (register sums, a block tree, one atomicAdd per block);
- `register_tile`: one thread computes a 2-D tile of outputs of a matrix-product-like kernel (thread merge
  in x and y, operands staged in shared tiles and reused from registers);
- `conv_tile`: one thread computes R x C outputs of a 2-D convolution (the input's halo tile and the
  filter in shared memory, each input row reused from registers by the output rows it feeds);
- `split_loop`: several threads per output, for kernels whose outputs are too few to fill the GPU and whose
  one accumulation loop is long (mv, tmv);
- `stencil_window`: a small stencil on a target with warp shuffles: V x R outputs per thread from a
  register window of the input, each row loaded once, neighbouring columns shuffled from the next lane;
- `stencil_rows`: where the window does not apply, one thread computes R consecutive rows of a stencil (a footprint the coalesce pass did
  not stage), the rows its reads share sliding through registers;
- `thread_merge`: one thread computes several outputs in y (and/or x) of any kernel whose reads are shared
  between them (vv: `B[idx]` read once for the rows of a thread; paper §3.5 Fig. 6-7).
A kernel whose blocks have several z (it still reads threadIdx.z: the pipeline gave it only restrict and
merge, rewriting/three_d.py) is only given to `z_march`: each thread computes consecutive z, the
planes it shares with the next z carried in registers.
A kernel whose launch the coalesce pass set (its staged tiles) is given to `block_merge`, where neighbouring
blocks that share a staged tile, or have too few threads, become one block, and then to
`thread_merge_staged`, where one thread computes several rows that share a read (paper Fig. 7).
A kernel of none of their shapes is left as it is; a kernel of a merge's shape that the merge cannot take
gets a note saying why.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.schedule import remember
from gpgpu_opt.pass_api.schedule import Merge, Rows, Schedule, Staging, schedule_of
from gpgpu_opt.pass_api.record import PassRecord
from gpgpu_opt.passes.merge import block_merge, claims, z_march
from gpgpu_opt.passes.merge.strategies import BY_NAME, CONV_TILE, UNSTAGED, Z_MARCH, MergeStrategy
from gpgpu_opt.rewriting.accumulation import NotAccumulation
from gpgpu_opt.passes.merge.reduction import NotReduction
from gpgpu_opt.passes.merge.thread_merge_staged import lower_rows, thread_merge_staged
from gpgpu_opt.rewriting.cbuild import Unsupported


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Merge `kernel`, recording the merge in the schedule (`schedule.Merge`, `schedule.Rows`)."""
    volatile = sorted({a.array for a in collect_accesses(kernel) if a.volatile})
    if volatile:
        # A merge shares loads between the outputs of a thread and keeps values in registers: each access
        # of a volatile array must happen as written, once per naive thread.
        ctx.log.skip("kernel", f"not merged: {', '.join(volatile)} {'is' if len(volatile) == 1 else 'are'} volatile",
                 Location.of(kernel.funcdef))
        return kernel
    schedule = schedule_of(ctx, kernel)
    if _has_3d_blocks(kernel):
        return _merged(kernel, ctx, schedule, (Z_MARCH,))
    if kernel.launch is not None:
        if schedule.staging is not None:
            # A convolution's register tile brings its own halo tile: it replaces coalesce's staging.
            unstaged = schedule.without("staging")
            tiled = _merge_unstaged(ctx.lower(unstaged), ctx, (CONV_TILE,), quiet=True)
            if tiled is not None:
                tiled, entry = tiled
                ctx.log.applied("kernel", "the convolution's register tile stages its own halo tile, so it replaces "
                                      "the coalesce pass's staging", Location.of(kernel.funcdef))
                ctx.schedule = unstaged.with_(merge=entry)
                return remember(ctx.schedule, tiled)
        return _merge_staged(kernel, ctx, schedule)
    return _merged(kernel, ctx, schedule, UNSTAGED)


def _merged(kernel: Kernel, ctx: PassContext, schedule: Schedule, merges: tuple[MergeStrategy, ...]) -> Kernel:
    if merges is UNSTAGED and z_march.has_z_index(kernel):   # blocks of one z: marching z first
        merges = (Z_MARCH, *merges)
    merged = _merge_unstaged(kernel, ctx, merges)
    if merged is None:
        return kernel
    merged, entry = merged
    ctx.schedule = schedule.with_(merge=entry)
    return remember(ctx.schedule, merged)


def _has_3d_blocks(kernel: Kernel) -> bool:
    """Does the kernel still read threadIdx.z or blockDim.z (the pipeline replaces them where blocks have one z)?"""
    return any(isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and isinstance(n.field, c_ast.ID)
               and n.name.name in ("threadIdx", "blockDim") and n.field.name == "z" for n in walk(kernel.body))


def lower_merge(kernel: Kernel, ctx: PassContext, merge: Merge) -> Kernel:
    """A `schedule.Merge` lowered on `kernel` (rewritten in place): its strategy planned again from the choice
    the entry records (the shape it chose, where it chose one) and applied, as `_merge_unstaged` did
    (block_merge's step is the staging entry's block and step: nothing more to do here)."""
    if merge.kind == "block_merge":
        return kernel
    strategy = BY_NAME[merge.kind]
    g.normalize_early_returns(kernel.body)
    info = KernelInfo.of(kernel, ctx)
    plan = strategy.plan(kernel, ctx, info) if merge.shape is None else \
        strategy.replan(kernel, ctx, info, merge.shape)
    strategy.apply(kernel, info, plan)
    return kernel


def _merge_unstaged(kernel: Kernel, ctx: PassContext, merges: tuple[MergeStrategy, ...],
                    quiet: bool = False) -> tuple[Kernel, Merge] | None:
    """The first of `merges` that applies to a kernel no earlier pass gave a launch, and its schedule entry,
    or None (with a note on why the first that fitted the kernel's shape declined, unless `quiet`)."""
    where = Location.of(kernel.funcdef)
    declined = []   # (merge, consequence, why) of merges that fit the kernel's shape but were not made
    for strategy in merges:
        work = kernel.copy()
        g.normalize_early_returns(work.body)
        info = KernelInfo.of(work, ctx)
        try:
            chosen = strategy.plan(work, ctx, info)
        except (NotAccumulation, NotReduction):
            continue
        except Unsupported as why:
            # This merge fits the kernel's shape but cannot be proved safe or worth it; a later one may be.
            declined.append((strategy.name, strategy.declined, why))
            continue
        for name, _, why in declined:
            ctx.log.skip("kernel", f"{name.replace('_', ' ')} not used: {why}", where)
        strategy.apply(work, info, chosen)
        ctx.log.applied("kernel", strategy.describe(chosen), where)
        ctx.log.applied("launch", strategy.describe_launch(chosen), where)
        shape = strategy.shape_of(chosen) if strategy.shape_of is not None else None
        return work, Merge(strategy.name, shape=shape)
    if declined and not quiet:
        _, what, why = declined[0]
        ctx.log.skip("kernel", f"{what}: {why}", where)
    return None


def _merge_staged(kernel: Kernel, ctx: PassContext, schedule: Schedule) -> Kernel:
    """A kernel the coalesce pass staged (its launch is set): neighbouring blocks merged, then several rows
    per thread (the paper's order for mm, Fig. 5 then Fig. 7). `--merge x=N,y=M` asks for N blocks merged
    in x and M rows per thread."""
    merged = _block_merge(kernel, ctx, schedule)
    return thread_merge_staged(merged, ctx)


def _block_merge(kernel: Kernel, ctx: PassContext, schedule: Schedule) -> Kernel:
    """`kernel` with neighbouring blocks merged: the staging entry amended to the merged block and step,
    lowered from the source once (or `kernel`, with a note where that is not done)."""
    where = Location.of(kernel.funcdef)
    request = ctx.options.merge_request
    try:
        plan = block_merge.plan_block_merge(kernel, ctx, (request.x, 1) if request is not None else None)
    except block_merge.NotMergeable:
        return kernel
    except Unsupported as why:
        ctx.log.skip("kernel", f"blocks not merged: {why}", where)
        return kernel
    ctx.schedule = schedule.with_(staging=Staging("reads", plan.block, plan.block, plan.steps, plan.comment()),
                                  merge=Merge("block_merge", plan.factors))
    merged = ctx.lower(ctx.schedule)
    ctx.log.applied("kernel", f"thread-block merge: {plan.describe()}", where)
    ctx.log.applied("launch", f"blocks of {plan.block[0]}x{plan.block[1]} threads, one thread per output", where)
    return merged


def _lower_rows_entry(kernel: Kernel, ctx: PassContext, rows: Rows) -> Kernel:
    return lower_rows(kernel, ctx, rows.factor)


PASS = PassRecord("merge", "thread and thread-block merge: register tiles, reductions in registers and warps, "
                  "stencil windows, split loops, z marches", run, three_d="own_z",
                  steps={"merge": lower_merge, "rows": _lower_rows_entry}, claim=claims.claim)
