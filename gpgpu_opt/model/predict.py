"""The latency-hiding model of seeds/003 (Yuan et al., 2010), per SM, for one kernel launch.

A thread's global loads come in phases: the loads it issues together (its ILP: an unrolled loop's, a
staged tile's) and then waits for. One phase of a group of warps that must wait together (a warp; a
block, when the kernel has barriers) takes the memory latency, the group's own bytes at the SM's share of
the bandwidth, and the group's compute (seeds/003: MemAccLa + MemAccBw + ILP). Other resident groups (TLP:
warps, BLP: blocks, from the occupancy) compute meanwhile, so the SM is busy for the longest of
- the chain of one group: waves x phases x (latency + bandwidth + compute of the phase), and
- the throughput of each unit for all of the SM's work: instruction issue, the FP32 lanes, L1/shared
  wavefronts (one per 128-byte line a request touches), L2 and DRAM bytes (Little's law: when too few
  requests are in flight the chain term is the longer one).
The busiest SM gets ceil(blocks / SMs) blocks (the tail). The time is a soft maximum of these terms, so
that the terms not binding still order variants that tie on the binding one."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.model.occupancy import Occupancy, occupancy
from gpgpu_opt.model.resources import Resources, estimate_resources
from gpgpu_opt.model.work import Work, count_work
from gpgpu_opt.targets import Target

#: The exponent of the soft maximum of the terms (large: the plain maximum).
SOFT_MAX_POWER = 4
SECTOR_BYTES = 32


@dataclass
class Prediction:
    seconds: float
    bound: str                  # the largest term: 'dram', 'l2', 'l1/shared', 'fp32', 'issue', 'latency', ...
    occupancy: float            # resident warps / the SM's maximum
    detail: dict = field(default_factory=dict)


def default_naive_block(kernel: Kernel) -> tuple[int, int]:
    """The naive block the pipeline assumes when the program does not launch the kernel."""
    return (16, 16) if uses_y(kernel, collect_accesses(kernel)) else (256, 1)


def predict(kernel: Kernel, target: Target, sizes: dict[str, int], resources: Resources | None,
            global_space: tuple[int, int] | None = None, naive_block: tuple[int, int] | None = None) -> Prediction:
    """Predicted time of one launch of `kernel` at `sizes`. `global_space`: the naive launch's threads in x
    and y (default: the largest size in x, and in y too for a 2-D kernel); `naive_block`: the naive launch's
    block (for a kernel without a launch of its own); `resources`: ptxas's (None: estimated from the AST)."""
    naive_block = naive_block or default_naive_block(kernel)
    if global_space is None:
        largest = int(max(sizes.values())) if sizes else 1
        global_space = (largest, largest if naive_block[1] > 1 else 1)
    if kernel.launch is None:
        block = naive_block
        grid = tuple(-(-g // b) for g, b in zip(global_space, block))
    else:
        block, grid = kernel.launch.block, kernel.launch.grid(global_space)
    resources = resources or estimate_resources(kernel)
    threads = block[0] * block[1]
    occ = occupancy(target, threads, resources.registers, resources.shared_bytes)
    detail = {"block": list(block), "grid": list(grid), "resources": resources.as_dict(), **occ.as_dict()}
    if occ.blocks_per_sm == 0:
        return Prediction(math.inf, "launch", 0.0, {**detail, "why": f"a block does not fit ({occ.limited_by})"})
    work = count_work(kernel, target, block, grid, sizes)
    terms = _terms(target, work, resources, occ, block, grid)
    cycles = sum(t ** SOFT_MAX_POWER for t in terms.values()) ** (1 / SOFT_MAX_POWER)
    seconds = cycles / (target.clock_ghz * 1e9) + target.launch_overhead_us * 1e-6
    bound = max(terms, key=lambda k: terms[k])
    detail.update({"terms_us": {k: round(v / (target.clock_ghz * 1e3), 3) for k, v in terms.items()},
                   "work_per_thread": work.as_dict(), "assumptions": work.assumptions})
    return Prediction(seconds, bound, occ.fraction, detail)


def predict_result(result, target: Target, sizes: dict[str, int], resources: Resources | None,
                   global_space: tuple[int, int] | None = None) -> Prediction:
    """predict() for a compiled kernel (a pipeline KernelResult): the naive launch, its block and thread
    space (from the naive kernel's bounding guards, else its sizes), are the naive kernel's, not guessed
    from the optimized one (whose merged threads may use threadIdx.y where the naive kernel is 1-D)."""
    if global_space is None:
        from gpgpu_opt.check.extents import global_space_from_guards

        naive = result.naive
        gx, gy = global_space_from_guards(naive, sizes)
        largest = int(max(sizes.values())) if sizes else 1
        two_d = uses_y(naive, collect_accesses(naive))
        global_space = (gx or largest, gy or (largest if two_d else 1))
    return predict(result.optimized, target, sizes, resources, global_space, result.context.facts.naive_block.xy)


def _terms(target: Target, work: Work, resources: Resources, occ: Occupancy, block, grid) -> dict[str, float]:
    """Cycles of the busiest SM that each unit, and the latency chain, need."""
    warp = target.warp_size
    warps_per_block = -(-block[0] * block[1] // warp)
    blocks = grid[0] * grid[1]
    active_sms = min(target.sm_count, blocks)
    blocks_per_sm = -(-blocks // target.sm_count)
    warps = blocks_per_sm * warps_per_block
    total_warps = blocks * warps_per_block

    # Spilled words go through L1 once per phase (ptxas spills outside the innermost loops where it can).
    spill_wavefronts = (resources.spill_load_bytes + resources.spill_store_bytes) / 4 * max(work.load_waits, 1)
    wavefronts = (sum(r.per_thread * r.lines for r in work.requests) + work.shared_wavefronts + work.shuffles
                  + spill_wavefronts)
    l2_bytes = sum(r.per_thread * r.sectors * SECTOR_BYTES * r.l1_miss for r in work.requests)
    dram_bytes = _dram_bytes(work, total_warps)
    clock = target.clock_ghz * 1e9
    dram_per_sm = min(target.memory_bandwidth_gbs * 1e9 * target.dram_efficiency / active_sms / clock,
                      target.l2_bytes_per_cycle_per_sm)
    terms = {"issue": warps * (work.instructions + spill_wavefronts) / target.issue_per_cycle,
             "fp32": warps * work.fp_instructions / (target.fp32_lanes_per_sm / warp),
             "l1/shared": warps * wavefronts / target.lsu_per_cycle,
             "l2": warps * l2_bytes / target.l2_bytes_per_cycle_per_sm,
             "dram": dram_bytes / active_sms / dram_per_sm}
    terms["latency"] = _latency_chain(target, work, occ, warps_per_block, blocks_per_sm, l2_bytes, dram_bytes,
                                      total_warps, dram_per_sm)
    return terms


def _dram_bytes(work: Work, total_warps: int) -> float:
    """Loads: what misses L1, at most the bytes of the array the grid touches (L2 keeps what blocks share);
    stores: every sector written."""
    loads: dict[str, float] = {}
    extents: dict[str, float] = {}
    stores = 0.0
    for r in work.requests:
        traffic = total_warps * r.per_thread * r.sectors * SECTOR_BYTES
        if r.mode == "write":
            stores += min(traffic, r.extent_bytes) if r.extent_bytes else traffic
            continue
        loads[r.array] = loads.get(r.array, 0.0) + traffic * r.l1_miss
        if r.extent_bytes:
            extents[r.array] = max(extents.get(r.array, 0.0), r.extent_bytes)
    return stores + sum(min(v, extents[a]) if a in extents else v for a, v in loads.items())


def _latency_chain(target: Target, work: Work, occ: Occupancy, warps_per_block: int, blocks_per_sm: int,
                   l2_bytes: float, dram_bytes: float, total_warps: int, dram_per_sm: float) -> float:
    """seeds/003's time of one group of warps that wait together, over all its phases and waves: latency
    of where the loads are served (L1, L2 or DRAM, by their share of the traffic), the group's bytes at the
    SM's bandwidth, and its compute between waits (its dependent instructions at the ALU latency each)."""
    waits = max(work.load_waits, 1.0)
    load_sectors = sum(r.per_thread * r.sectors * SECTOR_BYTES for r in work.requests if r.mode == "read")
    from_l2 = min(1.0, l2_bytes / load_sectors) if load_sectors else 0.0
    from_dram = min(from_l2, dram_bytes / total_warps / load_sectors) if load_sectors else 0.0
    latency = (target.l1_latency_cycles + from_l2 * (target.l2_latency_cycles - target.l1_latency_cycles)
               + from_dram * (target.memory_latency_cycles - target.l2_latency_cycles))
    group = warps_per_block if work.barriers else 1
    # a chain of dependent instructions issues one per ALU latency, however few the group's warps
    chained = work.instructions + work.dependent_instructions * (target.dependent_issue_cycles - 1)
    compute = max(group * work.instructions / min(target.issue_per_cycle, group), chained) / waits
    bandwidth = group * dram_bytes / total_warps / waits / dram_per_sm
    waves = -(-blocks_per_sm // occ.blocks_per_sm)
    return waves * waits * (latency + bandwidth + compute)
