"""What `compile` checks before it writes: each rewritten kernel is emulated against the naive one on a small
case whose sizes do not divide the tiles, with the race check on. A version that fails is dropped for the
newest earlier version (after fewer passes) that passes; at worst the naive kernel is written.

Where the program fixes its sizes (macros) and the whole launch is too large to emulate, the check runs the
blocks that cover two corners of the thread space, the first and the last (where a ragged edge would be),
each corner made of whole blocks of the naive kernel and of every version. A kernel the file does not launch
is also run under one naive launch of blocks that divide no tile, as its launch helpers would serve it."""
from __future__ import annotations

import math
from dataclasses import dataclass

from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.verify import Case, Region, default_cases, naive_geometry, run_case
from gpgpu_opt.verify_launches import odd_launch_check

#: Threads x loop iterations the check may emulate per kernel (well under a second of emulation).
WORK_BUDGET = 1 << 22
#: Trip count assumed for a loop whose bound the case does not fix.
_UNKNOWN_TRIPS = 64


@dataclass
class Validation:
    status: str                     # 'passed', 'rolled back', 'skipped'
    detail: str
    case: Case | None = None
    kept_after: str | None = None   # the pass whose output was kept, when rolled back (None: naive)

    def as_dict(self) -> dict:
        d = {"status": self.status, "detail": self.detail}  # no time: reports are compared as golden files
        if self.case is not None:
            d["sizes"] = self.case.sizes
            d["threads"] = list(self.case.global_space)
        if self.status == "rolled back":
            d["kept"] = self.kept_after or "naive"
        return d


def validate(program, naive: Kernel, versions: list[tuple[str, Kernel]], block: tuple[int, int],
             seed: int = 11, bindings: dict[str, int] | None = None) -> tuple[Kernel, Validation]:
    """`versions` are the kernel after each pass, in order; `bindings` the parameters `--bind` fixed (the
    versions are specialized to them, so the case takes them too). Returns the newest version that computes
    what the naive kernel computes on the check's case, and what the check found."""
    try:
        case = _case(program, naive, block, bindings or {})
    except CompileError as err:
        return versions[-1][1], Validation("skipped", f"not emulated: {err.message}")
    work = estimated_work(naive, case)
    regions, where = None, ""
    if work > WORK_BUDGET:
        per_thread = work / math.prod(case.global_space)
        regions = corner_regions(case, block, [k for _, k in versions])
        work = per_thread * sum((x1 - x0) * (y1 - y0) for (x0, x1), (y0, y1) in regions or [])
        if regions is None or work > WORK_BUDGET:
            return versions[-1][1], Validation(
                "skipped", f"not emulated: the sizes the program fixes ({_describe(case)}) are too large to "
                           "emulate; check a smaller build with `gpgpu-opt verify -D NAME=VALUE`", case)
        where = " in the blocks at two corners of the thread space"
    first_failure = None
    for k in range(len(versions) - 1, -1, -1):
        name, kernel = versions[k]
        try:
            result = run_case(naive, kernel, block, case, seed, program.device_functions, regions=regions)
            odd = odd_launch_check(program, naive, kernel, block, case, seed) if result.ok and regions is None \
                else None  # no launch in the file: also a naive launch of blocks that divide no tile
            result = odd if odd is not None and not odd.ok else result
        except CompileError as err:  # the case cannot be set up (an array it cannot size)
            return versions[-1][1], Validation("skipped", f"not emulated: {err.message}", case)
        if result.ok:
            if first_failure is None:
                where = where or f" on {result.elements} elements"
                return kernel, Validation("passed", f"matches the naive kernel{where}, no race", case, name)
            return kernel, Validation("rolled back", first_failure, case, name)
        if first_failure is None:
            first_failure = f"after {name}: {result.error or result.mismatches[0]}"
    return naive, Validation("rolled back", first_failure or "", case, None)


def _case(program, naive: Kernel, block: tuple[int, int], bindings: dict[str, int]) -> Case:
    """The ragged case of `verify`. A kernel with no guard and no stated thread space only works for a launch
    of whole blocks, so any number of naive blocks is a launch the program could make: take two in x (the
    passes keep their blocks dividing the naive one, so this divides theirs too)."""
    try:
        return default_cases(naive, program, bindings, None)[-1]
    except CompileError as unknown_space:
        space = (2 * block[0], block[1] if uses_y(naive, collect_accesses(naive)) else 1)
        try:
            return default_cases(naive, program, bindings, space)[-1]
        except CompileError:
            raise unknown_space from None


def corner_regions(case: Case, block: tuple[int, int], versions: list[Kernel]) -> list[Region] | None:
    """The first and the last corner of the thread space, each as small as whole blocks of every version
    allow; None when a version's blocks do not map to parts of the thread space (a fixed grid)."""
    if any(k.launch is not None and k.launch.fixed_grid for k in versions):
        return None
    naive_block = naive_geometry(block, case)[0][:2]  # the block the emulation runs the naive kernel with
    spans = []
    for axis in (0, 1):
        step = math.lcm(naive_block[axis], *[k.launch.outputs_per_block[axis] for k in versions if k.launch])
        extent = case.global_space[axis]
        last = (extent - 1) // step * step
        spans.append(((0, min(step, extent)), (last, extent)))
    first, final = zip(*spans)
    return list(dict.fromkeys([tuple(first), tuple(final)]))


def estimated_work(kernel: Kernel, case: Case) -> float:
    """Threads of the case times the iterations of the deepest loop nest around a global access."""
    values = {param_symbol(name): value for name, value in case.sizes.items()}
    deepest = 1.0
    for access in collect_accesses(kernel):
        trips = 1.0
        for loop in access.loops:
            count = loop.trip_count()
            count = count.subs(values) if count is not None else None
            trips *= max(0.0, float(count)) if count is not None and count.is_number else _UNKNOWN_TRIPS
        deepest = max(deepest, trips)
    return math.prod(case.global_space) * deepest


def _describe(case: Case) -> str:
    return f"{case.global_space[0]} x {case.global_space[1]} threads"


__all__ = ["validate", "Validation", "estimated_work"]
