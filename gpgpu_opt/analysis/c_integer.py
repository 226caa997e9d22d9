"""C integer semantics for the index translation of symbolic.py: division, remainder, shifts and masks.

sympy's `floor(a / d)` and `Mod(a, d)` round toward minus infinity; C's `/` truncates toward zero and `%`
takes the sign of the dividend, so the two agree only where the dividend is non-negative. And an unsigned
value the model writes as `i - 3` is, in C, that value modulo 2^32 (2^64 for the 64-bit types). So:

- `a / d`, `a % d` (d a positive constant) become `floor(a / d)`, `Mod(a, d)` when a is provably
  non-negative (thread and block ids are, so are unsigned variables standing for their own value), else
  `c_div(a, d)`, `c_mod(a, d)`: C's truncating operations, which move with a as floor/Mod do but are
  never simplified as if they were them;
- `a >> k` is `floor(a / 2^k)` for a provably non-negative a only (an arithmetic shift of a negative value
  is not C's division); `a & (2^k - 1)` is `Mod(a, 2^k)` for any int or unsigned value (two's complement and
  wrap-around modulo 2^32 both keep the low k bits); every other `&`, `|`, `^` is not affine;
- unsigned `+`, `-`, `*` are modelled as the plain sum, difference and product: wrap-around is modulo
  2^32 on both sides, so the model and C agree on every value that is later converted to `int` or used in
  range. Where the wrap would show (an unsigned value not known to be non-negative divided, reduced,
  shifted right or widened to a 64-bit signed type) the expression is not affine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import sympy
from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.analysis.symbolic import _BUILTIN, NotAffine
from gpgpu_opt.ast_util import is_member_of, member_of

# The aliases (`uint32_t`, `size_t`, `ulong`...) come from the one CUDA type table.
_WIDE_WORDS = ("long", *sorted(cuda_types.integer_aliases("i", 8) | cuda_types.integer_aliases("u", 8)))
_UNSIGNED_NAMES = {"unsigned"} | cuda_types.integer_aliases("u")
_SIGNED_NAMES = {"int", "long", "short", "char", "signed", "bool"} | cuda_types.integer_aliases("i") \
    | cuda_types.integer_aliases("b")
_INTEGER_CONSTANTS = ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                      "unsigned long long int")
#: Masks up to 31 bits keep the low bits of an int or an unsigned int alike.
_MAX_MASK_BITS = 31


def _truncated_quotient(a: int, d: int) -> int:
    q = abs(a) // abs(d)
    return q if (a >= 0) == (d > 0) else -q


class c_div(sympy.Function):
    """C's `a / d` for an integer a of unknown sign and a positive constant d (truncates toward zero)."""
    is_integer = True

    @classmethod
    def eval(cls, a, d):
        if a.is_Integer and d.is_Integer and d != 0:
            return sympy.Integer(_truncated_quotient(int(a), int(d)))
        return None

    def _eval_is_nonnegative(self):
        return self.args[0].is_nonnegative

    def _c_text(self, printer) -> str:
        return f"({printer._print(self.args[0])}) / {printer._print(self.args[1])}"

    def _python_text(self, printer) -> str:
        # Works on Python ints and numpy integer arrays alike (lambdify's "math" and "numpy" modules).
        a, d = printer._print(self.args[0]), printer._print(self.args[1])
        return f"(abs({a}) // {d} * (({a} >= 0) * 2 - 1))"

    _lambdacode = _pythoncode = _numpycode = _python_text
    _ccode = _c_text


class c_mod(sympy.Function):
    """C's `a % d` for an integer a of unknown sign and a positive constant d (the dividend's sign)."""
    is_integer = True

    @classmethod
    def eval(cls, a, d):
        if a.is_Integer and d.is_Integer and d != 0:
            return sympy.Integer(int(a) - int(d) * _truncated_quotient(int(a), int(d)))
        return None

    def _eval_is_nonnegative(self):
        return self.args[0].is_nonnegative

    def _c_text(self, printer) -> str:
        return f"({printer._print(self.args[0])}) % {printer._print(self.args[1])}"

    def _python_text(self, printer) -> str:
        a, d = printer._print(self.args[0]), printer._print(self.args[1])
        return f"({a} - {d} * (abs({a}) // {d} * (({a} >= 0) * 2 - 1)))"

    _lambdacode = _pythoncode = _numpycode = _python_text
    _ccode = _c_text


#: The integer division and remainder forms: a term built with one of these moves with its argument, but
#: not by a constant step (`floor(tid.x / 2)` has no coefficient on tid.x).
QUASI_FUNCTIONS = (sympy.floor, sympy.Mod, c_div, c_mod)


def is_unsigned_type(type_name: str) -> bool:
    words = type_name.split()
    return "unsigned" in words or any(w in _UNSIGNED_NAMES for w in words)


def is_wide_type(type_name: str) -> bool:
    return any(w in _WIDE_WORDS or w.startswith(_WIDE_WORDS) for w in type_name.split())


def is_integer_type(type_name: str) -> bool:
    words = type_name.split()
    return bool(words) and all(w in _SIGNED_NAMES or w in _UNSIGNED_NAMES or w in ("const", "volatile")
                               for w in words)


@dataclass(frozen=True)
class CValue:
    """A translated expression with the C type that decides how `/`, `%` and `>>` treat it."""
    expr: sympy.Expr
    unsigned: bool = False
    wide: bool = False


class CTranslator:
    """One translation of a C expression against an environment of values and (where known) types."""

    def __init__(self, env: Mapping[str, sympy.Expr], types: Mapping[str, str] | None = None):
        self.env = env
        self.types = types or {}
        #: Symbols that stand for the value of an unsigned variable: non-negative by their type.
        self.nonnegative: dict[sympy.Symbol, sympy.Dummy] = {}

    def value(self, node: c_ast.Node) -> CValue:
        if isinstance(node, c_ast.Constant):
            return self._constant(node)
        if isinstance(node, c_ast.ID):
            return self._variable(node.name)
        if is_member_of(node, *_BUILTIN):
            variable, member = member_of(node)
            if member in _BUILTIN[variable]:
                return CValue(_BUILTIN[variable][member], unsigned=True)
        if isinstance(node, c_ast.UnaryOp):
            if node.op in ("-", "+"):
                inner = self.value(node.expr)
                return CValue(-inner.expr if node.op == "-" else inner.expr, inner.unsigned, inner.wide)
            raise NotAffine(f"operator {node.op}")
        if isinstance(node, c_ast.Cast):
            return self._cast(node)
        if isinstance(node, c_ast.BinaryOp):
            return self._binary(node.op, self.value(node.left), self.value(node.right))
        if isinstance(node, c_ast.TernaryOp):
            raise NotAffine("conditional expression")
        raise NotAffine(type(node).__name__)

    # -- leaves -------------------------------------------------------------------------------------
    @staticmethod
    def _constant(node: c_ast.Constant) -> CValue:
        if node.type == "char":
            raise NotAffine("character constant")
        if node.type not in _INTEGER_CONSTANTS:
            raise NotAffine(f"{node.type} constant")
        text = node.value.rstrip("uUlL")
        suffix = node.value[len(text):].lower()
        number = int(text, 8) if text.startswith("0") and text[1:2].isdigit() else int(text, 0)
        return CValue(sympy.Integer(number), unsigned="u" in suffix or "unsigned" in node.type,
                      wide="l" in suffix or "long" in node.type)

    def _variable(self, name: str) -> CValue:
        if name not in self.env:
            raise NotAffine(f"unknown value '{name}'")
        value = self.env[name]
        type_name = self.types.get(name, "int")
        unsigned = is_unsigned_type(type_name)
        if unsigned and isinstance(value, sympy.Symbol) and not value.is_nonnegative:
            # The symbol is the variable's own C value (a parameter, an opaque local): never negative.
            self.nonnegative.setdefault(value, sympy.Dummy(value.name, integer=True, nonnegative=True))
        return CValue(value, unsigned, is_wide_type(type_name))

    def _cast(self, node: c_ast.Cast) -> CValue:
        inner = self.value(node.expr)
        to = node.to_type.type
        if not (isinstance(to, c_ast.TypeDecl) and isinstance(to.type, c_ast.IdentifierType)):
            raise NotAffine("cast to a non-integer type")
        type_name = " ".join(to.type.names)
        if not is_integer_type(type_name):
            raise NotAffine(f"cast to {type_name}")
        unsigned, wide = is_unsigned_type(type_name), is_wide_type(type_name)
        if wide and not unsigned and inner.unsigned and not inner.wide and self._may_wrap(inner):
            raise NotAffine("an unsigned value that may wrap around is widened")
        return CValue(inner.expr, unsigned, wide)

    # -- operators ----------------------------------------------------------------------------------
    def _binary(self, op: str, a: CValue, b: CValue) -> CValue:
        unsigned, wide = a.unsigned or b.unsigned, a.wide or b.wide
        if op in ("+", "-", "*"):
            expr = a.expr + b.expr if op == "+" else a.expr - b.expr if op == "-" else a.expr * b.expr
            return CValue(expr, unsigned, wide)
        if op == "<<":
            return CValue(a.expr * 2 ** self._shift_count(b), a.unsigned, a.wide)
        if op == ">>":
            count = self._shift_count(b)
            if not self.nonnegative_value(a.expr):
                raise NotAffine("right shift of a value not known to be non-negative")
            return CValue(sympy.floor(a.expr / 2 ** count), a.unsigned, a.wide)
        if op in ("/", "%"):
            return CValue(self._divide(op, CValue(a.expr, unsigned, wide), b), unsigned, wide)
        if op == "&":
            return CValue(self._mask(a, b), unsigned, wide)
        raise NotAffine(f"operator {op}")

    @staticmethod
    def _shift_count(b: CValue) -> int:
        if not b.expr.is_Integer or not 0 <= int(b.expr) < 63:
            raise NotAffine("shift by a non-constant")
        return int(b.expr)

    def _divide(self, op: str, a: CValue, b: CValue) -> sympy.Expr:
        if not b.expr.is_Integer:
            raise NotAffine(f"operator {op} by a non-constant")
        if int(b.expr) <= 0:
            raise NotAffine(f"operator {op} by a constant that is not positive")
        if a.unsigned and self._may_wrap(a):
            raise NotAffine(f"operator {op} of an unsigned value that may wrap around")
        if self.nonnegative_value(a.expr):
            return sympy.floor(a.expr / b.expr) if op == "/" else sympy.Mod(a.expr, b.expr)
        return c_div(a.expr, b.expr) if op == "/" else c_mod(a.expr, b.expr)

    def _mask(self, a: CValue, b: CValue) -> sympy.Expr:
        value, mask = (a, b) if b.expr.is_Integer else (b, a)
        if not mask.expr.is_Integer:
            raise NotAffine("operator & with no constant mask")
        m = int(mask.expr)
        if m < 0 or (m + 1) & m or m.bit_length() > _MAX_MASK_BITS:
            raise NotAffine(f"operator & with the mask {m} (not 2^k - 1)")
        return sympy.Mod(value.expr, m + 1) if m else sympy.Integer(0)

    # -- signs --------------------------------------------------------------------------------------
    def nonnegative_value(self, expr: sympy.Expr) -> bool:
        """Provably >= 0 from the symbols' assumptions (thread and block ids, unsigned variables)."""
        known = {s: d for s, d in self.nonnegative.items() if s in expr.free_symbols}
        return bool((expr.subs(known) if known else expr).is_nonnegative)

    def _may_wrap(self, value: CValue) -> bool:
        return not self.nonnegative_value(value.expr)
