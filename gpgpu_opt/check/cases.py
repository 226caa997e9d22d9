"""Running the naive and the optimized kernels in the CPU emulator on the same random data and comparing every
output element (`run_case`), at the cases `verify` and compile's check run: sizes that divide the tiles and
sizes that do not (`default_cases`), within a work budget (`estimated_work`)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.analysis.z_axis import uses_grid_z, uses_thread_z
from gpgpu_opt.ast_util import walk
from gpgpu_opt.check.extents import (_largest_divisor, _z_of, all_accesses, array_extents, device_variables,
                                     gather_bounds, global_space_from_guards, infer_global_space, planes_from_guards,
                                     written_arrays)
from gpgpu_opt.check.inputs import _words, make_arguments
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel


@dataclass
class Case:
    sizes: dict[str, int | float]
    global_space: tuple[int, int]
    block: tuple[int, ...] | None = None   # the naive launch when known (the program's, or --block/--grid);
    grid: tuple[int, ...] | None = None    # else derived from the global space
    launch_origin: str | None = None       # where that launch comes from ("at line 42"), for messages
    extents: dict[str, int] = field(default_factory=dict)  # --extent: array sizes the subscripts do not tell
    #: The naive grid's z where the case has no grid of its own (a kernel that reads blockIdx.z: its batches).
    batches: int = 1
    #: A kernel of 3-D thread indices launched nowhere with a z: the planes its guard bounds z to, which the
    #: naive launch covers (one thread in z a block); None: one plane, or the launch's own z.
    planes: int | None = None


#: How run_case's errors that come from the naive kernel begin (it races, the emulator cannot run it, its
#: launch starts no block): then no version can be compared at that case.
NAIVE_FAILURES = ("naive kernel:", "the naive kernel races")


@dataclass
class CaseResult:
    case: Case
    elements: int = 0
    max_rel_error: float = 0.0
    mismatches: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mismatches

    @property
    def naive_failed(self) -> bool:
        return self.error is not None and self.error.startswith(NAIVE_FAILURES)


def optimized_launch(optimized: Kernel, naive_block: tuple[int, int], case: Case):
    """Block and grid of a kernel compiled by gpgpu-opt, for the case's global thread space."""
    if optimized.launch:
        return optimized.launch.block, optimized.launch.grid(case.global_space)
    gx, gy = case.global_space
    return naive_block, (math.ceil(gx / naive_block[0]), math.ceil(gy / naive_block[1]))


#: A part of the naive thread space: ((x0, x1), (y0, y1)), ends exclusive.
Region = tuple[tuple[int, int], tuple[int, int]]


def blocks_covering(regions: list[Region], per_block: tuple[int, int], grid: tuple[int, ...]) -> list[int]:
    """Linear ids of the blocks that cover `regions`, for blocks that each cover `per_block` threads."""
    ids = set()
    for (x0, x1), (y0, y1) in regions:
        for by in range(y0 // per_block[1], (y1 - 1) // per_block[1] + 1):
            for bx in range(x0 // per_block[0], (x1 - 1) // per_block[0] + 1):
                ids.add(bx + by * grid[0])
    return sorted(ids)


def naive_geometry(naive_block: tuple[int, int], case: Case) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The naive kernel's (block, grid): the case's launch; a known block with a grid covering the space;
    else the default block narrowed to divide the space, as an unguarded kernel only works when its launch
    covers the thread space exactly (a guarded kernel computes the same either way)."""
    block, grid = _xy_geometry(naive_block, case)
    if case.planes:
        return (*block[:2], 1), (*grid[:2], case.planes)
    return block, grid


def _xy_geometry(naive_block: tuple[int, int], case: Case) -> tuple[tuple[int, ...], tuple[int, ...]]:
    gx, gy = case.global_space
    planes = (case.batches,) if case.batches > 1 else ()
    if case.block is not None and case.grid is not None:
        return case.block, case.grid
    if case.block is not None:
        return case.block, (math.ceil(gx / case.block[0]), math.ceil(gy / case.block[1]), *planes)
    if min(gx, gy) < 1:   # no thread (`--size n=0`): a grid of no block, which run_case reports as such
        return naive_block, (math.ceil(gx / naive_block[0]), math.ceil(gy / naive_block[1]), *planes)
    block = (_largest_divisor(gx, naive_block[0]), _largest_divisor(gy, naive_block[1]))
    return block, (gx // block[0], gy // block[1], *planes)


#: Relative tolerance of a comparison, of the largest expected magnitude (at least 1).
TOLERANCE = 1e-4


#: Atomic float sums add in another order in the optimized kernel: with n atomic terms the rounding error
#: grows like sqrt(n), so arrays written by atomics get TOLERANCE + ATOMIC_TOLERANCE * sqrt(n).
ATOMIC_TOLERANCE = 1e-5


def run_case(naive: Kernel, optimized: Kernel, naive_block: tuple[int, int], case: Case, seed: int,
             device_functions: dict, check_races: bool = True, launch=None,
             regions: list[Region] | None = None, null_pointers: frozenset[str] = frozenset()) -> CaseResult:
    """Run both kernels on the same fresh random inputs and compare every output element. `launch`
    gives the optimized kernel's (block, grid); by default the naive launch for a kernel without its own
    LaunchConfig (the thread mapping is unchanged), else derived from its LaunchConfig. `regions`: emulate
    only the blocks of each kernel that cover these parts of the naive thread space (each must be made of
    whole blocks of both kernels), for launches too large to emulate whole. `null_pointers`: pointer
    parameters passed as null (see null_tested_pointers)."""
    from gpgpu_opt.emulator import EmulationError, RaceError, run_kernel

    result = CaseResult(case)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    block, grid = naive_geometry(naive_block, case)
    accesses = all_accesses(naive)
    unsized: set[str] = set()
    extents = array_extents(naive, case.sizes, block, case.global_space,
                            grid if case.grid or case.batches > 1 or case.planes else None, case.extents, unsized)
    naive_sample = None if regions is None else blocks_covering(regions, block[:2], grid)
    device = device_variables(naive)
    outputs = written_arrays(naive) | device
    unread = {name for name in outputs - device - null_pointers
              if not any(a.array == name and a.mode == "read" for a in accesses)}
    if unsized:
        inputs, error = naive_reach(naive, case, extents, unsized, rng, (block, grid), naive_sample,
                                    device_functions)
        if error:
            return _finish(result, start, error=error)
    else:
        inputs = make_arguments(naive, case.sizes, extents, rng, gather_bounds(naive, extents), frozenset(unread))
    inputs.update({name: None for name in null_pointers})
    for name in unread:
        if inputs[name].dtype.kind == "f":
            inputs[name][:] = np.nan  # poisoned: an element nobody writes stays NaN in both
    if not outputs:
        return _finish(result, start, error=f"kernel '{naive.name}' writes no array: nothing to compare")
    if launch is None:
        launch = (block, grid) if optimized.launch is None else optimized_launch(optimized, block[:2], case)
        # the launch helpers keep the naive grid's planes, or a kernel marching z takes its z threads over the steps
        z = _z_of(grid) if optimized.launch is None else optimized.launch.grid_z(_z_of(grid), _z_of(block))
        launch = launch[0], (*launch[1][:2], z)
    elif case.planes and len(launch[1]) < 3:   # the helpers' x-y launch, and the z they give the naive planes
        z = _z_of(grid) if optimized.launch is None else optimized.launch.grid_z(_z_of(grid), _z_of(block))
        launch = launch[0], (*launch[1][:2], z)
    runs, atomics = {}, 0
    for label, kernel, (b, g) in (("naive", naive, (block, grid)), ("optimized", optimized, launch)):
        # The last run takes the inputs themselves: nothing reads them after it (they are this call's own).
        args = inputs if label == "optimized" else \
            {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        per_block = block[:2] if label == "naive" or optimized.launch is None else optimized.launch.outputs_per_block
        sample = None if regions is None else blocks_covering(regions, per_block, g)
        if min(g) <= 0:  # `dim3(n / 96)` at a small n: CUDA refuses the launch, so there is nothing to compare
            return _finish(result, start, error=f"{label} kernel: its launch at these sizes starts no block "
                                                f"(grid {_dims(g)})")
        try:
            shared = kernel.launch.dynamic_shared_bytes if label == "optimized" and kernel.launch else 0
            stats = run_kernel(kernel, g, b, args, device_functions=device_functions, check_races=check_races,
                               blocks=sample, dynamic_shared_bytes=shared)
        except RaceError as err:
            if label == "naive":  # the input itself is racy: nothing an optimization did
                origin = f"{case.launch_origin}: " if case.launch_origin else ""
                return _finish(result, start, error=f"the naive kernel races (launch {origin}block "
                                                    f"{_dims(block)}, grid {_dims(grid)}): {err}")
            return _finish(result, start, error=f"{label} kernel: {err}")
        except EmulationError as err:
            return _finish(result, start, error=f"{label} kernel: {err}")
        atomics = max(atomics, stats.atomics)
        runs[label] = args
    atomic_arrays = {a.array for a in accesses if a.extra.get("atomic")}
    for name in sorted(outputs - null_pointers):
        tolerance = max(TOLERANCE, optimized.tolerance or 0.0) + \
            (ATOMIC_TOLERANCE * math.sqrt(atomics) if name in atomic_arrays else 0.0)
        _compare(result, name, runs["naive"][name], runs["optimized"][name], tolerance)
    return _finish(result, start)


#: How much larger than the largest array the subscripts size, and than the thread space, an array sized by
#: what the naive kernel reads may be while it is measured (an index computed from loaded integers, which are
#: small: make_arguments draws them from 1 to 15).
REACH_ROOM = 4


def naive_reach(naive: Kernel, case: Case, extents: dict[str, int], unsized: set[str], rng, launch, sample,
                device_functions: dict) -> tuple[dict, str | None]:
    """Inputs where each array of `unsized` (read-only arrays no subscript bounds) holds exactly the elements
    the naive kernel reads on these inputs: the naive kernel is run once with those arrays at a provisional
    size, the words it reads are measured, and each array is cut after the last, or after what its bounded
    subscripts reach if that is further (its values, and so every index computed from them, unchanged).
    Both kernels then run on those inputs: the naive one reads what it read, an optimized one reading past it
    is out of bounds. (inputs, None), or (None, why not)."""
    from gpgpu_opt.emulator import EmulationError, run_kernel

    room = REACH_ROOM * (max(extents.values(), default=1) + math.prod(case.global_space))
    provisional = {**extents, **{name: room for name in unsized}}
    inputs = make_arguments(naive, case.sizes, provisional, rng, gather_bounds(naive, provisional))
    trial = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    try:
        stats = run_kernel(naive, launch[1], launch[0], trial, device_functions=device_functions,
                           check_races=False, blocks=sample, measure_reach=frozenset(unsized))
    except EmulationError as err:
        return None, f"cannot size {', '.join(sorted(unsized))} by what the naive kernel reads: {err}"
    for name in sorted(unsized):
        words = _words(next(p.base_type for p in naive.arrays if p.name == name))
        end = max(stats.reach[name][1], extents.get(name, 1) * words)
        inputs[name] = inputs[name][:-(-end // words) * words]
    return inputs, None


def null_tested_pointers(kernel: Kernel) -> frozenset[str]:
    """Pointer parameters the kernel tests for null (`if (bias != 0)`, `nullptr` lowered to 0, `if (bias)`,
    `!bias`, `bias && ...`): the program may pass them null, so the check also runs with each of them null."""
    from gpgpu_opt.emulator.expressions import _null_constant

    pointers = {p.name for p in kernel.arrays}
    tested = []
    for node in walk(kernel.body):
        if isinstance(node, c_ast.BinaryOp) and node.op in ("==", "!="):
            tested += [side for side, other in ((node.left, node.right), (node.right, node.left))
                       if _null_constant(other)]
        elif isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"):
            tested += [node.left, node.right]
        elif isinstance(node, c_ast.UnaryOp) and node.op == "!":
            tested.append(node.expr)
        elif isinstance(node, (c_ast.If, c_ast.TernaryOp, c_ast.While, c_ast.DoWhile, c_ast.For)):
            tested.append(node.cond)
    return frozenset(n.name for n in tested if isinstance(n, c_ast.ID) and n.name in pointers)


def _compare(result: CaseResult, name: str, expected: np.ndarray, actual: np.ndarray, tolerance: float) -> None:
    result.elements += expected.size
    if np.array_equal(expected, actual):
        return  # the usual outcome, in one pass (the arrays are as large as the program's sizes make them)
    if _same_but_nan(expected, actual):
        return  # what the comparison below finds for such arrays (no mismatch, no error), without its passes
    both_nan = np.isnan(expected) & np.isnan(actual) if expected.dtype.kind == "f" else np.zeros(expected.shape, bool)
    scale = max(1.0, float(np.nanmax(np.abs(expected))) if np.isfinite(expected).any() else 1.0)
    with np.errstate(invalid="ignore"):
        diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
    bad = ~both_nan & ~(diff <= tolerance * scale)
    finite = diff[~both_nan & np.isfinite(diff)]
    if finite.size:
        result.max_rel_error = max(result.max_rel_error, float(finite.max() / scale))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        result.mismatches.append(f"{name}: {int(bad.sum())} of {expected.size} elements differ; first at "
                                 f"[{first}]: naive {expected[first]!r}, optimized {actual[first]!r}")


def _same_but_nan(expected: np.ndarray, actual: np.ndarray) -> bool:
    """Equal floats, NaN where both are NaN (the poisoned elements nobody writes, common where only some
    blocks are emulated), and no infinity (which _compare counts as differing, inf - inf being NaN)."""
    return expected.dtype.kind == "f" and np.array_equal(expected, actual, equal_nan=True) and \
        not np.isinf(expected).any()


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def _finish(result: CaseResult, start: float, error: str | None = None) -> CaseResult:
    result.error = error or result.error
    result.seconds = time.perf_counter() - start
    return result


#: Size parameters of the default cases: one that divides the usual tiles and one that does not.
DIVIDING_SIZE = 64


RAGGED_SIZES = [37, 45, 29, 53, 41, 23]


def default_cases(kernel: Kernel, program, sizes: dict[str, int | float], global_space: tuple[int, int] | None,
                  block: tuple[int, ...] | None = None, grid: tuple[int, ...] | None = None,
                  extents: dict[str, int] | None = None) -> list[Case]:
    """The cases `verify` runs by default: the user's sizes if they give every integer parameter, else a
    dividing and a ragged case. `block`/`grid` (--block/--grid) override the program's launch."""
    int_params = [p.name for p in kernel.scalars if p.base_type not in ("float", "double")]
    for name in int_params:
        if not isinstance(sizes.get(name, 0), int):
            raise CompileError(f"kernel '{kernel.name}': '{name}' is an integer parameter, got --size "
                               f"{name}={sizes[name]}")
    flags = {p.name for p in kernel.scalars if p.base_type == "bool"}    # true in one case, false in the other
    variants = []
    if all(name in sizes for name in int_params):
        variants.append(dict(sizes))
    else:
        variants.append({**sizes, **{name: sizes.get(name, 1 if name in flags else DIVIDING_SIZE)
                                     for name in int_params}})
        ragged = {name: 0 if name in flags else RAGGED_SIZES[k % len(RAGGED_SIZES)] for k, name in enumerate(int_params)}
        variants.append({**sizes, **{name: sizes.get(name, ragged[name]) for name in int_params}})
    return [_case(kernel, program, values, global_space, block, grid, extents or {}) for values in variants]


def covered_space(kernel: Kernel, sizes: dict, block: tuple[int, ...], grid: tuple[int, ...]) -> tuple[int, int]:
    """The thread space a launch covers, clipped by the kernel's guards (threads past `if (i < n)` do nothing)."""
    guards = global_space_from_guards(kernel, sizes)
    return tuple(n * b if g is None else min(n * b, g) for n, b, g in zip(grid, block, guards))


def launch_space(kernel: Kernel, program, sizes: dict) -> tuple[int, int]:
    """The naive thread space at these sizes as `verify` reads it: the program's launch, clipped by the
    guards, where its block and grid evaluate (`dim3 grid(ceil((float)N / block.x))`); else the guards or
    globalDimX/Y alone."""
    from gpgpu_opt.launch.sites import naive_launch

    launch = naive_launch(program, kernel, sizes)
    if launch is not None and None not in launch.block[:2] and None not in launch.grid[:2]:
        return covered_space(kernel, sizes, _as_dim3(launch.block), _as_dim3(launch.grid))
    return infer_global_space(kernel, program, sizes)


def _case(kernel: Kernel, program, sizes: dict, global_space, block, grid, extents: dict[str, int]) -> Case:
    """A case with the naive launch the program makes at these sizes (options win over launch sites), and
    its global thread space: --global, else what that launch covers clipped by the kernel's guards (threads
    past `if (i < n)` do nothing), else the guards or globalDimX/Y alone."""
    from gpgpu_opt.launch.sites import naive_launch

    launch = naive_launch(program, kernel, sizes)
    site_block = launch.block if launch is not None and None not in launch.block else None
    site_grid = launch.grid if launch is not None and None not in launch.grid else None
    if global_space is not None:
        site_grid = None    # --global says how many threads the naive launch starts: its grid covers them
    origins = [f"at {launch.describe()}"] if (site_block and not block) or (site_grid and not grid) else []
    origins += ["from --block/--grid"] if block or grid else []
    block, grid = _as_dim3(block) or site_block, _as_dim3(grid) or site_grid
    if global_space is None and block and grid:
        global_space = covered_space(kernel, sizes, block, grid)
    space = global_space or infer_global_space(kernel, program, sizes)
    planes = None
    if not (block and block[2] > 1 or grid and grid[2] > 1) and (uses_thread_z(kernel) or uses_grid_z(kernel.body)):
        planes = planes_from_guards(kernel, sizes)      # no launch says how many planes: the guard does
        planes = planes if planes is not None and planes > 1 else None
    batches = CHECK_BATCHES if grid is None and planes is None and uses_grid_z(kernel.body) else 1
    return Case(sizes, space, block, grid, ", ".join(origins) or None, extents, batches=batches, planes=planes)


#: Batches (the naive grid's z) a check runs of a kernel that reads blockIdx.z where no launch says how many:
#: enough that a batch's neighbours on both sides are there.
CHECK_BATCHES = 3


def _as_dim3(shape: tuple[int, ...] | None) -> tuple[int, int, int] | None:
    return None if shape is None else (tuple(shape) + (1, 1, 1))[:3]


def quick_check(program, naive: Kernel, block: tuple[int, int]):
    """A checker for the pipeline's --self-check: emulate at one small ragged size after every pass."""
    def check(candidate: Kernel) -> str | None:
        try:
            case = default_cases(naive, program, {}, None)[-1]
        except CompileError as err:
            return None if "cannot tell how many threads" in err.message else err.message
        res = run_case(naive, candidate, block, case, 7, program.device_functions)
        if res.ok:
            return None
        return res.error or res.mismatches[0]
    return check


#: Threads x loop iterations compile's check may emulate per kernel (well under a second of emulation).
WORK_BUDGET = 1 << 22


#: Trip count assumed for a loop whose bound the case does not fix.
_UNKNOWN_TRIPS = 64


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
    planes = case.planes or math.prod(shape[2] if shape is not None and len(shape) > 2 else 1
                                      for shape in (case.grid, case.block))
    planes *= case.batches if case.grid is None else 1
    return math.prod(case.global_space) * deepest * planes    # a 3-D launch runs the x-y space per z
