"""Launch shapes for kernels whose launch is not in the file: `verify` runs the naive kernel under several
naive launches (block shapes that divide no tile, thread spaces that divide nothing, and whole tiles of odd
blocks) and, as the launch helpers would, either launches the optimized kernel with the helpers' block and
grid and compares, or confirms that the helpers refuse that launch (gpgpu_opt/launch_contract.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch.contract import LaunchAssumptions, guarded_axes, helper_launch, launch_assumptions
from gpgpu_opt.check.cases import WORK_BUDGET, Case, CaseResult, default_cases, estimated_work, naive_geometry, run_case

#: Naive block shapes tried, for kernels indexed in x only and for 2-D kernels.
BLOCKS_1D = [(32, 1), (64, 1), (96, 1)]
BLOCKS_2D = [(8, 8), (16, 4), (32, 2)]
#: Blocks per unguarded axis in the ragged launch: three blocks divide no power-of-two tile.
RAGGED_BLOCKS = 3
#: Threads a fuzzed launch may start (the emulation of a few of them stays well under a second each).
MAX_THREADS = 1 << 14


@dataclass
class LaunchOutcome:
    """One naive launch: refused by the helpers (`refusal`), invalid for the naive kernel itself
    (`naive_invalid`), or run and compared (`result`)."""
    case: Case
    block: tuple[int, ...]
    grid: tuple[int, ...]
    refusal: str | None = None
    naive_invalid: str | None = None
    result: CaseResult | None = None

    @property
    def ok(self) -> bool:
        return self.result is None or self.result.ok


def check_launch(naive: Kernel, optimized: Kernel, assumptions: LaunchAssumptions, fallback_block, case: Case,
                 seed: int, device_functions: dict) -> LaunchOutcome:
    """The case's naive launch through the helpers' logic: refused, or compared at the helpers' launch."""
    block, grid = naive_geometry(fallback_block, case)
    refusal = assumptions.refusal(grid, block)
    if refusal is not None:
        return LaunchOutcome(case, block, grid, refusal=refusal)
    result = run_case(naive, optimized, fallback_block, case, seed, device_functions,
                      launch=helper_launch(optimized, grid, block))
    if result.naive_failed:
        return LaunchOutcome(case, block, grid, naive_invalid=result.error)
    return LaunchOutcome(case, block, grid, result=result)


def odd_launch_check(program, naive: Kernel, optimized: Kernel, naive_block: tuple[int, int], base: Case,
                     seed: int) -> CaseResult | None:
    """compile's check of a kernel the file does not launch: one more naive launch, of blocks that divide
    no tile (96 threads, 8x8), that the helpers accept; its result, or None when there is none to run."""
    assumptions = launch_assumptions(program, naive, optimized, naive_block)
    if assumptions is None:
        return None
    odd = [(96, 1), (8, 8)]
    for case in launch_cases(naive, program, base, assumptions, guarded_axes(naive, program), odd):
        outcome = check_launch(naive, optimized, assumptions, naive_block, case, seed, program.device_functions)
        if outcome.result is not None:
            return outcome.result
    return None


def launch_cases(naive: Kernel, program, base: Case, assumptions: LaunchAssumptions, guarded: set[str],
                 blocks: list[tuple[int, int]] | None = None) -> list[Case]:
    """Naive launches at the base case's sizes: each block shape with a ragged grid (three blocks along an
    unguarded axis, enough to cover the guard's space along a guarded one) and, where the helpers would
    refuse that, with the fewest blocks covering whole tiles. The pinned block, if any, is tried too.
    `blocks`: only these shapes (those of the kernel's dimensions)."""
    two_d = uses_y(naive, collect_accesses(naive))
    blocks = [b for b in blocks or BLOCKS_2D + BLOCKS_1D if (b[1] > 1) == two_d]
    if assumptions.block is not None and assumptions.block not in blocks:
        blocks.append(assumptions.block)
    cases = []
    for block in blocks:
        ragged = tuple(_ragged_blocks(base.global_space[d], block[d], axis in guarded, two_d or d == 0)
                       for d, axis in enumerate("xy"))
        grids = [ragged]
        if assumptions.refusal(ragged, block) is not None and assumptions.block in (None, block):
            grids.append(tuple(_tiling_blocks(block[d], assumptions.multiple[d], assumptions.extent[d], ragged[d])
                               for d in range(2)))
        for grid in dict.fromkeys(grids):
            if grid[0] * block[0] * grid[1] * block[1] > MAX_THREADS:
                continue
            try:
                cases += default_cases(naive, program, base.sizes, None, block, grid, base.extents)
            except CompileError:
                continue  # arrays the subscripts cannot size at this launch: nothing to run
    return [case for case in cases if _affordable(naive, case)]


def _affordable(naive: Kernel, case: Case) -> bool:
    """Within compile's emulation budget (sizes the program fixes can make one launch hours of emulation)."""

    try:
        return estimated_work(naive, case) <= WORK_BUDGET
    except Exception:  # noqa: BLE001 - a loop the estimate cannot bound: the emulation finds out
        return True


def _ragged_blocks(space: int, block: int, guarded: bool, used: bool) -> int:
    if not used:
        return 1
    return math.ceil(space / block) if guarded else RAGGED_BLOCKS


def _tiling_blocks(block: int, multiple: int, extent: int | None, at_least: int) -> int:
    """The fewest blocks, at least `at_least`, whose threads are a whole number of `multiple` (exactly
    `extent` threads where the program states them and the block divides them)."""
    if extent is not None and extent % block == 0:
        return extent // block
    step = math.lcm(block, multiple) // block
    return math.ceil(at_least / step) * step


def describe(outcome: LaunchOutcome) -> str:
    return f"naive launch grid {_dims(outcome.grid)} block {_dims(outcome.block)}"


def _dims(shape) -> str:
    return "x".join(map(str, shape[:2]))


__all__ = ["LaunchOutcome", "check_launch", "launch_cases", "odd_launch_check", "describe"]
