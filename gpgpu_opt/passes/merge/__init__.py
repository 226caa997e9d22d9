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
merge, passes/normalize/three_d.py) is only given to `z_march`: each thread computes consecutive z, the
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
from gpgpu_opt.passes.context import PassContext
from gpgpu_opt.passes.schedule import remember
from gpgpu_opt.passes.schedule import Merge, Schedule, Staging, schedule_of
from gpgpu_opt.passes.merge import (block_merge, conv_tile, reduction, register_tile, split_loop, stencil_rows,
                                    stencil_window, thread_merge, z_march)
from gpgpu_opt.rewriting.accumulation import NotAccumulation
from gpgpu_opt.passes.merge.reduction import NotReduction
from gpgpu_opt.passes.merge.thread_merge_staged import thread_merge_staged
from gpgpu_opt.rewriting.cbuild import Unsupported


#: The merges for a kernel no earlier pass gave a launch, tried in order: (plan, apply, describe,
#: describe_launch, what the kernel keeps when the merge declines).
_CONV_TILE = (conv_tile.plan_conv_tile, conv_tile.apply_conv_tile, conv_tile.describe, conv_tile.describe_launch,
              "one output per thread kept")
#: The one merge for a kernel whose blocks have several z.
_Z_MARCH = (z_march.plan_z_march, z_march.apply_z_march, z_march.describe, z_march.describe_launch,
            "one z per thread kept")
_MERGES = [
    (reduction.plan_reduction, reduction.apply_reduction, reduction.describe, reduction.describe_launch,
     "reduction left as written"),
    (register_tile.plan_register_tile, register_tile.apply_register_tile, register_tile.describe,
     register_tile.describe_launch, "one output per thread kept"),
    _CONV_TILE,
    (split_loop.plan_split, split_loop.apply_split, split_loop.describe, split_loop.describe_launch,
     "one thread per output kept"),
    (stencil_window.plan_stencil_window, stencil_window.apply_stencil_window, stencil_window.describe,
     stencil_window.describe_launch, "one output per thread kept"),
    (stencil_rows.plan_stencil_rows, stencil_rows.apply_stencil_rows, stencil_rows.describe,
     stencil_rows.describe_launch, "one output per thread kept"),
    (thread_merge.plan_thread_merge, thread_merge.apply_thread_merge, thread_merge.describe,
     thread_merge.describe_launch, "one output per thread kept"),
]


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
        return _merged(kernel, ctx, schedule, [_Z_MARCH])
    if kernel.launch is not None:
        if schedule.staging is not None:
            # A convolution's register tile brings its own halo tile: it replaces coalesce's staging.
            unstaged = schedule.without("staging")
            tiled = _merge_unstaged(ctx.lower(unstaged), ctx, [_CONV_TILE], quiet=True)
            if tiled is not None:
                tiled, _ = tiled
                ctx.log.applied("kernel", "the convolution's register tile stages its own halo tile, so it replaces "
                                      "the coalesce pass's staging", Location.of(kernel.funcdef))
                ctx.schedule = unstaged.with_(merge=Merge("conv_tile"))
                return remember(ctx.schedule, tiled)
        return _merge_staged(kernel, ctx, schedule)
    return _merged(kernel, ctx, schedule, _MERGES)


def _merged(kernel: Kernel, ctx: PassContext, schedule: Schedule, merges) -> Kernel:
    if merges is _MERGES and z_march.has_z_index(kernel):   # blocks of one z: marching z first
        merges = [_Z_MARCH, *merges]
    merged = _merge_unstaged(kernel, ctx, merges)
    if merged is None:
        return kernel
    merged, kind = merged
    ctx.schedule = schedule.with_(merge=Merge(kind))
    return remember(ctx.schedule, merged)


def _has_3d_blocks(kernel: Kernel) -> bool:
    """Does the kernel still read threadIdx.z or blockDim.z (the pipeline replaces them where blocks have one z)?"""
    return any(isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and isinstance(n.field, c_ast.ID)
               and n.name.name in ("threadIdx", "blockDim") and n.field.name == "z" for n in walk(kernel.body))


def lower_merge(kernel: Kernel, ctx: PassContext, kind: str) -> Kernel:
    """A `schedule.Merge` lowered on `kernel` (rewritten in place): the merge named `kind` planned and
    applied as `_merge_unstaged` does (block_merge's step is the staging entry's block and step: nothing
    more to do here)."""
    if kind == "block_merge":
        return kernel
    plan, apply, *_ = next(m for m in [*_MERGES, _Z_MARCH] if _name(m[0]) == kind)
    g.normalize_early_returns(kernel.body)
    info = KernelInfo(kernel, ctx)
    apply(kernel, info, plan(kernel, ctx, info))
    return kernel


def _name(plan) -> str:
    """A merge's name (`schedule.Merge.kind`): its planner's module."""
    return plan.__module__.rsplit(".", 1)[-1]


def _merge_unstaged(kernel: Kernel, ctx: PassContext, merges, quiet: bool = False) -> tuple[Kernel, str] | None:
    """The first of `merges` that applies to a kernel no earlier pass gave a launch, and its name, or None
    (with a note on why the first that fitted the kernel's shape declined, unless `quiet`)."""
    where = Location.of(kernel.funcdef)
    declined = []   # (merge, consequence, why) of merges that fit the kernel's shape but were not made
    for plan, apply, describe, describe_launch, what in merges:
        work = kernel.copy()
        g.normalize_early_returns(work.body)
        info = KernelInfo(work, ctx)
        try:
            chosen = plan(work, ctx, info)
        except (NotAccumulation, NotReduction):
            continue
        except Unsupported as why:
            # This merge fits the kernel's shape but cannot be proved safe or worth it; a later one may be.
            declined.append((_name(plan), what, why))
            continue
        for name, _, why in declined:
            ctx.log.skip("kernel", f"{name.replace('_', ' ')} not used: {why}", where)
        apply(work, info, chosen)
        ctx.log.applied("kernel", describe(chosen), where)
        ctx.log.applied("launch", describe_launch(chosen), where)
        return work, _name(plan)
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
