"""Edge clamps: subscripts that are affine piece by piece, as stencils write their borders.

    int w = (i == 0) ? i : i - 1;        min(i + 1, n - 1)        max(i - 1, 0)        i < n - 1 ? i + 1 : i

Each piece is affine; which one a thread takes depends on where it is. Inside the edges every thread
takes the same piece, the *interior* one (`i - 1`, `i + 1`): that is the access the analyses report
(coalescing, reuse, sharing), with the kind `clamped`. The passes leave such an access as written: a
tile staged for the interior would hold other addresses at the edges, and nothing here proves which.

The interior piece is chosen by the clamp's shape, a whitelist:
- `min(a, b)`, `max(a, b)` (and `umin`/`umax`): the one argument that moves with the thread or loop;
- `c ? a : b` with one branch that moves and one that does not: the moving one (`x < 0 ? 0 : x`);
- `c ? a : b` with both moving by the same step (they differ by a uniform amount) and `c` a comparison
  of a moving value `m` with a uniform one `u`: `m == u` is an edge (interior: b), `m != u` the interior
  (a); `m < u`, `m <= u` hold in the interior when `u` is a size (`i < n - 1`) and at the low edge when it
  is a constant (`i < 1`); `>`, `>=` the other way round.
Anything else is not a clamp (the subscript stays unresolved)."""
from __future__ import annotations

from typing import Iterable, Mapping

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import NotAffine  # first: symbolic and c_integer import each other
from gpgpu_opt.analysis.c_integer import CTranslator, CValue  # noqa: I001
from gpgpu_opt.ast_util import call_name

_MIN_MAX = {"min", "max", "umin", "umax"}
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class ClampTranslator(CTranslator):
    """A C integer translation that takes each edge clamp's interior piece and remembers the clamps."""

    def __init__(self, env: Mapping[str, sympy.Expr], types: Mapping[str, str] | None, moving: Iterable):
        super().__init__(env, types)
        self.moving = frozenset(moving)
        #: (the clamp's node, its interior piece), in the order met.
        self.clamps: list[tuple[c_ast.Node, sympy.Expr]] = []

    def value(self, node: c_ast.Node) -> CValue:
        if isinstance(node, c_ast.TernaryOp):
            return self._record(node, self._ternary(node))
        if call_name(node) in _MIN_MAX:
            return self._record(node, self._min_max(node))
        return super().value(node)

    def _record(self, node, value: CValue) -> CValue:
        self.clamps.append((node, value.expr))
        return value

    def moves(self, expr: sympy.Expr) -> bool:
        return bool(expr.free_symbols & self.moving)

    def _min_max(self, node: c_ast.FuncCall) -> CValue:
        args = node.args.exprs if node.args is not None else []
        if len(args) != 2:
            raise NotAffine(f"{node.name.name} with {len(args)} arguments")
        a, b = self.value(args[0]), self.value(args[1])
        return self._the_moving_one(a, b, f"{node.name.name}()")

    def _the_moving_one(self, a: CValue, b: CValue, what: str) -> CValue:
        if self.moves(a.expr) == self.moves(b.expr):
            raise NotAffine(f"{what} whose interior piece is unclear")
        return a if self.moves(a.expr) else b

    def _ternary(self, node: c_ast.TernaryOp) -> CValue:
        a, b = self.value(node.iftrue), self.value(node.iffalse)
        if self.moves(a.expr) != self.moves(b.expr):
            return self._the_moving_one(a, b, "a conditional expression")
        if not self.moves(a.expr) or self.moves(sympy.expand(a.expr - b.expr)):
            raise NotAffine("conditional expression")
        return a if self._holds_inside(node.cond) else b

    def _holds_inside(self, cond) -> bool:
        """Whether the comparison `cond` holds for the threads away from the edges (see module doc)."""
        if not (isinstance(cond, c_ast.BinaryOp) and cond.op in _FLIPPED):
            raise NotAffine("conditional expression on a condition that is not a comparison")
        left, right = CTranslator(self.env, self.types).value(cond.left).expr, \
            CTranslator(self.env, self.types).value(cond.right).expr
        op = cond.op
        if self.moves(right) and not self.moves(left):
            left, right, op = right, left, _FLIPPED[op]
        if not self.moves(left) or self.moves(right):
            raise NotAffine("conditional expression on a condition that does not compare a moving index "
                            "with a uniform bound")
        if op in ("==", "!="):
            return op == "!="
        upper_edge = not right.is_Integer   # a size (`n - 1`), not a constant (`0`)
        return (op in ("<", "<=")) == upper_edge


def interior(node: c_ast.Node, env: Mapping[str, sympy.Expr], types: Mapping[str, str] | None,
             moving: Iterable) -> tuple[sympy.Expr, list[tuple[c_ast.Node, sympy.Expr]]]:
    """The interior form of an expression with edge clamps, and the clamps taken (empty: there are none).
    Raises NotAffine where the expression is not piecewise affine in the shapes the module doc lists."""
    translator = ClampTranslator(env, types, moving)
    return translator.value(node).expr, translator.clamps
