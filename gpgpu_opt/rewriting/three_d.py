"""3-D launches: what the passes may assume about the z axis of a kernel's blocks and grid.

The passes tile x and y. Along z they rely on one fact: every thread of a block has the same z, so
`blockIdx.z` (and `gridDim.z`) are uniform per block, like a scalar parameter; the launch helpers keep the
naive grid's z. `threadIdx.z` and `blockDim.z` are only uniform when the block's z is 1. Where every launch
site of the file says so, they are that (`threadIdx.z` is 0, `blockDim.z` is 1) and the passes see a kernel
that is 2-D per block; a kernel whose blocks may have several threads in z (a launch the file does not make,
or a block whose z is not known to be 1) is left to the passes that do not retile x and y (their records say
so: `PassRecord.three_d`; merge only marches such a kernel along z), with a note.
"""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.z_axis import helpers_using_z, is_thread_z, uses_thread_z
from gpgpu_opt.ast_util import transform
from gpgpu_opt.kernel import Kernel

@dataclass(frozen=True)
class BlockZ:
    """What a kernel's z axis lets the passes do: `start` the kernel they work on (threadIdx.z/blockDim.z
    replaced by 0/1 where the launch proves blocks of one z), `why_not` why the passes that retile are off."""
    start: Kernel
    why_not: str | None = None
    #: Where `why_not` holds: the kernel reads the z axis itself, not only through a helper (a pass that
    #: marches z may still run on it).
    reads_z_itself: bool = True


def flatten_block_z(kernel: Kernel) -> Kernel:
    """A copy with `threadIdx.z` -> 0 and `blockDim.z` -> 1: the same kernel under blocks of one z."""
    flat = kernel.copy()

    def replace(n):
        if is_thread_z(n):
            return c_ast.Constant("int", "0" if n.name.name == "threadIdx" else "1", n.coord)
        return None
    transform(flat.body, replace)
    return flat


def block_z(kernel: Kernel, device_functions: dict[str, c_ast.FuncDef], launch_block_z: int | None,
            has_launch: bool) -> BlockZ:
    """`launch_block_z`: the block's z every launch site of the file gives (None: they disagree or it is not
    known); `has_launch`: the file launches the kernel."""
    helpers = helpers_using_z(kernel, device_functions)
    if helpers:
        return BlockZ(kernel, f"'{helpers[0]}', a __device__ function it calls, reads the z axis of the launch",
                      reads_z_itself=False)
    if not uses_thread_z(kernel):
        return BlockZ(kernel)
    if not has_launch:
        return BlockZ(kernel, "the kernel uses threadIdx.z/blockDim.z and the file does not launch it, so its "
                              "blocks may have several threads in z; only x and y are retiled")
    if launch_block_z != 1:
        shown = "not known" if launch_block_z is None else str(launch_block_z)
        return BlockZ(kernel, f"the kernel uses threadIdx.z/blockDim.z and its launch's block z is {shown} "
                              "(the passes retile x and y of blocks of one z)")
    return BlockZ(flatten_block_z(kernel))


__all__ = ["BlockZ", "block_z", "flatten_block_z"]
