"""Reductions in the merge pass (paper §5), in the two forms people write:

- `tree`: the paper's form. Each thread sums a segment into `partial[i]`, then an in-place tree over
  `partial[]` in global memory with a barrier per level. The tree moves into registers (warp shuffles,
  shared memory across warps) with the naive pairing, so every value, `partial[]` included, is bit-exact.
- `atomic`: `if (i < n) atomicAdd(result, f(i));`, one atomic per element. Becomes register partial sums
  (over a grid-stride loop when the naive launch provably covers n), a block tree, one atomic per block.

`plan_reduction` raises `NotReduction` (no note: most kernels are neither) or `Unsupported` (a note).
"""
from __future__ import annotations

from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.reduction.atomic import plan_atomic
from gpgpu_opt.passes.merge.reduction.common import NotReduction
from gpgpu_opt.passes.merge.reduction.tree import plan_tree
from gpgpu_opt.rewriting.cbuild import Unsupported


def plan_reduction(kernel: Kernel, ctx: PassContext, info: KernelInfo):
    """The reduction plan for this kernel (with `apply(kernel, info)`, `describe()`, `describe_launch()`)."""
    try:
        return plan_tree(kernel, ctx, info)
    except NotReduction:
        return plan_atomic(kernel, ctx, info)


def apply_reduction(kernel: Kernel, info: KernelInfo, plan) -> None:
    plan.apply(kernel, info)


def describe(plan) -> str:
    return plan.describe()


def describe_launch(plan) -> str:
    return plan.describe_launch()


__all__ = ["plan_reduction", "apply_reduction", "describe", "describe_launch", "NotReduction", "Unsupported"]
