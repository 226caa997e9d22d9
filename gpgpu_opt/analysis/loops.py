"""Canonical `for` loops: iterator, start, bound, step; additive loops count up or down, multiplicative
ones (`i *= 2`) only up."""
from __future__ import annotations

from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import (BLOCK_SYMBOLS, THREAD_SYMBOLS, NotAffine, is_opaque, iterator_symbol,
                                         to_sympy)
from gpgpu_opt.ast_util import walk


@dataclass
class Loop:
    node: c_ast.For
    var: str
    start: sympy.Expr
    bound: sympy.Expr | None     # the value compared against, None when not analysable
    comparison: str              # '<', '<=', '>', '>=', '!='
    step: int                    # additive step (+c / -c), or the factor of a multiplicative loop
    multiplicative: bool = False

    @property
    def is_upward(self) -> bool:
        return not self.multiplicative and self.step > 0

    @property
    def is_downward(self) -> bool:
        """An additive loop that counts down (`k--`, `k -= 2`, `k = k - 1`)."""
        return not self.multiplicative and self.step < 0

    @property
    def end_exclusive(self) -> sympy.Expr | None:
        """First value past the iteration space for additive upward loops (i < E, i <= E)."""
        if self.bound is None or not self.is_upward:
            return None
        return self.bound + 1 if self.comparison == "<=" else self.bound if self.comparison in ("<", "!=") \
            else None

    def _end_past(self) -> sympy.Expr | None:
        """First value past the iteration space in the loop's direction (below it for a downward loop:
        `k >= E` stops at E - 1, `k > E` and `k != E` at E); None when the comparison does not bound
        the loop in its direction."""
        if not self.is_downward:
            return self.end_exclusive
        if self.bound is None:
            return None
        return self.bound - 1 if self.comparison == ">=" else self.bound if self.comparison in (">", "!=") \
            else None

    def trip_count(self) -> sympy.Expr | None:
        """Iterations of an additive loop, up or down (zero or less: the loop does not run)."""
        end = self._end_past()
        if end is None:
            return None
        return sympy.ceiling((end - self.start) / self.step)

    def value_range(self) -> tuple[sympy.Expr, sympy.Expr] | None:
        """(first, last) values the iterator takes, inclusive, in iteration order (first > last for a
        downward loop), assuming the loop runs at least once; None when not analysable."""
        trips = self.trip_count()
        if trips is None:
            return None
        return self.start, self.start + (trips - 1) * self.step


def moves_with_thread(loops: list[Loop]) -> list[bool]:
    """For each loop (outermost first): does its iterator's start differ between threads or blocks
    (`for (i = tid; ...)`), directly or through an outer loop whose start does, or is it unknown (a
    loaded value: taken as differing)? Such an iterator is not a value all threads share."""
    moving = set(THREAD_SYMBOLS | BLOCK_SYMBOLS)
    flags = []
    for loop in loops:
        start = sympy.sympify(loop.start).free_symbols
        moves = bool(start & moving) or any(is_opaque(s) for s in start)
        if moves:
            moving.add(iterator_symbol(loop.var))
        flags.append(moves)
    return flags


def in_trip_index(expr: sympy.Expr, loops: list[Loop]) -> sympy.Expr | None:
    """`expr` with the iterator i of every additive loop whose start moves with the thread written as
    `start + step*k`, k the trip index (uniform over the threads), under i's own symbol: `d[i]` of
    `for (i = tid; i < n; i += 1024)` is `tid + 1024*i`, so the analyses see that threads read different
    elements. Those loops' symbols then take the values 0, 1, 2, ... None where the iterator is not
    expressible so (a multiplicative loop, an unknown start): the access must count as unresolved."""
    for loop, moves in reversed(list(zip(loops, moves_with_thread(loops)))):
        sym = iterator_symbol(loop.var)
        if not moves or sym not in expr.free_symbols:
            continue
        if loop.multiplicative or any(is_opaque(s) for s in sympy.sympify(loop.start).free_symbols):
            return None
        expr = expr.subs(sym, loop.start + loop.step * sym)
    return sympy.expand(expr)


def iterator_values(loop: Loop, moves: bool, start, count: int) -> list[int]:
    """The first `count` values an evaluation gives a loop's symbol: its trip indices for a loop that moves
    with the thread (see in_trip_index), else its values from `start` (an int)."""
    if moves:
        return list(range(count))
    return [start * loop.step ** k if loop.multiplicative else start + k * loop.step for k in range(count)]


def assigned_names(node: c_ast.Node) -> set[str]:
    """Variables a statement assigns, increments, or takes the address of."""
    names = set()
    for n in walk(node):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
            names.add(n.lvalue.name)
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") \
                and isinstance(n.expr, c_ast.ID):
            names.add(n.expr.name)   # `&x`: a call may store through it (`frexpf(v, &x)`)
    return names


def canonical_loop(node: c_ast.For, env: dict) -> Loop | None:
    """Recognise `for (i = s; i OP E; i STEP)`; None when the loop is not in canonical form."""
    var, start_node = None, None
    init = node.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1:
        var, start_node = init.decls[0].name, init.decls[0].init
    elif isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
        var, start_node = init.lvalue.name, init.rvalue
    if var is None or start_node is None or not isinstance(node.cond, c_ast.BinaryOp):
        return None
    clauses = _conjuncts(node.cond)
    bounds = [_comparison(c, var) for c in clauses]
    if not bounds or any(b is None for b in bounds) or len({b[0] for b in bounds}) != 1:
        return None
    comparison = bounds[0][0]
    if len(bounds) > 1 and comparison not in ("<", "<=", ">", ">="):
        return None
    step, multiplicative = _step(node.next, var)
    if step is None or var in assigned_names(node.stmt):
        return None
    try:
        start = to_sympy(start_node, env)
    except NotAffine:
        return None
    try:
        values = [to_sympy(b[1], env) for b in bounds]
        # `i < a && i < b` stops at the smaller bound, `i >= a && i >= b` at the larger.
        tightest = sympy.Min if comparison in ("<", "<=") else sympy.Max
        bound = values[0] if len(values) == 1 else tightest(*values)
    except NotAffine:
        bound = None
    return Loop(node, var, start, bound, comparison, step, multiplicative)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "!=": "!="}


def _conjuncts(cond):
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
        return _conjuncts(cond.left) + _conjuncts(cond.right)
    return [cond]


def _comparison(cond, var: str):
    """('<', bound) for `var < bound` (or `bound > var`), else None."""
    if not isinstance(cond, c_ast.BinaryOp) or cond.op not in _FLIP:
        return None
    if isinstance(cond.left, c_ast.ID) and cond.left.name == var:
        return cond.op, cond.right
    if isinstance(cond.right, c_ast.ID) and cond.right.name == var:
        return _FLIP[cond.op], cond.left
    return None


def constant_int(n: c_ast.Node) -> int | None:
    """An integer constant expression's value, folded as C does for `int` operands that do not overflow
    (`(1 << 10)`, `4 * 256`, `-(2 * 3)`: macros expand to these); None for anything else."""
    if isinstance(n, c_ast.Constant) and n.type == "int":
        try:
            return int(n.value.rstrip("uUlL"), 0)
        except ValueError:
            return None
    if isinstance(n, c_ast.UnaryOp) and n.op in ("-", "+"):
        value = constant_int(n.expr)
        return None if value is None else (-value if n.op == "-" else value)
    if isinstance(n, c_ast.BinaryOp) and n.op in ("+", "-", "*", "<<"):
        a, b = constant_int(n.left), constant_int(n.right)
        if a is None or b is None or (n.op == "<<" and not (a >= 0 and 0 <= b < 31)):
            return None
        value = {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if n.op == "<<" else 0}[n.op]
        return value if -2 ** 31 <= value < 2 ** 31 else None   # past int's range C's value is not this one
    return None


def _step(nxt: c_ast.Node, var: str) -> tuple[int | None, bool]:
    const = constant_int

    if isinstance(nxt, c_ast.UnaryOp) and isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == var:
        return {"++": 1, "p++": 1, "--": -1, "p--": -1}.get(nxt.op), False
    if not (isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) and nxt.lvalue.name == var):
        return None, False
    if nxt.op in ("+=", "-="):
        c = const(nxt.rvalue)
        return (None, False) if c is None else (c if nxt.op == "+=" else -c, False)
    if nxt.op in ("*=", "<<="):
        c = const(nxt.rvalue)
        return (None, False) if c is None or c <= 0 else ((c if nxt.op == "*=" else 2 ** c), True)
    if nxt.op == "=" and isinstance(nxt.rvalue, c_ast.BinaryOp):
        r = nxt.rvalue
        if isinstance(r.left, c_ast.ID) and r.left.name == var:
            c = const(r.right)
            if c is not None and r.op in ("+", "-"):
                return (c if r.op == "+" else -c), False
            if c is not None and r.op == "*" and c > 0:
                return c, True
        if isinstance(r.right, c_ast.ID) and r.right.name == var and r.op in ("+", "*"):
            c = const(r.left)
            if c is not None:
                return (c, r.op == "*")
    return None, False
