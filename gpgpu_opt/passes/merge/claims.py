"""What merge tells an earlier pass before it runs: whether it will take a kernel as normalize left it.

Coalesce asks, because staging first would only stand in merge's way: a split loop (several threads per
output) reads the loop's data coalesced without staging, and a 2-D register tile stages the operands itself.
The pass registry (`gpgpu_opt.passes`) hands this question to coalesce, so that neither pass imports the
other.
"""
from __future__ import annotations

from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.register_tile import plan_by_model
from gpgpu_opt.passes.merge.split_loop import plan_split
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.rewriting.kernel_info import KernelInfo


def claim(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> str | None:
    """Why merge will take this kernel (it plans from the form normalize left), or None."""
    if _taken_by(plan_split, kernel, ctx, info):
        return "several threads per output read the loop's data coalesced without staging"
    if _taken_by(plan_by_model, kernel, ctx, info):
        return "its 2-D register tile stages the loop's operands for many outputs per thread"
    return None


def _taken_by(plan, kernel: Kernel, ctx: PassContext, info: KernelInfo) -> bool:
    """Whether a merge will take this kernel (`plan` succeeds): it works from the kernel as normalize left
    it, so staging first would only stand in its way."""
    try:
        plan(kernel, ctx, info)
    except Unsupported:
        return False
    return True
