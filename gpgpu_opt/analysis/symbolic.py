"""C expressions as sympy expressions over thread/block ids, loop iterators and kernel parameters."""
from __future__ import annotations

import sympy
from pycparser import c_ast

#: The CUDA builtins as symbols. blockDim/gridDim are positive; thread/block ids non-negative.
TID = {a: sympy.Symbol(f"tid.{a}", integer=True, nonnegative=True) for a in "xyz"}
BID = {a: sympy.Symbol(f"bid.{a}", integer=True, nonnegative=True) for a in "xyz"}
BDIM = {a: sympy.Symbol(f"bdim.{a}", integer=True, positive=True) for a in "xyz"}
GDIM = {a: sympy.Symbol(f"gdim.{a}", integer=True, positive=True) for a in "xyz"}
_BUILTIN = {"threadIdx": TID, "blockIdx": BID, "blockDim": BDIM, "gridDim": GDIM}
THREAD_SYMBOLS = frozenset(TID.values())
BLOCK_SYMBOLS = frozenset(BID.values())
_CUDA_SPELLING = {s: f"{base}.{axis}" for base, table in _BUILTIN.items() for axis, s in table.items()}


class NotAffine(Exception):
    """The expression is outside what the analyses model (loaded values, calls, floats, ...)."""


def param_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True)


def iterator_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True)


def opaque(name: str) -> sympy.Symbol:
    """A value the analysis cannot see through (a loaded value, an accumulator, a call result)."""
    return sympy.Symbol(f"?{name}", integer=True)


def is_opaque(sym: sympy.Basic) -> bool:
    return isinstance(sym, sympy.Symbol) and sym.name.startswith("?")


def to_sympy(node: c_ast.Node, env: dict[str, sympy.Expr]) -> sympy.Expr:
    """Translate an integer C expression. `env` maps variable names to their values (parameters map to
    their own symbols, loop iterators to iterator symbols, straight-line locals to their definitions).
    Raises NotAffine for what cannot be expressed (the caller decides what that means)."""
    if isinstance(node, c_ast.Constant):
        if node.type in ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                         "unsigned long long int", "char"):
            text = node.value.rstrip("uUlL")
            if node.type == "char":
                raise NotAffine("character constant")
            return sympy.Integer(int(text, 0) if not (text.startswith("0") and text[1:2].isdigit())
                                 else int(text, 8))
        raise NotAffine(f"{node.type} constant")
    if isinstance(node, c_ast.ID):
        if node.name in env:
            return env[node.name]
        raise NotAffine(f"unknown value '{node.name}'")
    if isinstance(node, c_ast.StructRef) and isinstance(node.name, c_ast.ID) and node.name.name in _BUILTIN:
        table = _BUILTIN[node.name.name]
        if node.field.name in table:
            return table[node.field.name]
    if isinstance(node, c_ast.UnaryOp):
        if node.op == "-":
            return -to_sympy(node.expr, env)
        if node.op == "+":
            return to_sympy(node.expr, env)
        raise NotAffine(f"operator {node.op}")
    if isinstance(node, c_ast.Cast):
        return to_sympy(node.expr, env)
    if isinstance(node, c_ast.BinaryOp):
        a, b = to_sympy(node.left, env), to_sympy(node.right, env)
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if node.op == "<<" and b.is_Integer:
            return a * 2 ** int(b)
        if node.op in ("/", ">>", "%"):
            divisor = b if node.op != ">>" else (2 ** int(b) if b.is_Integer else None)
            if divisor is not None and divisor.is_Integer and int(divisor) > 0:
                # C truncates; for the non-negative values of index arithmetic that is floor.
                return sympy.floor(a / divisor) if node.op != "%" else sympy.Mod(a, divisor)
            raise NotAffine(f"operator {node.op} by a non-constant")
        raise NotAffine(f"operator {node.op}")
    if isinstance(node, c_ast.TernaryOp):
        raise NotAffine("conditional expression")
    raise NotAffine(type(node).__name__)


def is_affine(expr: sympy.Expr, variables) -> bool:
    """Affine in `variables` (coefficients may be other symbols, e.g. `row*n` is affine in row)."""
    if any(is_opaque(s) for s in expr.free_symbols):
        return False
    if expr.has(sympy.floor, sympy.Mod):
        return False
    poly_vars = [v for v in variables if v in expr.free_symbols]
    if not poly_vars:
        return True
    try:
        poly = sympy.Poly(sympy.expand(expr), *poly_vars)
    except sympy.PolynomialError:
        return False
    return poly.total_degree() <= 1


def is_quasi_affine(expr: sympy.Expr, variables) -> bool:
    """Affine up to integer division and remainder by constants (`tid.x / 32`, `tid.x % 32`)."""
    if any(is_opaque(s) for s in expr.free_symbols):
        return False
    replaced = expr
    for node in list(sympy.preorder_traversal(expr)):
        if isinstance(node, (sympy.floor, sympy.Mod)):
            inner = node.args[0] if isinstance(node, sympy.floor) else node.args[0]
            divisor_ok = isinstance(node, sympy.floor) or node.args[1].is_Integer
            if not divisor_ok or not is_quasi_affine(inner, variables):
                return False
            replaced = replaced.subs(node, sympy.Symbol("_q", integer=True))
    return is_affine(replaced, variables)


def coefficient(expr: sympy.Expr, var: sympy.Symbol) -> sympy.Expr:
    return sympy.expand(expr).coeff(var)


def cuda_text(expr: sympy.Expr) -> str:
    """C text of a sympy index expression, with CUDA builtin names."""
    from sympy.printing.c import C99CodePrinter

    class _Printer(C99CodePrinter):
        def _print_Symbol(self, sym):
            return _CUDA_SPELLING.get(sym, sym.name)

        def _print_floor(self, e):
            num, den = e.args[0].as_numer_denom()
            return f"({self._print(num)}) / {self._print(den)}"

        def _print_Mod(self, e):
            return f"({self._print(e.args[0])}) % {self._print(e.args[1])}"

    return _Printer().doprint(expr)
