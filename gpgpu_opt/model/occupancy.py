"""Occupancy: resident blocks and warps per SM from registers, shared memory and the block size, with the
CUDA occupancy calculator's rules (allocation units and granularities are the target's)."""
from __future__ import annotations

from dataclasses import dataclass

from gpgpu_opt.targets import Target


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    fraction: float          # resident warps / the SM's maximum
    limited_by: str          # 'threads', 'blocks', 'registers', 'shared memory'
    limits: dict             # blocks per SM each resource allows

    def as_dict(self) -> dict:
        return {"blocks_per_sm": self.blocks_per_sm, "warps_per_sm": self.warps_per_sm,
                "occupancy": round(self.fraction, 4), "limited_by": self.limited_by, "limits": self.limits}


def occupancy(target: Target, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int) -> Occupancy:
    """Blocks per SM: the fewest any of the threads, the block slots, the registers and the shared memory allow."""
    warp = target.warp_size
    warps_per_block = -(-threads_per_block // warp)
    max_warps = target.max_threads_per_sm // warp
    limits = {"threads": max_warps // warps_per_block, "blocks": target.max_blocks_per_sm,
              "registers": _register_limit(target, warps_per_block, registers_per_thread),
              "shared memory": _shared_limit(target, shared_bytes_per_block)}
    if threads_per_block > target.max_threads_per_block:
        limits["threads"] = 0
    blocks = min(limits.values())
    limited_by = min(limits, key=lambda k: limits[k])
    return Occupancy(blocks, blocks * warps_per_block, blocks * warps_per_block / max_warps, limited_by, limits)


def _register_limit(target: Target, warps_per_block: int, registers: int) -> int:
    if registers <= 0:
        return target.max_blocks_per_sm
    if registers > target.max_registers_per_thread:
        return 0
    if target.register_alloc_granularity == "block":
        # cc 1.x: a block's registers, its warps rounded to an even count, in allocation units.
        per_block = _round_up(_round_up(warps_per_block, target.warp_alloc_granularity) * registers
                              * target.warp_size, target.register_alloc_unit)
        return target.registers_per_sm // per_block
    per_warp = _round_up(registers * target.warp_size, target.register_alloc_unit)
    warps = target.registers_per_sm // per_warp
    warps -= warps % target.warp_alloc_granularity
    return warps // warps_per_block


def _shared_limit(target: Target, shared_bytes: int) -> int:
    per_block = _round_up(shared_bytes + target.shared_reserved_per_block, target.shared_alloc_unit)
    if per_block == 0:
        return target.max_blocks_per_sm
    return target.shared_per_sm // per_block
