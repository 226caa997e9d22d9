"""Partition camping (paper §3.8): do the blocks that run at once send their requests to few DRAM partitions?

GPUs up to GT200 map consecutive `width`-byte chunks of memory round-robin onto `count` partitions. The
blocks that run together are neighbours in x (one per SM, launched in order of blockIdx.x); when the
address stride between block bidx and bidx+1 is a multiple of width x count, they all start in the same
partition and queue there while the others idle. The analysis takes the addresses all threads of those
blocks touch in the first iteration of the loops around the access: at most half the partitions is
camping (a stride that is a multiple of width x count reaches one; a power of two on 6 partitions, 3). Later GPUs hash addresses across channels, so a target
without a partition geometry does not camp; `REFERENCE_GEOMETRY` is what a pass asked to remove camping
there anyway measures against.
"""
from __future__ import annotations

import numpy as np
import sympy

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.coalescing import DEFAULT_SIZE, substitutions
from gpgpu_opt.analysis.symbolic import BID, TID, NotAffine, coefficient, iterator_symbol, lambdified
from gpgpu_opt.targets import Target

#: GT200's 8 partitions of 256 bytes: the geometry the partition pass assumes where it is asked to run on a
#: target that hashes addresses.
REFERENCE_GEOMETRY = (256, 8)


def partition_camping(access: Access, target: Target, block: tuple[int, int], bindings: dict[str, int],
                      geometry: tuple[int, int] | None = None) -> dict | None:
    """Paper §3.8: do the blocks that run together hit few DRAM partitions? `geometry` (width in bytes,
    count) defaults to the target's; None where neither has one."""
    geometry = geometry or target.partition_camping
    if geometry is None or access.evaluable_index is None or access.kind in ("unresolved", "volatile"):
        return None
    width, count = geometry
    subs, _ = substitutions(access, block, bindings)
    try:
        # A quasi-affine subscript counts when only the thread's place in the block is divided
        # (`threadIdx.x / 16`, a staged tile's loader): the blocks still move it by a constant stride.
        stride = coefficient(access.evaluable_index, BID["x"]).subs(subs)
    except NotAffine:
        return None
    if not stride.is_number:
        return None
    stride_bytes = int(stride) * access.element_bytes
    addresses = _first_step_addresses(access, subs, block, target.sm_count) * access.element_bytes
    partitions = np.unique((addresses // width) % count)
    return {"block_stride_bytes": stride_bytes, "partitions_touched": int(partitions.size), "partitions": count,
            "camping": int(partitions.size) <= count // 2}


def _first_step_addresses(access: Access, subs: dict, block: tuple[int, int], blocks: int) -> np.ndarray:
    """The elements the first `blocks` blocks of a row of the grid (the ones running at once, one per SM)
    touch with all their threads in the first iteration of the loops around the access."""
    first: dict = {}
    for loop in access.loops:
        start = sympy.sympify(loop.start).subs(subs).subs(first)
        extra = start.free_symbols - {TID["x"], TID["y"]}
        first[iterator_symbol(loop.var)] = start if not extra else sympy.Integer(0)
    fixed = {k: v for k, v in subs.items() if k not in (BID["x"], BID["y"])}
    expr = access.evaluable_index.subs(fixed).subs(first).subs({BID["y"]: 0, TID["z"]: 0, BID["z"]: 0})
    fn = lambdified([TID["x"], TID["y"], BID["x"]], expr, "numpy")
    tx, ty, bx = np.meshgrid(np.arange(block[0]), np.arange(block[1]), np.arange(blocks), indexing="ij")
    return np.broadcast_to(np.asarray(fn(tx, ty, bx), dtype=np.int64), tx.shape).ravel()

def camps_between_blocks(access: Access, found: dict | None, width: int) -> bool:
    """The paper's rule: an access camps when it involves bidx, neighbouring blocks are at least a
    partition apart, and the blocks running at once reach few partitions. One that does not involve bidx
    reads the same address in every block of a row (one request, served once) or is spread over time by
    bidy; blocks closer than a partition (`out[blockIdx.x]`) share partitions as any contiguous data does.
    Moving blocks would not help either."""
    return found is not None and found["camping"] and abs(found["block_stride_bytes"]) >= width \
        and access.evaluable_index is not None and BID["x"] in sympy.expand(access.evaluable_index).free_symbols


def describe(access: Access, found: dict, block: tuple[int, int], bindings: dict[str, int]) -> str:
    _, assumed = substitutions(access, block, bindings)
    sizes = [a.split(" ")[0] for a in assumed]
    at = f" (with {', '.join(sizes)} = {DEFAULT_SIZE}: the sizes are not bound)" if sizes else ""
    return (f"blocks bidx and bidx+1 are {found['block_stride_bytes']} bytes apart{at}, so the blocks running at "
            f"once reach {found['partitions_touched']} of {found['partitions']} partitions")
