"""The coalesce pass's block shape: which blocks to try, best first, for the reads to be staged.

The paper's one request of W threads per block on the paper's GPUs (merging enlarges it later), a W x W
block where a tile is read back transposed (or, on GPUs whose requests are a whole warp, W x W/4 threads
that each compute 4 rows of outputs: see `rewriting.tiles.rows`), and an occupancy-chosen block on modern GPUs; the
naive block as the last resort. `__launch_bounds__` caps the threads per block.
"""
from __future__ import annotations

import sympy

from gpgpu_opt.analysis import AccessReport, uses_y
from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.symbolic import BDIM, TID, iterator_symbol
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.rewriting.tiles.geometry import classify, tile_extent
from gpgpu_opt.rewriting.tiles.staged import anchor_loop

#: Rows of a transposed tile's outputs that one thread computes on GPUs with warp-wide requests, and the
#: tile's edge in requests. Measured on an H200 (transpose 8192², D2D copy = 1): a 32x32 tile with 32x8
#: threads (NVIDIA's tiled transpose) 0.92; 64x64 with 64x16 threads 0.84; 64x64 with 64x8 threads, 8 rows
#: each, 0.965: twice the loads in flight per thread before the barrier, and half the barriers per byte.
_ROWS_PER_THREAD = 8
_TILE_REQUESTS = 2


def block_choices(kernel: Kernel, ctx: PassContext, wanted: list[AccessReport]):
    """Blocks to try, best first: (outputs per block, threads per block, the reason for the report)."""
    t = ctx.options.target
    W = t.request_threads
    two_d = uses_y(kernel, [r.access for r in wanted]) or ctx.facts.naive_block[1] > 1
    transposed = False
    for r in wanted:
        e = sympy.expand(r.access.index)
        cy, cx = e.coeff(TID["y"]), e.coeff(TID["x"])
        if cy.is_Integer and 0 < int(cy) < W and cx != 0 and not (cx.is_Integer and 0 < int(cx) < W):
            transposed = True
    choices = []
    if transposed:
        k, T = _ROWS_PER_THREAD, _TILE_REQUESTS * W
        if t.request_threads == t.warp_size and T % k == 0 and T * (T // k) <= t.max_threads_per_block:
            # Warp-wide requests read whole tile rows: T x T/k threads load the tile in k passes, each
            # thread with k independent loads in flight before the barrier, then compute k rows each.
            choices.append(((T, T), (T, T // k),
                            f"the {T}x{T} tile is loaded with x and y swapped, so the global read is coalesced, "
                            f"in {k} passes of {T // k} rows (each thread has {k} loads in flight before the "
                            f"barrier), and read back transposed"))
        choices.append(((W, W), (W, W), f"a {W}x{W} block loads a {W}x{W} tile with x and y swapped, so the "
                                        f"global read is coalesced, and reads it back transposed"))
    elif t.coalescing_rule in ("strict", "segments"):
        what = "rows of the 2-D thread space" if two_d else "a 1-D block"
        block = (W, 1)
        choices.append((block, block, f"one request of {W} threads per block ({what}), as in the paper; "
                                      "merging enlarges it later"))
    else:
        block, why = _occupancy_block(kernel, ctx, wanted, two_d)
        choices.append((block, block, why))
    limit = _launch_bound(kernel)
    if limit:
        choices = [c for c in choices if c[1][0] * c[1][1] <= limit]
    naive = ctx.facts.naive_block.xy
    if naive not in [c[0] for c in choices] and naive[0] * naive[1] <= t.max_threads_per_block:
        choices.append((naive, naive, "the naive block (the preferred block does not cover the naive thread "
                                      "space exactly and the kernel has no guard)"))
    return choices


def _launch_bound(kernel: Kernel) -> int | None:
    """The maximum threads per block of `__launch_bounds__(N[, ...])`, if the kernel has it."""
    if not kernel.launch_bounds:
        return None
    try:
        return int(str(kernel.launch_bounds[0]).split(",")[0].strip().rstrip("uUlL"), 0)
    except ValueError:
        return 1   # not a literal: only the naive block is safe


def _occupancy_block(kernel, ctx, wanted, two_d):
    t = ctx.options.target
    W = t.request_threads
    shapes = [(W, h) for h in (1, 2, 4, 8)] if two_d else [(W * k, 1) for k in (1, 2, 4, 8)]
    best = None
    for block in shapes:
        threads = block[0] * block[1]
        if threads > t.max_threads_per_block:
            continue
        smem = 0
        for r in wanted:
            smem += _estimate_tile_bytes(r.access, block, W)
        if smem > t.shared_per_block:
            continue
        resident = min(t.max_blocks_per_sm, t.max_threads_per_sm // threads,
                       t.shared_per_sm // smem if smem else 1 << 30)
        key = (resident * threads, -threads)
        if best is None or key > best[0]:
            best = (key, block, resident, smem)
    if best is None:
        return (W, 1), "one warp per block (larger tiles do not fit)"
    _, block, resident, smem = best
    return block, (f"{block[0] * block[1]} threads per block keep the most threads resident per SM "
                   f"({resident} blocks of {smem} bytes of shared memory)")


def _estimate_tile_bytes(a: Access, block, W) -> int:
    try:
        index = a.index.subs({BDIM["x"]: block[0], BDIM["y"]: block[1]})
        anchor = anchor_loop(a)
        shape = classify(index, block, iterator_symbol(anchor.var) if anchor else None,
                         abs(anchor.step) if anchor else 1, W)
        rows, cols = tile_extent(shape, shape.unroll_factor(W))
        return rows * (cols + (1 if rows > 1 else 0)) * a.element_bytes
    except Unsupported:
        return 0
