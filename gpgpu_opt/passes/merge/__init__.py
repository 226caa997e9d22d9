"""merge: more work per thread or more threads per piece of work (paper §3.5; DESIGN.md §4 item 4).

Today: several threads per output (`split_loop`), for kernels whose outputs are too few to fill the GPU and
whose one accumulation loop is long (mv, tmv). Kernels not of that shape are left as they are; a kernel of
that shape that the split cannot take gets a note saying why.
"""
from __future__ import annotations

from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes import guards as g
from gpgpu_opt.passes.context import PassContext
from gpgpu_opt.passes.merge.split_loop import NotAccumulation, apply_split, describe, plan_split
from gpgpu_opt.passes.staging import Unsupported


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    if kernel.launch is not None:
        return kernel
    work = kernel.copy()
    g.normalize_early_returns(work.body)
    info = g.KernelInfo(work, ctx)
    where = Location.of(work.funcdef)
    try:
        split = plan_split(work, ctx, info)
    except NotAccumulation:
        return kernel
    except Unsupported as why:
        ctx.skip("kernel", f"one thread per output kept: {why}", where)
        return kernel
    apply_split(work, info, split)
    ctx.applied("kernel", describe(split), where)
    ctx.applied("launch", f"blocks of {split.block[0]}x{split.block[1]} threads, each covering "
                          f"{split.outputs_per_block[0]} outputs ({split.threads} threads per output)", where)
    return work

