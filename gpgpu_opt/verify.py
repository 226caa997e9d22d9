"""`gpgpu-opt verify`: run the naive and the optimized kernels in the CPU emulator on random data and
compare every output element, at sizes that divide the tiles and sizes that do not."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.symbolic import BDIM, BID, GDIM, TID, NotAffine, iterator_symbol, to_sympy
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel

_DTYPES = {"float": np.float32, "double": np.float64, "int": np.int32, "unsigned int": np.uint32,
           "unsigned": np.uint32, "long": np.int64, "char": np.int8, "unsigned char": np.uint8}


@dataclass
class Case:
    sizes: dict[str, int]
    global_space: tuple[int, int]


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


def global_space_from_guards(kernel: Kernel, sizes: dict[str, int]) -> tuple[int | None, int | None]:
    """`if (x < n ...)` with x the global thread index in x: the naive launch covers n threads in x."""
    env = {p.name: sympy.Integer(sizes[p.name]) for p in kernel.scalars if p.name in sizes}
    gx = BID["x"] * BDIM["x"] + TID["x"]
    gy = BID["y"] * BDIM["y"] + TID["y"]
    found: dict[str, int] = {}

    def clauses(cond, op="&&"):
        if isinstance(cond, c_ast.BinaryOp) and cond.op == op:
            yield from clauses(cond.left, op)
            yield from clauses(cond.right, op)
        else:
            yield cond

    def record(lhs_node, rhs_node, inclusive):
        try:
            lhs, rhs = to_sympy(lhs_node, env), to_sympy(rhs_node, env)
        except NotAffine:
            return
        if rhs.is_number:
            for axis, g in (("x", gx), ("y", gy)):
                if sympy.expand(lhs - g) == 0:
                    found[axis] = int(rhs) + (1 if inclusive else 0)

    def visit(items):
        for stmt in items:
            if isinstance(stmt, c_ast.Decl) and stmt.init is not None:
                try:
                    env[stmt.name] = to_sympy(stmt.init, env)
                except NotAffine:
                    pass
            if isinstance(stmt, c_ast.If) and isinstance(stmt.iftrue, c_ast.Return):
                for clause in clauses(stmt.cond, "||"):  # `if (x >= n) return;`
                    if isinstance(clause, c_ast.BinaryOp) and clause.op in (">=", ">"):
                        record(clause.left, clause.right, clause.op == ">")
            elif isinstance(stmt, c_ast.If):
                for clause in clauses(stmt.cond):
                    if isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<="):
                        record(clause.left, clause.right, clause.op == "<=")
    visit(kernel.body.block_items or [])
    return found.get("x"), found.get("y")


def array_extents(kernel: Kernel, sizes: dict[str, int], block: tuple[int, int],
                  global_space: tuple[int, int]) -> dict[str, int]:
    """Elements each array needs: the largest subscript over the naive thread space and loop ranges + 1.
    Subscripts are bounded in terms of the global thread coordinates where they only use those, so the
    arrays are no larger than what the naive kernel can touch (an optimized kernel reading past that is
    caught as out of bounds)."""
    block = (_largest_divisor(global_space[0], block[0]), _largest_divisor(global_space[1], block[1]))
    grid = (global_space[0] // block[0], global_space[1] // block[1])
    gsym = {a: sympy.Symbol(f"global.{a}", integer=True, nonnegative=True) for a in "xy"}
    ranges = {TID["x"]: (0, block[0] - 1), TID["y"]: (0, block[1] - 1), TID["z"]: (0, 0),
              BID["x"]: (0, grid[0] - 1), BID["y"]: (0, grid[1] - 1), BID["z"]: (0, 0),
              gsym["x"]: (0, global_space[0] - 1), gsym["y"]: (0, global_space[1] - 1)}
    fixed = {BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: 1, GDIM["x"]: grid[0], GDIM["y"]: grid[1],
             GDIM["z"]: 1}
    fixed.update({sympy.Symbol(k, integer=True): v for k, v in sizes.items()})

    def in_global_terms(expr):
        expr = sympy.expand(expr.subs(fixed))
        for a in "xy":
            trial = sympy.expand(expr.subs(TID[a], gsym[a] - BID[a] * fixed[BDIM[a]]))
            if BID[a] not in trial.free_symbols:
                expr = trial
        return expr

    extents: dict[str, int] = {}
    for access in collect_accesses(kernel):
        if access.index is None:
            raise CompileError(f"cannot size array '{access.array}' for emulation: its subscript "
                               f"'{access.index_text}' is not affine", access.location)
        local = dict(ranges)
        for loop in access.loops:
            lo = _bound(in_global_terms(loop.start), local, max_=False)
            end = loop.end_exclusive
            if end is None:
                if loop.multiplicative and loop.bound is not None:
                    hi = _bound(in_global_terms(loop.bound), local, max_=True)
                else:
                    raise CompileError(f"cannot size array '{access.array}': loop '{loop.var}' has no "
                                       "analysable bound", access.location)
            else:
                hi = _bound(in_global_terms(end), local, max_=True) - 1
            local[iterator_symbol(loop.var)] = (lo, hi)
        top = _bound(in_global_terms(access.index), local, max_=True)
        extents[access.array] = max(extents.get(access.array, 1), top + 1)
    for p in kernel.arrays:
        extents.setdefault(p.name, 1)
    return extents


def _bound(expr: sympy.Expr, ranges: dict, max_: bool) -> int:
    if isinstance(expr, (sympy.Min, sympy.Max)):
        parts = [_bound(a, ranges, max_) for a in expr.args]
        return min(parts) if isinstance(expr, sympy.Min) else max(parts)
    expr = sympy.expand(expr)
    if expr.is_number:
        return int(expr)
    total = expr.subs({s: 0 for s in expr.free_symbols})
    for sym in expr.free_symbols:
        c = expr.coeff(sym)
        if sym not in ranges or not c.is_number:
            raise CompileError(f"cannot bound '{expr}' for emulation (unknown '{sym}'; give it with --size)")
        lo, hi = ranges[sym]
        total += max(c * lo, c * hi) if max_ else min(c * lo, c * hi)
    return int(total)


def make_arguments(kernel: Kernel, sizes: dict[str, int], extents: dict[str, int], rng) -> dict:
    args = {}
    for p in kernel.params:
        if p.is_pointer:
            dtype = _DTYPES.get(p.base_type, np.float32)
            n = extents[p.name]
            if np.issubdtype(dtype, np.floating):
                args[p.name] = rng.uniform(0.5, 1.5, n).astype(dtype) * rng.choice([-1, 1], n).astype(dtype)
            else:
                args[p.name] = rng.integers(1, 16, n).astype(dtype)
        elif p.name in sizes:
            args[p.name] = sizes[p.name]
        elif p.base_type in ("float", "double"):
            args[p.name] = float(rng.uniform(0.5, 1.5))
        else:
            raise CompileError(f"kernel '{kernel.name}': no value for parameter '{p.name}' (use --size {p.name}=N)")
    return args


def _largest_divisor(n: int, at_most: int) -> int:
    return next(d for d in range(min(n, at_most), 0, -1) if n % d == 0)


def written_arrays(kernel: Kernel) -> set[str]:
    return {a.array for a in collect_accesses(kernel) if a.mode == "write"}


def optimized_launch(optimized: Kernel, naive_block: tuple[int, int], case: Case):
    """Block and grid of a kernel compiled by gpgpu-opt, for the case's global thread space."""
    block = optimized.launch.block if optimized.launch else naive_block
    per_block = optimized.launch.outputs_per_block if optimized.launch else naive_block
    gx, gy = case.global_space
    return block, (math.ceil(gx / per_block[0]), math.ceil(gy / per_block[1]))


def run_case(naive: Kernel, optimized: Kernel, naive_block: tuple[int, int], case: Case, seed: int,
             device_functions: dict, check_races: bool = True, launch=None) -> CaseResult:
    """Run both kernels on the same fresh random inputs and compare every output element. `launch`
    gives the optimized kernel's (block, grid); by default it is derived from its LaunchConfig."""
    from gpgpu_opt.emulator import EmulationError, run_kernel

    result = CaseResult(case)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    gx, gy = case.global_space
    extents = array_extents(naive, case.sizes, naive_block, case.global_space)
    inputs = make_arguments(naive, case.sizes, extents, rng)
    outputs = written_arrays(naive)
    for name in outputs:
        if inputs[name].dtype.kind == "f":
            read = any(a.array == name and a.mode == "read" for a in collect_accesses(naive))
            if not read:
                inputs[name][:] = np.nan  # poisoned: an element nobody writes stays NaN in both
    runs = {}
    # An unguarded naive kernel only works when its launch covers the thread space exactly, so the naive
    # block is narrowed to a divisor of the space (a guarded kernel computes the same either way).
    naive_block = (_largest_divisor(gx, naive_block[0]), _largest_divisor(gy, naive_block[1]))
    naive_grid = (gx // naive_block[0], gy // naive_block[1])
    for label, kernel, (block, grid) in (
            ("naive", naive, (naive_block, naive_grid)),
            ("optimized", optimized, launch or optimized_launch(optimized, naive_block, case))):
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        try:
            run_kernel(kernel, grid, block, args, device_functions=device_functions, check_races=check_races)
        except EmulationError as err:
            result.error = f"{label} kernel: {err}"
            result.seconds = time.perf_counter() - start
            return result
        runs[label] = args
    for name in sorted(outputs):
        expected, actual = runs["naive"][name], runs["optimized"][name]
        result.elements += expected.size
        both_nan = np.isnan(expected) & np.isnan(actual) if expected.dtype.kind == "f" else np.zeros(expected.shape, bool)
        scale = max(1.0, float(np.nanmax(np.abs(expected))) if np.isfinite(expected).any() else 1.0)
        with np.errstate(invalid="ignore"):
            diff = np.abs(expected.astype(np.float64) - actual.astype(np.float64))
        bad = ~both_nan & ~(diff <= 1e-4 * scale)
        finite = diff[~both_nan & np.isfinite(diff)]
        if finite.size:
            result.max_rel_error = max(result.max_rel_error, float(finite.max() / scale))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            result.mismatches.append(f"{name}: {int(bad.sum())} of {expected.size} elements differ; first at "
                                     f"[{first}]: naive {expected[first]!r}, optimized {actual[first]!r}")
    result.seconds = time.perf_counter() - start
    return result


#: Size parameters of the default cases: one that divides the usual tiles and one that does not.
DIVIDING_SIZE = 64
RAGGED_SIZES = [37, 45, 29, 53, 41, 23]


def default_cases(kernel: Kernel, program, sizes: dict[str, int], global_space: tuple[int, int] | None) -> list[Case]:
    """The cases `verify` runs by default: the user's sizes if given, else a dividing and a ragged case."""
    int_params = [p.name for p in kernel.scalars if p.base_type not in ("float", "double")]
    variants = []
    if all(name in sizes for name in int_params):
        variants.append(dict(sizes))
    else:
        variants.append({name: sizes.get(name, DIVIDING_SIZE) for name in int_params})
        variants.append({name: sizes.get(name, RAGGED_SIZES[k % len(RAGGED_SIZES)])
                         for k, name in enumerate(int_params)})
    cases = []
    for values in variants:
        space = global_space or infer_global_space(kernel, program, values)
        cases.append(Case(values, space))
    return cases


def infer_global_space(kernel: Kernel, program, sizes: dict[str, int]) -> tuple[int, int]:
    gx, gy = global_space_from_guards(kernel, sizes)
    from gpgpu_opt.launch import evaluate_int

    macros = dict(program.macros)
    if gx is None and "globalDimX" in macros:
        gx = evaluate_int("globalDimX", macros)
    if gy is None and "globalDimY" in macros:
        gy = evaluate_int("globalDimY", macros)
    uses_y = any(a.index is not None and (TID["y"] in a.index.free_symbols or BID["y"] in a.index.free_symbols)
                 for a in collect_accesses(kernel))
    if gy is None and not uses_y:
        gy = 1
    if gx is None or gy is None:
        raise CompileError(f"kernel '{kernel.name}': cannot tell how many threads the naive launch covers "
                           "(no bounding guard such as 'if (i < n)', no globalDimX/globalDimY); "
                           "give it with --global X[,Y]")
    return gx, gy


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
