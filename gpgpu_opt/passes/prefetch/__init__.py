"""prefetch: the next step's global data is loaded while this step computes (paper §3.7, Fig. 8).

It works on a loop that stages global data in shared tiles, `for (k0 ...) { copies; barrier; compute;
barrier }` (coalesce's staged loops, the merges' tiles; `staged_loop` says what it accepts), in one of two
forms:
- `stages` where the target has asynchronous copies (cp.async, sm_80 and later): a second stage of each
  tile, filled one step ahead by `__pipeline_memcpy_async`, one barrier per step. Kept when ptxas (where
  installed) spills no more than the kernel without it.
- `registers` elsewhere, the paper's form: the next step's loads go to registers before the computation and
  are stored to the tiles after the barrier. Skipped when thread merging needs the registers (§3.7).
"""
from __future__ import annotations

from gpgpu_opt.ast_util import is_call_to, walk
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.nvcc import nvcc_available, resource_usage
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.record import PassRecord
from gpgpu_opt.pass_api.schedule import remember
from gpgpu_opt.pass_api.schedule import Prefetch, schedule_of
from gpgpu_opt.passes.prefetch import registers, stages
from gpgpu_opt.passes.prefetch.staged_loop import NotStaged, find_staged_loop
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    """Prefetch `kernel`'s staged loop, recording it in the schedule (`schedule.Prefetch`)."""
    where = Location.of(kernel.funcdef)
    if any(is_call_to(n, "__pipeline_commit") for n in walk(kernel.body)):
        return kernel   # a tile ring the merge built, filled by asynchronous copies ahead of the computation
    try:
        work, subject, why = prefetched(kernel, ctx)
    except NotStaged:
        return kernel
    except Unsupported as why:
        ctx.log.skip(getattr(why, "subject", "kernel"), f"not prefetched: {why}", where)
        return kernel
    ctx.log.applied(subject, why, where)
    form = "stages" if ctx.options.target.has_async_copy else "registers"
    ctx.schedule = schedule_of(ctx, kernel).with_(prefetch=Prefetch(subject, form))
    return remember(ctx.schedule, work)


def prefetched(kernel: Kernel, ctx: PassContext) -> tuple[Kernel, str, str]:
    """The prefetched copy of `kernel`, what it prefetches and why it may (the lowering of a
    `schedule.Prefetch` calls this on the kernel the entries before it lowered). NotStaged where there is
    nothing to prefetch; Unsupported (with `subject` where the loop was found) where it may not be done."""
    work = kernel.copy()
    staged = find_staged_loop(work)
    taken = set(KernelInfo.of(work, ctx).taken)
    subject = ", ".join(sorted({f"{c.array} -> {c.tile}" for c in staged.copies}))
    try:
        if ctx.options.target.has_async_copy:
            why = stages.check_stages(work, staged, ctx)
            stages.apply_stages(work, staged, taken)
            work.includes = sorted(set(work.includes) | {stages.HEADER})
            why += _ptxas(kernel, work, ctx)
            return work, subject, f"double buffering with cp.async, one barrier per step: {why}"
        why = registers.check_registers(work, staged, ctx)
        held = registers.apply_registers(work, staged, taken)
        return work, subject, (f"the next step's loads go to registers ({', '.join(held)}) before this step's "
                               f"computation (paper Fig. 8): {why}")
    except Unsupported as why:
        why.subject = subject
        raise


def _ptxas(before: Kernel, after: Kernel, ctx: PassContext) -> str:
    """ptxas's registers and spills with and without the stages; Unsupported when the stages spill more."""
    if not nvcc_available():
        return "; nvcc not found, so the model's register count stands"
    usage = []
    for k in (before, after):
        source = "".join(f"#include <{h}>\n" for h in k.includes) + k.with_launch_bounds(kernel_source(k.funcdef))
        usage.append((resource_usage(source, ctx.options.target) or {}).get(k.name))
    if None in usage:
        return ""
    (old, new) = usage
    blocks = after.launch.blocks_per_sm if after.launch and after.launch.blocks_per_sm else 1
    said = (f"; ptxas at {blocks} blocks per SM: {new['registers']} registers, {new['spill_store_bytes']} bytes "
            f"of spill stores (without the stages {old['registers']} and {old['spill_store_bytes']})")
    if new["spill_store_bytes"] > old["spill_store_bytes"]:
        raise Unsupported(f"the stages would spill more registers{said}")
    return said


def _lower_prefetch_entry(kernel: Kernel, ctx: PassContext, prefetch: Prefetch) -> Kernel:
    try:
        return prefetched(kernel, ctx)[0]
    except NotStaged as nothing:    # a step the schedule names that cannot be built: the builders' failure
        raise Unsupported(f"nothing to prefetch ({nothing})") from nothing


PASS = PassRecord("prefetch", "the next step's tiles loaded while this step computes (cp.async stages, or "
                  "registers on targets without asynchronous copies)", run, steps={"prefetch": _lower_prefetch_entry})
