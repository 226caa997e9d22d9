"""C expressions as sympy expressions over thread/block ids, loop iterators and kernel parameters."""
from __future__ import annotations

import functools
from typing import Mapping

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


def to_sympy(node: c_ast.Node, env: dict[str, sympy.Expr], types: Mapping[str, str] | None = None) -> sympy.Expr:
    """Translate an integer C expression. `env` maps variable names to their values (parameters map to
    their own symbols, loop iterators to iterator symbols, straight-line locals to their definitions);
    `types` maps variable names to their C types where known (an unknown one is taken as `int`).
    Division, remainder and shifts follow C (see c_integer); raises NotAffine for what cannot be
    expressed (the caller decides what that means)."""
    return CTranslator(env, types).value(node).expr


def is_affine(expr: sympy.Expr, variables) -> bool:
    """Affine in `variables` (coefficients may be other symbols, e.g. `row*n` is affine in row)."""
    return _is_affine(expr, tuple(variables))


@functools.lru_cache(maxsize=4096)
def _is_affine(expr: sympy.Expr, variables: tuple) -> bool:
    """`is_affine`, once per (expression, variables in their order): expanding and building a polynomial is
    most of classifying an access, and every access is collected again by each pass and each candidate."""
    if any(is_opaque(s) for s in expr.free_symbols):
        return False
    if expr.has(*QUASI_FUNCTIONS):
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
        if isinstance(node, QUASI_FUNCTIONS):
            inner = node.args[0]
            divisor_ok = isinstance(node, sympy.floor) or node.args[1].is_Integer
            if not divisor_ok or not is_quasi_affine(inner, variables):
                return False
            replaced = replaced.subs(node, sympy.Symbol("_q", integer=True))
    return is_affine(replaced, variables)


def quasi_terms(expr: sympy.Expr, moving) -> list[sympy.Expr]:
    """The integer divisions and remainders in `expr` whose argument involves one of `moving` (thread and
    block ids, loop iterators): they move with those symbols, but not by a constant step, so no
    coefficient describes them (`floor(tid.x / 2).coeff(tid.x)` is 0)."""
    moving = set(moving)
    return [n for n in sympy.preorder_traversal(expr)
            if isinstance(n, QUASI_FUNCTIONS) and (n.free_symbols & moving or any(is_opaque(s) for s in n.free_symbols))]


def lambdified(args, expr: sympy.Expr, module: str):
    """`sympy.lambdify(args, expr, module)`, made once per (arguments, expression, module): building the
    function prints and compiles Python source (milliseconds), and the analyses ask for the same subscripts
    again and again (each pass, each candidate, each kernel compiled again)."""
    return _lambdified(tuple(args), expr, module)


@functools.lru_cache(maxsize=4096)
def _lambdified(args: tuple, expr: sympy.Expr, module: str):
    return sympy.lambdify(list(args), expr, module)


def coefficient(expr: sympy.Expr, var: sympy.Symbol) -> sympy.Expr:
    """The coefficient of `var` in an expression affine in it. A term that moves with `var` through an
    integer division or remainder has none: NotAffine then (a 0 would say the term does not move)."""
    if quasi_terms(expr, {var}):
        raise NotAffine(f"{var} under an integer division or remainder")
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
            # Mod is floor's remainder; C's % agrees for a non-negative dividend. Mod by 2^k of one of
            # unknown sign came from a mask, and is one.
            value, divisor = e.args
            if not value.is_nonnegative and divisor.is_Integer and int(divisor) & (int(divisor) - 1) == 0:
                return f"({self._print(value)}) & {int(divisor) - 1}"
            return f"({self._print(value)}) % {self._print(divisor)}"

    return _Printer().doprint(expr)


# After the definitions above, which c_integer uses.
from gpgpu_opt.analysis.c_integer import QUASI_FUNCTIONS, CTranslator, c_div, c_mod  # noqa: E402
