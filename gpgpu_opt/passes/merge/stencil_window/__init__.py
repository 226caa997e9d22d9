"""Register stencil windows (small stencils on targets with warp shuffles).

A kernel whose reads of one array are `A[(y + dy) * P + x + dx]` for constant offsets (statement by
statement, through macros, or in loops of constant count) is a small stencil: neighbouring threads read
the same elements. On sm_80/sm_90 the L1 absorbs most of that reuse, so staging it through shared memory
costs barriers for little; what pays is fewer, wider loads: each thread computes V consecutive outputs in x
and R in y, loads each input row it needs ONCE (V elements, one float2/float4 where the alignment is
proved), and takes the columns just outside its V from the neighbouring lane with `__shfl_up/down_sync`
(the lane at the warp's edge loads them itself). The naive statements are then run once per output, each
copy with its own guard, reading the window's registers.

Safety:
- the shuffles run in warp-uniform control flow: the window is loaded before any guard, with every load
  predicated instead; blocks are a warp wide, so lanes are consecutive x;
- no load the naive kernel would not make: a row or column is loaded only inside the rows and columns some
  naive thread reads (the naive guard's bounds on x and y widened by the stencil's reach, x, y >= 0, and
  the guard's clauses on parameters);
- the array is not written; where another pointer may alias it, no naive thread stores before its last
  read of it (the window is each thread's reads moved before any copy's stores: an interleaving the naive
  threads could have run);
- a vector load needs its address aligned: the base from cudaMalloc (every launch passes its own buffer),
  the pitch a multiple of V (proved, or checked at run time in a uniform condition), x0 a multiple of V.
  Without the base's alignment, the V elements are V loads;
- the launch covers the naive thread space (each copy keeps its guard), or tiles a stated one exactly.
"""
from gpgpu_opt.passes.merge.stencil_window.plan import NotStencil, Window, plan_stencil_window
from gpgpu_opt.passes.merge.stencil_window.rewrite import apply_stencil_window, describe, describe_launch

__all__ = ["NotStencil", "Window", "plan_stencil_window", "apply_stencil_window", "describe", "describe_launch"]
