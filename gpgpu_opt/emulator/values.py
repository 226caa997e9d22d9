"""C types, per-lane values and C-exact arithmetic on numpy arrays.

A value is uniform (a numpy scalar, the same for every lane) or per lane (a numpy array of shape
(lanes,)). Vector values (`float4`) hold a tuple of components. Arithmetic follows C/C++: integer
promotions, usual arithmetic conversions, `/` and `%` truncating toward zero, unsigned wraparound,
float32 staying float32 (both operands are converted to the result type before numpy sees them)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.emulator.errors import UndefinedBehaviorError, UnsupportedConstruct, where
from gpgpu_opt.frontend.math_impl import to_bfloat16


@dataclass(frozen=True, eq=False)
class CType:
    """A scalar type. `size`, `is_float` and `is_bfloat16` are worked out once, when it is made: the
    emulator reads them for nearly every operator and subscript it evaluates."""
    name: str
    dtype: np.dtype
    kind: str          # 'b' bool, 'i' signed, 'u' unsigned, 'f' floating
    rank: int
    nbytes: int = 0    # the size on the device where it differs from the dtype's (bfloat16 held in float32)
    size: int = field(init=False)
    is_float: bool = field(init=False)
    is_bfloat16: bool = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "size", self.nbytes or self.dtype.itemsize)
        object.__setattr__(self, "is_float", self.kind == "f")
        object.__setattr__(self, "is_bfloat16", self.nbytes == 2 and self.dtype == np.float32)

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class VecType:
    """A vector type (`float4`); `size` and `align` (from the CUDA type table) worked out once."""
    name: str
    base: CType
    n: int
    size: int = field(init=False)
    align: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "size", self.base.size * self.n)
        object.__setattr__(self, "align", cuda_types.VectorType(self.name, self.base.name, self.n).align)

    def __repr__(self) -> str:
        return self.name


def _scalar_types() -> dict[str, CType]:
    """The emulator's types, from the one CUDA type table."""
    out = {}
    for t in cuda_types.SCALAR_TYPES:
        if t.dtype == "bfloat16":   # numpy has no bfloat16: float32 values rounded to 8 bits (convert)
            out[t.name] = CType(t.name, np.dtype(np.float32), t.kind, t.rank, t.size)
        else:
            out[t.name] = CType(t.name, np.dtype(t.dtype), t.kind, t.rank)
    return out


SCALARS = _scalar_types()
BOOL, CHAR, UCHAR = SCALARS["bool"], SCALARS["char"], SCALARS["unsigned char"]
SHORT, USHORT = SCALARS["short"], SCALARS["unsigned short"]
INT, UINT, LONG, ULONG = SCALARS["int"], SCALARS["unsigned int"], SCALARS["long"], SCALARS["unsigned long"]
LLONG, ULLONG = SCALARS["long long"], SCALARS["unsigned long long"]
FLOAT, DOUBLE = SCALARS["float"], SCALARS["double"]
HALF, BFLOAT16 = SCALARS["__half"], SCALARS["__nv_bfloat16"]
HALF_TYPES = (HALF, BFLOAT16)

_UNSIGNED_OF = {CHAR: UCHAR, SHORT: USHORT, INT: UINT, LONG: ULONG, LLONG: ULLONG}

VECTOR_TYPES: dict[str, VecType] = {v.name: VecType(v.name, SCALARS[v.base], v.n) for v in cuda_types.VECTOR_TYPES}
VECTOR_TYPES.update({alias: VECTOR_TYPES[name] for alias, name in cuda_types.VECTOR_ALIASES.items()})
VECTOR_TYPES.update({v.name: VecType(v.name, SCALARS[v.base], v.n) for v in cuda_types.DEFINED_VECTORS})
VECTOR_TYPES["dim3"] = VecType("dim3", UINT, 3)
COMPONENTS = "xyzw"
#: Component name -> index of the vectors with more than four (cuda_types.component_names: `h0` ... `h7`).
WIDE_FIELDS = {v.name: {f: k for k, f in enumerate(v.fields)} for v in cuda_types.DEFINED_VECTORS}


def type_from_names(names: list[str], node=None) -> CType | VecType | None:
    """The type named by an IdentifierType's names (None for void)."""
    names = [n for n in names if n not in ("const", "volatile", "restrict", "__restrict__")]
    if len(names) == 1 and names[0] in VECTOR_TYPES:
        return VECTOR_TYPES[names[0]]
    if names == ["void"]:
        return None
    scalar = cuda_types.scalar(" ".join(names))     # aliases, C's spellings in any order: `long unsigned`
    if scalar is not None:
        return SCALARS[scalar.name]
    raise UnsupportedConstruct(f"type '{' '.join(names)}' at {where(node)}")


def promote(t: CType) -> CType:
    """Integer promotion."""
    if t.kind != "f" and t.rank < INT.rank:
        return INT
    return t


def common_type(a: CType, b: CType) -> CType:
    """The usual arithmetic conversions (memoized: the emulator asks for every operator it evaluates)."""
    t = _COMMON.get((a, b))
    if t is None:
        t = _COMMON[(a, b)] = _usual_conversion(a, b)
    return t


_COMMON: dict[tuple[CType, CType], CType] = {}


def _usual_conversion(a: CType, b: CType) -> CType:
    if a is DOUBLE or b is DOUBLE:
        return DOUBLE
    if a is FLOAT or b is FLOAT:
        return FLOAT
    a, b = promote(a), promote(b)
    if a is b:
        return a
    if a.kind == b.kind:
        return a if a.rank >= b.rank else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if u.rank >= s.rank:
        return u
    if s.size > u.size:
        return s
    return _UNSIGNED_OF[s]


class Value:
    """A scalar or vector value over the lanes of a batch."""
    __slots__ = ("ctype", "data")

    def __init__(self, ctype, data):
        self.ctype = ctype
        self.data = data

    def __repr__(self) -> str:
        return f"Value({self.ctype}, {self.data!r})"


def cast_data(data, dtype: np.dtype):
    if isinstance(data, (np.ndarray, np.generic)):   # a numpy scalar's astype casts as an array's does
        current = data.dtype
        return data if current is dtype or current == dtype else data.astype(dtype)
    return np.asarray(data).astype(dtype)[()]


def truth(data):
    """C truth of scalar data: a bool array or numpy bool scalar."""
    if isinstance(data, np.ndarray):
        return data if data.dtype == np.bool_ else data != 0
    if isinstance(data, np.bool_):     # a comparison's result, the usual condition: already a truth
        return data
    return np.bool_(data != 0)


def convert(v: Value, t, node=None) -> Value:
    """Convert a value to type `t` (as by assignment or a cast)."""
    if v.ctype is t:
        return v
    if isinstance(t, VecType) or isinstance(v.ctype, VecType):
        if isinstance(t, VecType) and isinstance(v.ctype, VecType) and t.n == v.ctype.n:
            return Value(t, tuple(cast_to(c, t.base) for c in v.data))
        raise UnsupportedConstruct(f"conversion from {v.ctype} to {t} at {where(node)}")
    if not isinstance(t, CType) or not isinstance(v.ctype, CType):
        raise UnsupportedConstruct(f"conversion from {v.ctype} to {t} at {where(node)}")
    if t is BOOL:
        return Value(BOOL, truth(v.data))
    return Value(t, cast_to(v.data, t))


def cast_to(data, t: CType):
    """Data as values of type t: cast_data, and rounded to 8 bits of mantissa for bfloat16."""
    if t.is_bfloat16:
        return to_bfloat16(data)
    return cast_data(data, t.dtype)


def uniform(t: CType, x) -> Value:
    return Value(t, t.dtype.type(x))


def parse_constant(node: c_ast.Constant) -> Value:
    """A C literal: integer literal types follow C's 'first type that fits' rules."""
    text = node.value
    kind = node.type
    if kind == "char":
        body = text[1:-1]
        if body.startswith("\\"):
            escapes = {"n": 10, "t": 9, "0": 0, "\\": 92, "'": 39, '"': 34, "r": 13}
            if body[1:] not in escapes:
                raise UnsupportedConstruct(f"character literal {text} at {where(node)}")
            return uniform(CHAR, escapes[body[1:]])
        return uniform(CHAR, ord(body))
    if kind == "string":
        raise UnsupportedConstruct(f"string literal at {where(node)}")
    low = text.lower()
    is_hex = low.startswith("0x")
    if kind in ("float", "double", "long double") or (not is_hex and ("." in low or "e" in low)) \
            or (is_hex and "p" in low):
        if low.endswith("f"):
            return Value(FLOAT, np.float32(float.fromhex(low[:-1]) if is_hex else np.float64(low[:-1])))
        if low.endswith("l"):
            low = low[:-1]
        return Value(DOUBLE, np.float64(float.fromhex(low) if is_hex else float(low)))
    digits = low.rstrip("ul")
    suffix = low[len(digits):]
    if digits.startswith("0x"):
        value = int(digits, 16)
    elif digits.startswith("0b"):
        value = int(digits, 2)
    elif len(digits) > 1 and digits.startswith("0"):
        value = int(digits, 8)
    else:
        value = int(digits)
    unsigned = "u" in suffix
    longs = suffix.count("l")
    decimal = not (is_hex or (len(digits) > 1 and digits.startswith("0")))
    candidates = {0: [INT, UINT, LONG, ULONG, LLONG, ULLONG], 1: [LONG, ULONG, LLONG, ULLONG],
                  2: [LLONG, ULLONG]}[min(longs, 2)]
    if unsigned:
        candidates = [t for t in candidates if t.kind == "u"]
    elif decimal:
        candidates = [t for t in candidates if t.kind == "i"] or candidates
    for t in candidates:
        info = np.iinfo(t.dtype)
        if info.min <= value <= info.max:
            return uniform(t, value)
    raise UnsupportedConstruct(f"integer literal {text} too large at {where(node)}")


def _active_any(bits, mask) -> bool:
    if mask is not None:
        bits = bits & mask
    return bool(np.any(bits))


#: Operators that are one numpy ufunc on operands converted to their common type.
_ELEMENTWISE = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
                "^": np.bitwise_xor}
_COMPARISONS = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal,
                "!=": np.not_equal}
_BFLOAT16_ROUNDED = ("+", "-", "*", "/")
#: Operands of one type (not bfloat16, which rounds each result): the type both are converted to.
_SAME_TYPE_RESULT = {t: common_type(t, t) for t in SCALARS.values() if not t.is_bfloat16}
#: The operators of arith's common case: (ufunc, whether it is a comparison, whose result is bool).
_FAST_OPERATORS = {**{op: (f, False) for op, f in _ELEMENTWISE.items()},
                   **{op: (f, True) for op, f in _COMPARISONS.items()}}
#: Data classes whose dtype is exactly the values' type when it `is` the dtype asked for (no cast needed).
_NUMPY_DATA = frozenset({np.ndarray, *{np.dtype(t.dtype).type for t in cuda_types.SCALAR_TYPES if t.dtype != "bfloat16"}})


def arith(op: str, a: Value, b: Value, mask, node) -> Value:
    """A binary arithmetic, bitwise or comparison operator on scalar values."""
    at, bt = a.ctype, b.ctype
    t = _SAME_TYPE_RESULT.get(at) if at is bt else None
    if t is not None:                      # the common case, same answer as the general path below
        fast = _FAST_OPERATORS.get(op)
        if fast is not None:
            ufunc, comparison = fast
            dtype = t.dtype
            x, y = a.data, b.data
            if x.__class__ not in _NUMPY_DATA or x.dtype is not dtype:   # else cast_data returns it as it is
                x = cast_data(x, dtype)
            if y.__class__ not in _NUMPY_DATA or y.dtype is not dtype:
                y = cast_data(y, dtype)
            return Value(BOOL if comparison else t, ufunc(x, y))
    if not isinstance(at, CType) or not isinstance(bt, CType):
        raise UnsupportedConstruct(f"operator '{op}' on {at} and {bt} at {where(node)}")
    if op in ("<<", ">>"):
        t = promote(at)
        if t.is_float or promote(bt).is_float:
            raise UnsupportedConstruct(f"shift of a floating value at {where(node)}")
        x = cast_data(a.data, t.dtype)
        y = cast_data(b.data, t.dtype)
        return Value(t, np.left_shift(x, y) if op == "<<" else np.right_shift(x, y))
    if at is not bt and (at in HALF_TYPES or bt in HALF_TYPES):
        raise UnsupportedConstruct(f"operator '{op}' on {at} and {bt} at {where(node)} (ambiguous in "
                                   "CUDA C++: convert one operand)")
    t = common_type(at, bt)
    x = cast_data(a.data, t.dtype)
    y = cast_data(b.data, t.dtype)
    if t.nbytes and t.is_bfloat16 and op in _BFLOAT16_ROUNDED:
        return Value(t, to_bfloat16(arith(op, Value(FLOAT, x), Value(FLOAT, y), mask, node).data))
    ufunc = _ELEMENTWISE.get(op)
    if ufunc is not None:
        return Value(t, ufunc(x, y))
    ufunc = _COMPARISONS.get(op)
    if ufunc is not None:
        return Value(BOOL, ufunc(x, y))
    if op in ("/", "%"):
        return _divide(op, t, x, y, mask, node)
    raise UnsupportedConstruct(f"operator '{op}' at {where(node)}")


def _divide(op: str, t: CType, x, y, mask, node) -> Value:
    """`/` and `%` with C's semantics: truncation toward zero, a remainder with the dividend's sign."""
    if t.is_float:
        if op == "%":
            raise UnsupportedConstruct(f"'%' on floating operands at {where(node)}")
        return Value(t, x / y)
    zero = y == 0
    if np.count_nonzero(zero):                 # no divisor is 0 in the common case: nothing to check
        if _active_any(zero, mask):
            raise UndefinedBehaviorError(f"integer {'division' if op == '/' else 'modulo'} by zero at "
                                         f"{where(node)}")
        y = np.where(zero, t.dtype.type(1), y)
    r = np.fmod(x, y)                      # C remainder: sign of the dividend
    if op == "%":
        return Value(t, cast_data(r, t.dtype))
    return Value(t, cast_data((x - r) // y, t.dtype))


def unary(op: str, a: Value, node) -> Value:
    if not isinstance(a.ctype, CType):
        raise UnsupportedConstruct(f"operator '{op}' on {a.ctype} at {where(node)}")
    if op == "!":
        return Value(BOOL, np.logical_not(truth(a.data)))
    t = promote(a.ctype)
    x = cast_data(a.data, t.dtype)
    if op == "-":
        return Value(t, np.negative(x))
    if op == "+":
        return Value(t, x)
    if op == "~":
        if t.is_float:
            raise UnsupportedConstruct(f"'~' on a floating value at {where(node)}")
        return Value(t, np.invert(x))
    raise UnsupportedConstruct(f"operator '{op}' at {where(node)}")


def select(cond, a, b):
    """Per-lane choice between two data (cond a bool array or scalar)."""
    if not isinstance(cond, np.ndarray):
        return a if cond else b
    return np.where(cond, a, b)


def select_value(cond, a: Value, b: Value) -> Value:
    """`cond ? a : b` on values of the same type."""
    if isinstance(a.ctype, VecType):
        return Value(a.ctype, tuple(select(cond, x, y) for x, y in zip(a.data, b.data)))
    r = select(cond, a.data, b.data)
    if isinstance(r, np.ndarray) and r.dtype != a.ctype.dtype:
        r = r.astype(a.ctype.dtype)
    return Value(a.ctype, r)


def zero_value(t) -> Value:
    """An uninitialised variable: NaN for floating types (so stray reads are visible), 0 otherwise."""
    if isinstance(t, VecType):
        return Value(t, tuple(zero_value(t.base).data for _ in range(t.n)))
    return Value(t, t.dtype.type(np.nan if t.is_float else 0))
