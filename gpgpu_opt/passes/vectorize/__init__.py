"""vectorize: wider global accesses (paper §3.1), before coalesce and merge.

- `pairs`: the paper's rule on every target: `P[2*e + N]` and `P[2*e + N + 1]` (N even), both loads or both
  stores of one basic block, become one `float2` (int2, double2) access, `.x` the lower address;
- `whole_structs`: a struct `p[e]` a thread reads whole and updates in one straight-line block is loaded as
  8- or 16-byte vectors into locals and its written fields stored back once (measured 1.04x to 1.09x);
- `struct_loads`: a thread's reads of every field of an 8- or 16-byte struct `p[e]` become one vector load;
- `widen`: on targets that serve warps by 32-byte sectors (`coalescing_rule == 'sectors'`), a kernel whose
  global accesses run along x one element per thread gets V consecutive x per thread, each such access one
  V-element vector: V = 16 bytes over the element size (float4, double2, `half8`: 8 halves in a vector the
  output defines; `__half2` for halves beside wider elements), or `--vector-width V` (1 turns widening off);
  `if`s on x run lane by lane, gathers read per lane (lanes.py); a `bool` flag is an `int` lane where it only
  holds and is tested as 0/1 (bool_lanes.py). Why a kernel is not widened is a note.
  Widening gains only where the widened launch still fills the GPU (launch_dispatch.py's fill rule: a size
  known when compiling decides then, a run-time size keeps the naive kernel beside it for small launches, a
  launch that can do neither is not widened); `latency` says why for long chains of slow arithmetic. A body
  with gathers is widened only at a width asked for: measured, it did not gain at any size (gather_body). One that loops a trip count known
  only at run time (a z march) is widened to 8-byte vectors at most (float2): measured, 16-byte ones followed
  the launch's waves, 8-byte ones gained at every size (RUN_TIME_LOOP_VECTOR_BYTES). A width asked for
  (`--vector-width`) widens whatever the size.
Alignment is proved (analysis/alignment.py) or checked at run time with the scalar kernel as the fallback.
"""
from __future__ import annotations

from gpgpu_opt.launch import dispatch
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.record import PassRecord
from gpgpu_opt.pass_api.schedule import remember
from gpgpu_opt.pass_api.schedule import Widening, schedule_of
from gpgpu_opt.passes.vectorize import bool_lanes, latency, pairs, struct_loads, whole_structs, widen
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    if kernel.launch is not None:
        return kernel
    where = Location.of(kernel.funcdef)
    work = kernel.copy()
    info = KernelInfo.of(work, ctx)
    done: list[str] = whole_structs.rewrite_whole_structs(work, ctx)
    done += struct_loads.vectorize_struct_reads(work, ctx)
    for compound, run_ in list(pairs.runs(work.body)):
        pairs.vectorize_run(info, compound, run_, ctx, done)
    for what in done:
        ctx.log.applied("kernel", f"vector access: {what}", where)
    if not done:
        widened = _widened(kernel, ctx)
        if widened is not None:
            launch = widened.launch
            width = launch.outputs_per_block[0] // launch.block[0]
            ctx.schedule = schedule_of(ctx, kernel).with_(widening=Widening(width))
            return remember(ctx.schedule, widened)
    return work if done else kernel


def lower_widening(kernel: Kernel, ctx: PassContext, width: int) -> Kernel:
    """A `schedule.Widening` lowered: `kernel` (rewritten in place) widened to `width` as `_widened` does."""
    g.normalize_early_returns(kernel.body)
    bool_lanes.bool_locals_as_int(kernel.body)
    widen.widen(kernel, ctx, KernelInfo.of(kernel, ctx), width)
    return kernel


def fewer_threads(width: int) -> str:
    """Why a widened body that is no chain of slow arithmetic loses on a launch that does not fill the GPU."""
    return (f"widened by {width}, the launch would have {width}x fewer threads, which keep fewer loads in flight "
            f"where it does not fill the GPU")


def gather_body(gathers: list[str]) -> str | None:
    """Why a body that reads per lane (widen's gathers) is widened only at a width asked for: measured on an
    H100 (ncu, Rodinia srad_v1 at 2048^2 and 4096^2), its widened kernels ran 0.92x and 0.98x (srad) and 0.99x
    and 1.01x (srad2) of the naive ones. Each lane's gather waits on its index load, and the widened threads,
    4x fewer with twice the registers, keep fewer of those chains in flight than the naive ones do."""
    if not gathers:
        return None
    shown = ", ".join(gathers[:2]) + (", ..." if len(gathers) > 2 else "")
    return (f"a gather body ({shown} read lane by lane): widened gathers ran at 0.92x to 1.01x of the naive "
            "kernel on an H100, even at 16M threads (srad); --vector-width widens it")


#: The widest vector of a body that loops a trip count known only at run time (a z march: `for (k = 1; k <
#: nz - 1; k++)`). Measured (CUDA events, L2 flushed; bench/corpus_results/z_march_widths_h200.txt), Rodinia
#: hotspot3D's kernel as widen writes it, at 256 to 1024 squared by 8 and 32 planes: widened to float4 it ran
#: 0.83x to 1.28x of the naive one on an H200 (0.91x to 1.25x on an H100), the losses where its blocks make
#: just over one wave (768 squared by 32: 0.91x on both); widened to float2, twice the threads, 1.02x to
#: 1.42x on the H200 at every size, 1.02x to 1.23x at those the fill rule widens.
RUN_TIME_LOOP_VECTOR_BYTES = 8


def run_time_loop(streamed) -> bool:
    """Whether the widened body loops a trip count the source leaves to a parameter."""
    return bool(streamed) and streamed[1] is not None


def _widened(kernel: Kernel, ctx: PassContext) -> Kernel | None:
    """The kernel widened by `--vector-width` or the target's preferred access (16 bytes: 4 floats, 2 doubles), where
    warps are served by sectors (on the paper's GPUs a half-warp's 4-byte accesses already fill a segment)."""
    where = Location.of(kernel.funcdef)
    if ctx.options.target.coalescing_rule != "sectors" or ctx.options.vector_width == 1:
        return None
    sized = ctx.options.vector_width is None       # a width asked for widens whatever the launch's size
    slow = latency.slow_chain(kernel.body) if sized else None
    work = kernel.copy()
    g.normalize_early_returns(work.body)
    bool_lanes.bool_locals_as_int(work.body)
    info = KernelInfo.of(work, ctx)
    try:
        what, gathers, streamed, vector_bytes = widen.widen(work, ctx, info, ctx.options.vector_width)
        if sized and run_time_loop(streamed) and vector_bytes > RUN_TIME_LOOP_VECTOR_BYTES:
            work = kernel.copy()
            g.normalize_early_returns(work.body)
            bool_lanes.bool_locals_as_int(work.body)
            info = KernelInfo.of(work, ctx)
            why = (f"a loop of a run-time trip count (a z march) is widened to {RUN_TIME_LOOP_VECTOR_BYTES}-byte "
                   f"vectors at most (measured: 16-byte ones followed the launch's waves)")
            try:
                what, gathers, streamed, _ = widen.widen(work, ctx, info, max_bytes=RUN_TIME_LOOP_VECTOR_BYTES)
            except Unsupported as narrower:
                raise Unsupported(f"{why}, and {narrower}; --vector-width widens it") from None
            what += f"; {why}"
    except widen.NotWidenable as why:
        ctx.log.skip("kernel", f"not widened: {why}", where)
        return None
    except Unsupported as why:
        ctx.log.skip("kernel", f"not widened: {why}", where)
        return None
    width = work.launch.outputs_per_block[0] // work.launch.block[0]
    why_not = gather_body(gathers) if sized else None
    if why_not is not None:     # measured: no size rule it follows
        ctx.log.skip("kernel", f"not widened: {why_not}", where)
        return None
    unsized = dispatch.unsized(ctx.facts.dispatch) if sized else None
    if unsized is not None:     # the gain depends on the launch's size, which nothing here can choose by
        ctx.log.skip("kernel", f"not widened: {slow or fewer_threads(width)}; {unsized}", where)
        return None
    if sized:                   # it gains only where the widened launch still fills the GPU
        min_threads = dispatch.min_threads_widened(ctx.options.target, slow_chain=slow is not None)
        verdict = dispatch.size_verdict(ctx.facts.dispatch, min_threads, slow or fewer_threads(width),
                                               streamed[0] if streamed else None)
        if not verdict.keep:
            ctx.log.skip("kernel", f"not widened: {verdict.reason}", where)
            return None
        work.size_dispatch = verdict.dispatch_threads
        if slow is not None or verdict.dispatch_threads is not None:   # else widening is as it always was
            what = f"{what}; {verdict.reason}"
    ctx.log.applied("kernel", f"widened: {what}", where)
    ctx.log.applied("launch", f"blocks of {work.launch.block[0]}x{work.launch.block[1]} threads, {width} outputs "
                          "per thread in x", where)
    return work


def _lower_widening_entry(kernel: Kernel, ctx: PassContext, widening: Widening) -> Kernel:
    return lower_widening(kernel, ctx, widening.width)


PASS = PassRecord("vectorize", "paired accesses and whole structs as vector accesses; streaming kernels widened to "
                  "8- or 16-byte accesses per thread where the launch still fills the GPU", run,
                  steps={"widening": _lower_widening_entry})
