"""`gpgpu-opt verify`: run the naive and the optimized kernels in the CPU emulator on random data and
compare every output element, at sizes that divide the tiles and sizes that do not."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import AccessCollector, collect_accesses
from gpgpu_opt.analysis.induction import in_closed_form
from gpgpu_opt.analysis.symbolic import (BDIM, BID, GDIM, QUASI_FUNCTIONS, TID, NotAffine, c_div, iterator_symbol,
                                         param_symbol, to_sympy)
from gpgpu_opt.ast_util import call_args, call_name, ids_in, walk
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.host_expr import evaluate_int
from gpgpu_opt.kernel import Kernel

def _element(base_type: str):
    """The emulator's type of an array element (None: not one it knows), for the environment's types too
    (`__half`, `half2`, `uint32_t`)."""
    from gpgpu_opt.emulator.values import type_from_names
    try:
        return type_from_names(base_type.split())
    except Exception:  # noqa: BLE001 - not a type the emulator knows: it reports that when it runs
        return None


def _dtype(base_type: str):
    """The numpy dtype of an array of `base_type` (a vector type's: its components'), from the CUDA type
    table through the emulator's types."""
    t = _element(base_type)
    t = getattr(t, "base", t)
    return t.dtype.type if t is not None else np.float32


def _words(base_type: str) -> int:
    """Scalar words per element: a vector type's components (`half2`: 2)."""
    return getattr(_element(base_type), "n", 1)


def _representable(values: np.ndarray, base_type: str) -> np.ndarray:
    """Values of the element type: bfloat16 (held in float32) rounded to its 8 bits."""
    t = _element(base_type)
    t = getattr(t, "base", t)
    if t is not None and getattr(t, "is_bfloat16", False):
        from gpgpu_opt.frontend.math_impl import to_bfloat16
        return to_bfloat16(values)
    return values


@dataclass
class Case:
    sizes: dict[str, int | float]
    global_space: tuple[int, int]
    block: tuple[int, ...] | None = None   # the naive launch when known (the program's, or --block/--grid);
    grid: tuple[int, ...] | None = None    # else derived from the global space
    launch_origin: str | None = None       # where that launch comes from ("at line 42"), for messages
    extents: dict[str, int] = field(default_factory=dict)  # --extent: array sizes the subscripts do not tell


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


def global_space_from_guards(kernel: Kernel, sizes: dict[str, int | float]) -> tuple[int | None, int | None]:
    """`if (x < n ...)` with x the global thread index in x: the naive launch covers n threads in x."""
    env = {p.name: sympy.Integer(sizes[p.name]) for p in kernel.scalars if isinstance(sizes.get(p.name), int)}
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


class _AllAccesses(AccessCollector):
    """The kernel's accesses, also those the analyses leave out: atomics (`atomicAdd(&c[i], v)`,
    `atomicAdd(sum, v)`) and dereferences (`*p = v`), each recorded as the subscripted access it is.
    Atomic accesses are marked `extra["atomic"]`."""

    def visit_FuncCall(self, node: c_ast.FuncCall):
        args = call_args(node)
        target = None
        if (call_name(node) or "").startswith("atomic") and args:
            first = args[0]
            target = first.expr if isinstance(first, c_ast.UnaryOp) and first.op == "&" and \
                isinstance(first.expr, c_ast.ArrayRef) else _pointee(first)
        if target is None:
            super().visit_FuncCall(node)   # cache-hinted accesses and out-parameters
            return
        count = len(self.accesses)
        self._record(target, "read")
        self._record(target, "write")
        for access in self.accesses[count:]:
            access.extra["atomic"] = True
        self._visit_subscripts(target)
        for arg in args[1:]:
            self.visit(arg)

    def visit_UnaryOp(self, node: c_ast.UnaryOp):
        target = _pointee(node.expr) if node.op == "*" else None
        if target is None:
            super().visit_UnaryOp(node)
        else:
            self.visit_ArrayRef(target)

    def visit_Assignment(self, node: c_ast.Assignment):
        lvalue = node.lvalue
        target = _pointee(lvalue.expr) if isinstance(lvalue, c_ast.UnaryOp) and lvalue.op == "*" else None
        super().visit_Assignment(node if target is None else c_ast.Assignment(node.op, target, node.rvalue,
                                                                               node.coord))


def _pointee(pointer: c_ast.Node) -> c_ast.ArrayRef | None:
    """`p` or `p + k` as the element it points to: `p[0]`, `p[k]`."""
    if isinstance(pointer, c_ast.ID):
        return c_ast.ArrayRef(pointer, c_ast.Constant("int", "0"), pointer.coord)
    if isinstance(pointer, c_ast.BinaryOp) and pointer.op == "+":
        for base, offset in ((pointer.left, pointer.right), (pointer.right, pointer.left)):
            if isinstance(base, c_ast.ID):
                return c_ast.ArrayRef(base, offset, pointer.coord)
    return None


def all_accesses(kernel: Kernel) -> list:
    collector = _AllAccesses(kernel)
    collector.visit(kernel.body)
    return collector.accesses


def array_extents(kernel: Kernel, sizes: dict[str, int], block: tuple[int, ...], global_space: tuple[int, int],
                  grid: tuple[int, ...] | None = None, given: dict[str, int] | None = None,
                  unsized: set[str] | None = None) -> dict[str, int]:
    """Elements each array needs: the largest subscript over the naive thread space and loop ranges + 1.
    Subscripts are bounded in terms of the global thread coordinates where they only use those, so the
    arrays are no larger than what the naive kernel can touch (an optimized kernel reading past that is
    caught as out of bounds). `grid` is the naive launch's grid when known (else the block is narrowed to
    divide the space); `given` (--extent) sizes arrays outright, gathered ones (`src[perm[i]]`) included.
    `unsized`: where given, an array the kernel only reads whose subscript cannot be bounded here
    (`img[up[row] + rows * col]`, `up[(e + 1) % rows]`) is added to it rather than refused, for run_case to
    size by what the naive kernel reads (naive_reach)."""
    given = given or {}
    read_only = {p.name for p in kernel.arrays if p.base_type not in kernel.struct_layouts} - written_arrays(kernel) \
        if unsized is not None else set()
    if grid is None:
        block = (_largest_divisor(global_space[0], block[0]), _largest_divisor(global_space[1], block[1]))
        grid = (global_space[0] // block[0], global_space[1] // block[1])
    gsym = {a: sympy.Symbol(f"global.{a}", integer=True, nonnegative=True) for a in "xy"}
    block_z, grid_z = _z_of(block), _z_of(grid)  # a 3-D launch: every plane of threads and of blocks
    ranges = {TID["x"]: (0, block[0] - 1), TID["y"]: (0, block[1] - 1), TID["z"]: (0, block_z - 1),
              BID["x"]: (0, grid[0] - 1), BID["y"]: (0, grid[1] - 1), BID["z"]: (0, grid_z - 1),
              gsym["x"]: (0, global_space[0] - 1), gsym["y"]: (0, global_space[1] - 1)}
    fixed = {BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: block_z, GDIM["x"]: grid[0],
             GDIM["y"]: grid[1], GDIM["z"]: grid_z}
    fixed.update({sympy.Symbol(k, integer=True): v for k, v in sizes.items() if isinstance(v, int)})

    def in_global_terms(expr):
        expr = sympy.expand(expr.subs(fixed))
        for a in "xy":
            trial = sympy.expand(expr.subs(TID[a], gsym[a] - BID[a] * fixed[BDIM[a]]))
            if BID[a] not in trial.free_symbols:
                expr = trial
        return expr

    extents: dict[str, int] = {}
    for access in all_accesses(in_closed_form(kernel)):   # `c += xy;` per plane: `c + k * xy`, the same accesses
        if access.array in given:
            continue
        if access.evaluable_index is None:
            if gather_index_array(kernel, access) is None and access.array in read_only:
                unsized.add(access.array)
                continue
            if gather_index_array(kernel, access) is None:
                raise CompileError(f"cannot size array '{access.array}' for emulation: its subscript "
                                   f"'{access.index_text}' is not affine (give its size with --extent "
                                   f"{access.array}=N)", access.location)
            # A gather: the index array gets values inside whatever size the target has.
            extents[access.array] = max(extents.get(access.array, 1), global_space[0] * global_space[1])
            continue
        try:
            local = dict(ranges)
            for loop in access.loops:
                local[iterator_symbol(loop.var)] = _iterator_range(loop, access, local, in_global_terms)
            top = _bound(in_global_terms(access.evaluable_index), local, max_=True)
        except CompileError:
            if access.array not in read_only:
                raise
            unsized.add(access.array)   # `up[r]`, r a local assigned twice: no bound here, the run's instead
            continue
        extents[access.array] = max(extents.get(access.array, 1), top + 1)
    extents.update(given)
    for p in kernel.arrays:
        extents.setdefault(p.name, 1)
    return extents


def _z_of(shape: tuple[int, ...]) -> int:
    return shape[2] if len(shape) > 2 else 1


def _iterator_range(loop, access, ranges: dict, in_global_terms) -> tuple[int, int]:
    """The smallest and largest value a canonical loop's iterator takes, counting up or down."""
    def low(expr):
        return _bound(in_global_terms(expr), ranges, max_=False)

    def high(expr):
        return _bound(in_global_terms(expr), ranges, max_=True)

    end = loop.end_exclusive
    if end is not None:
        return low(loop.start), high(end) - 1
    if loop.bound is not None and loop.multiplicative:
        return low(loop.start), high(loop.bound)
    if loop.bound is not None and loop.step < 0 and loop.comparison in (">", ">="):
        return low(loop.bound) + (loop.comparison == ">"), high(loop.start)  # `for (k = n - 1; k >= 0; k--)`
    raise CompileError(f"cannot size array '{access.array}': loop '{loop.var}' has no analysable bound",
                       access.location)


def gather_index_array(kernel: Kernel, access) -> str | None:
    """`src[perm[i]]`: the integer array whose loaded value is the whole subscript, else None."""
    sub = access.node.subscript
    if not (isinstance(sub, c_ast.ArrayRef) and isinstance(sub.name, c_ast.ID)):
        return None
    param = next((p for p in kernel.arrays if p.name == sub.name.name), None)
    return param.name if param is not None and _is_integer(param.base_type) else None


def gather_bounds(kernel: Kernel, extents: dict[str, int]) -> dict[str, int]:
    """Index arrays of gathers and the (exclusive) bound their values must stay under."""
    bounds: dict[str, int] = {}
    for access in all_accesses(kernel):
        index_array = access.index is None and gather_index_array(kernel, access)
        if index_array:
            bounds[index_array] = min(bounds.get(index_array, extents[access.array]), extents[access.array])
    return bounds


def _is_integer(base_type: str) -> bool:
    return np.issubdtype(_dtype(base_type), np.integer)


def _bound(expr: sympy.Expr, ranges: dict, max_: bool) -> int:
    return int(sympy.floor(_extreme(expr, ranges, max_)) if max_ else sympy.ceiling(_extreme(expr, ranges, max_)))


def _extreme(expr: sympy.Expr, ranges: dict, max_: bool) -> sympy.Rational:
    """The largest (smallest) value of an affine expression over `ranges`; an integer division or remainder
    in it (`x[i % 7]`, `in[(i - 3) / 2]`) stands for a symbol of the range it takes."""
    if isinstance(expr, (sympy.Min, sympy.Max)):
        parts = [_extreme(a, ranges, max_) for a in expr.args]
        return min(parts) if isinstance(expr, sympy.Min) else max(parts)
    quasi = [n for n in sympy.preorder_traversal(expr) if isinstance(n, QUASI_FUNCTIONS)]
    if quasi:
        term = quasi[0]
        stand_in = sympy.Dummy("q", integer=True)
        return _extreme(expr.subs(term, stand_in), {**ranges, stand_in: _quasi_range(term, ranges)}, max_)
    expr = sympy.expand(expr)
    if expr.is_number:
        return expr
    total = expr.subs({s: 0 for s in expr.free_symbols})
    for sym in expr.free_symbols:
        c = expr.coeff(sym)
        if sym not in ranges or not c.is_number:
            raise CompileError(f"cannot bound '{expr}' for emulation (unknown '{sym}'; give it with --size)")
        lo, hi = ranges[sym]
        total += max(c * lo, c * hi) if max_ else min(c * lo, c * hi)
    return total


def _quasi_range(term: sympy.Expr, ranges: dict) -> tuple[int, int]:
    """(lowest, highest) value of `floor(e)`, `Mod(e, d)`, `c_div(e, d)` or `c_mod(e, d)` over `ranges`:
    the divisions are monotonic in e, the remainders lie within the divisor."""
    arg = term.args[0]
    lo, hi = _extreme(arg, ranges, False), _extreme(arg, ranges, True)
    if isinstance(term, sympy.floor):
        return int(sympy.floor(lo)), int(sympy.floor(hi))
    d = int(term.args[1])
    if isinstance(term, c_div):
        return int(c_div(sympy.Integer(int(lo)), d)), int(c_div(sympy.Integer(int(hi)), d))
    if isinstance(term, sympy.Mod):
        return (int(lo), int(hi)) if 0 <= lo and hi < d else (0, d - 1)
    return max(-(d - 1), min(int(lo), 0)), min(d - 1, max(int(hi), 0))


def make_arguments(kernel: Kernel, sizes: dict[str, int | float], extents: dict[str, int], rng,
                   index_bounds: dict[str, int] | None = None, poisoned: frozenset[str] = frozenset()) -> dict:
    """Random inputs: floats of either sign away from zero, small positive integers, and for the index
    arrays of gathers (`index_bounds`) valid indices of the gathered array. `poisoned`: floating arrays the
    caller fills with NaN: they are NaN already, and the generator is moved past the draws they would have
    taken, so that every other array holds what it would have held."""
    args = {}
    index_bounds = index_bounds or {}
    for p in kernel.params:
        if p.is_pointer:
            layout = kernel.struct_layouts.get(p.base_type)  # an array of structs: its fields, flat
            dtype = _dtype(layout.field_type if layout else p.base_type)
            n = extents[p.name] * _words(p.base_type) if not layout else -(-extents[p.name] // layout.stride) * layout.stride
            if p.name in index_bounds:
                args[p.name] = rng.integers(0, index_bounds[p.name], n).astype(dtype)
            elif np.issubdtype(dtype, np.floating) and p.name in poisoned and skip_signed_uniform(rng, n):
                args[p.name] = np.full(n, np.nan, dtype)
            elif np.issubdtype(dtype, np.floating):
                args[p.name] = _representable(_signed_uniform(rng, n, dtype), p.base_type)
            else:
                args[p.name] = rng.integers(1, 16, n).astype(dtype)
        elif p.name in sizes:
            args[p.name] = sizes[p.name]
        elif p.base_type in ("float", "double"):
            args[p.name] = float(rng.uniform(0.5, 1.5))
        else:
            raise CompileError(f"kernel '{kernel.name}': no value for parameter '{p.name}' (use --size {p.name}=N)")
    args.update(file_variable_contents(kernel, rng))
    return args


def _signed_uniform(rng, n: int, dtype) -> np.ndarray:
    """n floats of `dtype` from 0.5 to 1.5 in magnitude, each of random sign: the values and the draws of
    `uniform(0.5, 1.5, n).astype(dtype) * choice([-1, 1], n).astype(dtype)` (choice draws integers(0, 2, n)
    and takes -1 at 0, 1 at 1), with the signs taken in `dtype` at once and multiplied in place: fewer passes
    over arrays that may hold millions of elements (of which the emulated blocks may read a few)."""
    values = rng.uniform(0.5, 1.5, n).astype(dtype)
    np.multiply(values, np.array([-1, 1], dtype).take(rng.integers(0, 2, n)), out=values)
    return values


def skip_signed_uniform(rng, n: int) -> bool:
    """Move a PCG64 generator (default_rng's) past what _signed_uniform(rng, n, ...) draws, without drawing:
    n 64-bit outputs for the uniform values, then n 32-bit ones for the signs (integers(0, 2) takes the top
    bit of each, never rejecting), which come from the generator's held half (`has_uint32`) first, then
    from 64-bit outputs, low half first, the high half held. False (nothing done) for another generator."""
    bits = rng.bit_generator
    if not hasattr(bits, "advance") or bits.state.get("bit_generator") != "PCG64":
        return False
    if n == 0:
        return True
    before = bits.state
    halves = n - before["has_uint32"]          # 32-bit draws past the held one
    outputs = n + (halves + 1) // 2            # 64-bit outputs: the uniforms', the signs'
    last_high = before["uinteger"]             # what the generator holds last (held, or used and kept)
    if halves:
        bits.advance(outputs - 1)
        last_high = int(bits.random_raw()) >> 32   # the last output's high half: held if `halves` is odd
    else:
        bits.advance(outputs)
    state = bits.state                         # advance forgets the held half: put back what the draws leave
    state["has_uint32"], state["uinteger"] = halves % 2, last_high
    bits.state = state
    return True


def file_variable_contents(kernel: Kernel, rng) -> dict:
    """Random contents of the file-scope `__constant__`/`__device__` variables the kernel uses (the same
    for the naive and the optimized run). One the emulator cannot hold gets none: its run says so."""
    from gpgpu_opt.emulator.errors import UnsupportedConstruct
    from gpgpu_opt.emulator.file_scope import element_dtype, words

    out = {}
    for name, variable in sorted(kernel.file_variables.items()):
        try:
            dtype, n = element_dtype(variable), words(variable)
        except UnsupportedConstruct:
            continue
        if np.issubdtype(dtype, np.floating):
            out[name] = _signed_uniform(rng, n, dtype)
        else:
            out[name] = rng.integers(1, 16, n).astype(dtype)
    return out


def device_variables(kernel: Kernel) -> set[str]:
    """The file-scope `__device__` variables the kernel uses: global memory it may write, compared like
    its output arrays."""
    return {name for name, v in kernel.file_variables.items() if v.space == "device"}


def _largest_divisor(n: int, at_most: int) -> int:
    return next(d for d in range(min(n, at_most), 0, -1) if n % d == 0)


def written_arrays(kernel: Kernel) -> set[str]:
    """Every array the kernel stores into, through subscripts, dereferences or atomics, and through the
    library calls that store (`__stcs(&a[i], v)`, `sincosf(x, &s[i], &c[i])`)."""
    from gpgpu_opt.frontend.math_api import written_arguments
    stored = {name for node in walk(kernel.body) if call_name(node) is not None
              for k in written_arguments(call_name(node)) if k < len(call_args(node))
              for name in ids_in(call_args(node)[k])}
    return {a.array for a in all_accesses(kernel) if a.mode == "write"} | (stored & {p.name for p in kernel.arrays})


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
    gx, gy = case.global_space
    if case.block is not None and case.grid is not None:
        return case.block, case.grid
    if case.block is not None:
        return case.block, (math.ceil(gx / case.block[0]), math.ceil(gy / case.block[1]))
    block = (_largest_divisor(gx, naive_block[0]), _largest_divisor(gy, naive_block[1]))
    return block, (gx // block[0], gy // block[1])


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
    extents = array_extents(naive, case.sizes, block, case.global_space, grid if case.grid else None,
                            case.extents, unsized)
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
            stats = run_kernel(kernel, g, b, args, device_functions=device_functions, check_races=check_races,
                               blocks=sample)
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
        tolerance = TOLERANCE + (ATOMIC_TOLERANCE * math.sqrt(atomics) if name in atomic_arrays else 0.0)
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


def _case(kernel: Kernel, program, sizes: dict, global_space, block, grid, extents: dict[str, int]) -> Case:
    """A case with the naive launch the program makes at these sizes (options win over launch sites), and
    its global thread space: --global, else what that launch covers clipped by the kernel's guards (threads
    past `if (i < n)` do nothing), else the guards or globalDimX/Y alone."""
    from gpgpu_opt.launch import naive_launch

    launch = naive_launch(program, kernel, sizes)
    site_block = launch.block if launch is not None and None not in launch.block else None
    site_grid = launch.grid if launch is not None and None not in launch.grid else None
    if global_space is not None:
        site_grid = None    # --global says how many threads the naive launch starts: its grid covers them
    origins = [f"at {launch.describe()}"] if (site_block and not block) or (site_grid and not grid) else []
    origins += ["from --block/--grid"] if block or grid else []
    block, grid = _as_dim3(block) or site_block, _as_dim3(grid) or site_grid
    if global_space is None and block and grid:
        guards = global_space_from_guards(kernel, sizes)
        global_space = tuple(n * b if g is None else min(n * b, g) for n, b, g in zip(grid, block, guards))
    space = global_space or infer_global_space(kernel, program, sizes)
    return Case(sizes, space, block, grid, ", ".join(origins) or None, extents)


def _as_dim3(shape: tuple[int, ...] | None) -> tuple[int, int, int] | None:
    return None if shape is None else (tuple(shape) + (1, 1, 1))[:3]


def infer_global_space(kernel: Kernel, program, sizes: dict[str, int]) -> tuple[int, int]:
    gx, gy = global_space_from_guards(kernel, sizes)
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
    planes = math.prod(shape[2] if shape is not None and len(shape) > 2 else 1 for shape in (case.grid, case.block))
    return math.prod(case.global_space) * deepest * planes    # a 3-D launch runs the x-y space per z


