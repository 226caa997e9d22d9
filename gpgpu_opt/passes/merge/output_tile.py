"""What the merges that give a thread a tile of outputs share (register_tile, conv_tile): the output's
global position as a symbol per axis, the guard's clauses by the axis they bound, and one output's own
statements before and after its accumulation loop."""
from __future__ import annotations

import copy

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, NotAffine, to_sympy
from gpgpu_opt.ast_util import ids_in, transform, walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import known
from gpgpu_opt.rewriting.per_output import sets_start, without_unused_locals
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_expr, text
from gpgpu_opt.rewriting.witness import sym_to_ast

#: The output's global column and row.
GX = sympy.Symbol("G.x", integer=True, nonnegative=True)
GY = sympy.Symbol("G.y", integer=True, nonnegative=True)
AXIS_SYMBOL = {"x": GX, "y": GY}
_TO_GLOBAL = {TID["x"]: GX - BID["x"] * BDIM["x"], TID["y"]: GY - BID["y"] * BDIM["y"]}


def check_start(loop: c_ast.For, acc: c_ast.Decl, info: KernelInfo) -> None:
    """The statements before the loop run once per output twice over (start value, then the use of the
    sum): the accumulator is declared beside the loop and, before it, only set."""
    holder = info.parents[id(loop)]
    items = g.items(holder)
    if not any(s is acc for s in items):
        raise Unsupported(f"the accumulator '{acc.name}' is not declared in the loop's block")
    for stmt in items[:next(i for i, s in enumerate(items) if s is loop)]:
        if stmt is not acc and not sets_start(stmt, acc) and acc.name in ids_in(stmt):
            raise Unsupported(f"'{text(stmt)}' uses the accumulator before the loop")
        if sets_start(stmt, acc) and stmt is not acc and not g.is_pure(stmt.rvalue, True, info.pure_calls):
            raise Unsupported(f"'{text(stmt)}' has side effects")


def uses_both_axes(info: KernelInfo) -> bool:
    axes = {n.field.name for n in walk(info.body) if isinstance(n, c_ast.StructRef)
            and isinstance(n.name, c_ast.ID) and n.name.name in ("threadIdx", "blockIdx")}
    return {"x", "y"} <= axes


def global_position(expr: sympy.Expr) -> sympy.Expr:
    return sympy.expand(expr.subs(_TO_GLOBAL))


def guard_clauses(path: list[c_ast.Node], env: dict) -> dict[str, list]:
    """The clauses of the ifs around the loop, by the axis they bound: each must bound one axis
    monotonically (`row < n`), or neither."""
    out: dict[str, list] = {"x": [], "y": [], "": []}
    for node in path:
        if not isinstance(node, c_ast.If):
            continue
        for clause in g.clauses(node.cond):
            if not (isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=", ">", ">=")):
                raise Unsupported(f"the guard '{text(clause)}' is not a comparison")
            try:
                lhs, rhs = global_position(to_sympy(clause.left, env)), global_position(to_sympy(clause.right, env))
            except NotAffine:
                raise Unsupported(f"the guard '{text(clause)}' cannot be analysed") from None
            diff = lhs - rhs
            on = [axis for axis, sym in AXIS_SYMBOL.items() if diff.has(sym)]
            if any(s.name.startswith("?") for s in diff.free_symbols) or \
                    diff.free_symbols & (set(BID.values()) | set(BDIM.values()) | set(TID.values())):
                raise Unsupported(f"the guard '{text(clause)}' is not a function of the output's position")
            if len(on) == 2:
                raise Unsupported(f"the guard '{text(clause)}' ties the row to the column")
            axis = on[0] if on else ""
            if axis:
                slope = sympy.diff(diff, AXIS_SYMBOL[axis])
                if not slope.is_number or (slope > 0) != (clause.op in ("<", "<=")):
                    raise Unsupported(f"the guard '{text(clause)}' is not an upper bound of the output's "
                                      f"{'column' if axis == 'x' else 'row'}")
            out[axis].append((lhs, clause.op, rhs))
    return out


def output_counts(clauses: dict, ctx: PassContext) -> tuple[int | None, int | None]:
    """Outputs in x and y where a guard `pos < N` with N known bounds them."""
    counts = []
    for axis in ("x", "y"):
        count = None
        for lhs, op, rhs in clauses[axis]:
            bound = known(rhs - lhs + AXIS_SYMBOL[axis], ctx) if op in ("<", "<=") else None
            if bound is not None and bound.is_Integer:
                count = int(bound) + (1 if op == "<=" else 0)
        counts.append(count)
    return counts[0], counts[1]


def per_output_code(kernel: Kernel, info: KernelInfo, loop: c_ast.For, acc: c_ast.Decl, position: dict,
                    acc_ref: str) -> tuple[list[c_ast.Node], list[c_ast.Node]]:
    """The kernel's statements for one output: before the loop (its start value) and after it (its use
    of the sum), each under the kernel's guards, with the output's position recomputed."""
    tops = {}
    for n in walk(info.body):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in ("threadIdx", "blockIdx", "blockDim"):
            top = info.index_expression(n)
            tops[id(top)] = top
    env = info.flat_env()
    holder = info.parents[id(loop)]
    loop_at = next(i for i, s in enumerate(holder.block_items) if s is loop)

    def version(keep_start: bool) -> list[c_ast.Node]:
        memo: dict = {}
        body = copy.deepcopy(info.body, memo)
        twin = memo[id(holder)]
        items = twin.block_items
        if keep_start:
            twin.block_items = items[:loop_at]
        else:
            twin.block_items = [s for s, original in zip(items[:loop_at], holder.block_items)
                                if not sets_start(original, acc)] + items[loop_at + 1:]
        swaps = {}
        for key, top in tops.items():
            if key in memo:
                value = global_position(to_sympy(top, env))
                axis = "x" if value.has(GX) else "y"
                swaps[id(memo[key])] = sym_to_ast(value, {AXIS_SYMBOL[axis]: position[axis]})

        def swap(n: c_ast.Node):
            if id(n) in swaps:
                return swaps[id(n)]
            if isinstance(n, c_ast.Decl) and n.name == acc.name:
                return c_ast.Assignment("=", parse_expr(acc_ref), n.init)
            if isinstance(n, c_ast.ID) and n.name == acc.name:
                return parse_expr(acc_ref)
            return None

        body = transform(body, swap, skip_member_names=True)
        return without_unused_locals(g.items(body))

    start = version(True)
    updates = [s for s in holder.block_items[:loop_at] if sets_start(s, acc) and s is not acc]
    if isinstance(acc.init, c_ast.Constant) and not updates:
        start = [c_ast.Assignment("=", parse_expr(acc_ref), copy.deepcopy(acc.init))]
    else:  # outputs out of range still accumulate (unused): give them a defined start
        start = [c_ast.Assignment("=", parse_expr(acc_ref), c_ast.Constant("int", "0")), *start]
    return start, version(False)
