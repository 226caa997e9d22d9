"""Launch geometry and batches: which lanes (threads) are emulated together, and their coordinates.

A batch is a run of consecutive blocks (by linear block id, x fastest); its lanes are ordered block by
block, and within a block by linear thread id `tx + ty*bx + tz*bx*by`. Warps are 32 consecutive
linear thread ids of a block."""
from __future__ import annotations

import numpy as np

WARP = 32


def _dims3(t, what: str) -> tuple[int, int, int]:
    t = tuple(int(v) for v in (t if hasattr(t, "__iter__") else (t,)))   # a tuple, a list or a Dim3
    if not 1 <= len(t) <= 3 or any(v < 1 for v in t):
        raise ValueError(f"{what} must be 1 to 3 positive ints, got {t}")
    return t + (1,) * (3 - len(t))


class Geometry:
    def __init__(self, grid, block):
        self.grid = _dims3(grid, "grid")
        self.block = _dims3(block, "block")
        bx, by, bz = self.block
        self.tpb = bx * by * bz
        self.nblocks = self.grid[0] * self.grid[1] * self.grid[2]
        self.warps_per_block = (self.tpb + WARP - 1) // WARP
        self.total_threads = self.tpb * self.nblocks

    def block_coords(self, blin: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return blin % gx, (blin // gx) % gy, blin // (gx * gy)

    def thread_coords(self, ltid: int) -> tuple[int, int, int]:
        bx, by, _ = self.block
        return ltid % bx, (ltid // bx) % by, ltid // (bx * by)

    def describe_gid(self, gid: int) -> str:
        blin, ltid = divmod(int(gid), self.tpb)
        b, t = self.block_coords(blin), self.thread_coords(ltid)
        return f"block ({b[0]},{b[1]},{b[2]}) thread ({t[0]},{t[1]},{t[2]})"

    def warp_key(self, ids):
        """A key unique to the warp of each thread id (id = block * tpb + linear thread id)."""
        return (ids // self.tpb) * self.warps_per_block + (ids % self.tpb) // WARP


class Batch:
    """The lanes of `nblocks` consecutive blocks starting at linear block id `first_block`."""

    def __init__(self, geom: Geometry, first_block: int, nblocks: int):
        self.geom = geom
        self.first_block = first_block
        self.nblocks = nblocks
        tpb = geom.tpb
        self.N = n = nblocks * tpb
        lane = np.arange(n, dtype=np.int64)
        self.lane = lane
        self.slot = lane // tpb
        ltid = lane % tpb
        self.ltid = ltid
        bx, by, _ = geom.block
        self.tid = tuple(a.astype(np.uint32) for a in (ltid % bx, (ltid // bx) % by, ltid // (bx * by)))
        blin = first_block + self.slot
        gx, gy, _ = geom.grid
        self.bid = tuple(a.astype(np.uint32) for a in (blin % gx, (blin // gx) % gy, blin // (gx * gy)))
        self.gid = blin * tpb + ltid
        self.lane_in_warp = ltid % WARP
        self.bep = np.zeros(n, np.int32)      # barrier epoch of each lane (its block's __syncthreads count)
        self.wep = np.zeros(n, np.int32)      # warp epoch (its warp's __syncwarp count)
        self.update_epochs()
        self.gid32 = self.gid.astype(np.int32) if geom.total_threads < 2**31 else self.gid
        self.lane32 = lane.astype(np.int32)
        self.exited = np.zeros(n, np.bool_)
        self.empty = np.zeros(n, np.bool_)

    def update_epochs(self) -> None:
        """Recompute the packed epochs (see races.pack_epochs) after bep/wep changed."""
        from gpgpu_opt.emulator.races import pack_epochs
        self.ep, self.bfloor = pack_epochs(self.bep, self.wep)

    def describe_lane(self, lane: int) -> str:
        return self.geom.describe_gid(int(self.gid[int(lane)]))

    def per_block(self, bits: np.ndarray) -> np.ndarray:
        """Count of set lanes in each block of the batch."""
        return bits.reshape(self.nblocks, self.geom.tpb).sum(axis=1)
