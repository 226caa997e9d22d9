"""How large each array of an emulated check must be: the naive thread space a kernel's guards cover, each
subscript's largest value over that space and the loops' ranges, the arrays a kernel writes."""
from __future__ import annotations

import numpy as np
import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import AccessCollector, collect_accesses
from gpgpu_opt.analysis.induction import in_closed_form
from gpgpu_opt.analysis.symbolic import (BDIM, BID, GDIM, QUASI_FUNCTIONS, TID, NotAffine, c_div, iterator_symbol,
                                         to_sympy)
from gpgpu_opt.ast_util import call_args, call_name, ids_in, walk
from gpgpu_opt.check.index_arrays import gathered_through, local_ranges, row_pointer_loops, straight_line_env
from gpgpu_opt.check.inputs import _dtype
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.host_expr import evaluate_int
from gpgpu_opt.kernel import Kernel


def global_space_from_guards(kernel: Kernel, sizes: dict[str, int | float]) -> tuple[int | None, int | None]:
    """`if (x < n ...)` with x the global thread index in x: the naive launch covers n threads in x."""
    found = guard_extents(kernel, sizes)
    return found.get("x"), found.get("y")


def planes_from_guards(kernel: Kernel, sizes: dict[str, int | float]) -> int | None:
    """`if (... z < n)` with z `blockIdx.z * blockDim.z + threadIdx.z`: the naive launch covers n planes."""
    return guard_extents(kernel, sizes).get("z")


def guard_extents(kernel: Kernel, sizes: dict[str, int | float]) -> dict[str, int]:
    """Per axis (x, y, z), the threads a guard on the global index bounds the kernel's work to."""
    env = {p.name: sympy.Integer(sizes[p.name]) for p in kernel.scalars if isinstance(sizes.get(p.name), int)}
    gx = BID["x"] * BDIM["x"] + TID["x"]
    gy = BID["y"] * BDIM["y"] + TID["y"]
    gz = BID["z"] * BDIM["z"] + TID["z"]
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
            for axis, g in (("x", gx), ("y", gy), ("z", gz)):
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
        last = items[-1] if items else None
        if isinstance(last, c_ast.For) and isinstance(last.stmt, c_ast.Compound) and not found:
            visit(last.stmt.block_items or [])  # a loop over batches around all the work: its guards are the kernel's
    visit(kernel.body.block_items or [])
    return found


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
                  unsized: set[str] | None = None, row_pointers: dict[str, int] | None = None) -> dict[str, int]:
    """Elements each array needs: the largest subscript over the naive thread space and loop ranges + 1.
    Subscripts are bounded in terms of the global thread coordinates where they only use those, so the
    arrays are no larger than what the naive kernel can touch (an optimized kernel reading past that is
    caught as out of bounds). `grid` is the naive launch's grid when known (else the block is narrowed to
    divide the space); `given` (--extent) sizes arrays outright, gathered ones (`src[perm[i]]`) included.
    `unsized`: where given, an array the kernel only reads whose subscript cannot be bounded here
    (`img[up[row] + rows * col]`, `up[(e + 1) % rows]`) is added to it rather than refused, for run_case to
    size by what the naive kernel reads (naive_reach). Clamped locals (`min(max(v, 0), w - 1)`) are bounded by
    their clamps; `row_pointers` (the run harness, which fills them) gives the last value of each row-pointer
    array (check/index_arrays.py): its loops' iterators then run below it, and gathers through a local
    (`int c = col[p]; x[c]`) are sized like gathers."""
    given, row_pointers = given or {}, row_pointers or {}
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

    def extreme(expr, over, max_):
        return _extreme(in_global_terms(expr), over, max_)

    ranges.update(local_ranges(kernel, extreme, ranges))
    closed = in_closed_form(kernel)
    env, through = straight_line_env(closed), gathered_through(closed)
    delimited = {}   # the accesses of row-pointer loops (their headers too): node id -> the loop
    for found in row_pointer_loops(closed):
        if found.array in row_pointers:
            ranges[iterator_symbol(found.var)] = (0, row_pointers[found.array] - 1)
            delimited.update({id(n): found for n in walk(found.loop) if isinstance(n, c_ast.ArrayRef)})
    extents: dict[str, int] = {}
    for access in all_accesses(closed):   # `c += xy;` per plane: `c + k * xy`, the same accesses
        if access.array in given:
            continue
        if access.array in through and isinstance(access.node.subscript, c_ast.ID):
            extents[access.array] = max(extents.get(access.array, 1), global_space[0] * global_space[1])
            continue
        if access.evaluable_index is None and id(access.node) in delimited:
            try:
                index = to_sympy(access.node.subscript, env)
                extents[access.array] = max(extents.get(access.array, 1),
                                            _bound(in_global_terms(index), ranges, max_=True) + 1)
                continue
            except (NotAffine, CompileError):
                pass
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
        except CompileError as err:
            if access.array not in read_only:
                said = err.message if err.message.startswith("cannot size") else \
                    f"cannot size array '{access.array}' for emulation: its subscript '{access.index_text}': {err.message}"
                hint = "" if "--extent" in said else f" (give its size with --extent {access.array}=N)"
                raise CompileError(said + hint, access.location) from None
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
    """Index arrays of gathers (`x[col[p]]`, or through a local: `int c = col[p]; x[c]`) and the (exclusive)
    bound their values must stay under."""
    bounds: dict[str, int] = {}
    through = gathered_through(kernel)
    for access in all_accesses(kernel):
        index_array = access.index is None and gather_index_array(kernel, access)
        if not index_array and access.array in through and isinstance(access.node.subscript, c_ast.ID):
            index_array = through[access.array]
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
        if sym not in ranges or not c.is_number and str(sym).startswith("?"):
            raise CompileError(f"cannot bound '{expr}': the local '{str(sym)[1:]}' has no bound the analysis sees")
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


def device_variables(kernel: Kernel) -> set[str]:
    """The file-scope `__device__` variables the kernel uses: global memory it may write, compared like
    its output arrays."""
    return {name for name, v in kernel.file_variables.items() if v.space == "device"}


def _largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of n up to at_most (every number divides an empty space, n = 0)."""
    if n < 1:
        return max(1, at_most)
    return next(d for d in range(min(n, at_most), 0, -1) if n % d == 0)


def written_arrays(kernel: Kernel) -> set[str]:
    """Every array the kernel stores into, through subscripts, dereferences or atomics, and through the
    library calls that store (`__stcs(&a[i], v)`, `sincosf(x, &s[i], &c[i])`)."""
    from gpgpu_opt.frontend.math_api import written_arguments
    stored = {name for node in walk(kernel.body) if call_name(node) is not None
              for k in written_arguments(call_name(node)) if k < len(call_args(node))
              for name in ids_in(call_args(node)[k])}
    return {a.array for a in all_accesses(kernel) if a.mode == "write"} | (stored & {p.name for p in kernel.arrays})


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
