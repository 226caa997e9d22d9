"""The CUDA Math API and intrinsics as one table: name, parameter types, return type, and the emulator's
implementation. The parser's prelude declares every name from here and the emulator runs every call
through here (gpgpu_opt.emulator.builtins): there is no second list.

Types are C spellings of gpgpu_opt.frontend.environment's types; `T` is the common type of the arguments
(C++ overloads such as `min`), `T *` a pointer to any element type; a pointer parameter of another type
is an out-parameter (`sincosf(x, &s, &c)`): the implementation returns the result, then the values stored
through them. A name may have several entries (C++ overloads: `sin(double)` and `sin(float)`, `__hadd`
on ints and on halves); a call takes the entry whose parameters match its arguments' types best.

`exact`: the emulator computes the bits the hardware returns. True for what IEEE 754 specifies (basic
arithmetic and square root in all four rounding modes, fma, conversions), bit operations and integers.
False for the transcendental functions (CUDA's are within a few ulp of the value, numpy's differ) and for
`__fdividef`, `rsqrt`, and the directed modes of double `fma`, computed to nearest. The emulated check
compares the naive and the optimized kernel, both run through this same table, so a call computed
inexactly gives both the same bits: passes move and duplicate calls, they never replace one by another.
That is why the check stays bitwise; `exact` says how far an emulated value may be from the GPU's.

`memory`: `load`/`store`, the cache-hinted global accesses (`__ldg`, `__ldcs`, `__stcs`...) through the
first argument; the analyses treat them as accesses of memory (gpgpu_opt.analysis.calls, .writes).
`clock`: the clock counters (`clock64()`), impure and not emulated; `trap`: `assert`, impure (it stops the
kernel), emulated as a failure of the run where a thread's condition is false.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gpgpu_opt import cuda_types
from gpgpu_opt.frontend import math_impl as mi


@dataclass(frozen=True)
class Function:
    name: str
    params: tuple[str, ...]
    returns: str
    impl: Callable | None
    exact: bool = True
    memory: str = ""          # "load" / "store": a global access through the first parameter; "clock"
    header: str = ""          # "" visible in all device code; else the header that declares it

    @property
    def out_params(self) -> tuple[int, ...]:
        """Positions of the out-parameters (pointers other than `T *`)."""
        return tuple(k for k, p in enumerate(self.params) if p.endswith("*") and p != "T *")


def _fd(name: str, fn, nargs: int = 1, exact: bool = False, ret: str | None = None) -> list[Function]:
    """The double function `name` and the float `namef`; C++'s `name(float)` overload is the float one."""
    out = []
    for t, fname in (("double", name), ("float", name + "f"), ("float", name)):
        out.append(Function(fname, (t,) * nargs, ret or t, fn, exact))
    return out


def _rsqrt(x):
    with np.errstate(divide="ignore"):
        return x.dtype.type(1) / np.sqrt(x)


def _exp10(x):
    return np.power(np.asarray(10, x.dtype), x)


def _fdim(x, y):
    return np.where(x > y, x - y, 0).astype(x.dtype)


def _sincos(x):
    return x, np.sin(x), np.cos(x)


def _sincospi(x):
    return x, np.sin(np.pi * x.astype(np.float64)).astype(x.dtype), np.cos(np.pi * x.astype(np.float64)).astype(x.dtype)


def _frexp(x):
    m, e = np.frexp(x)
    return m, e.astype(np.int32)


def _modf(x):
    frac, whole = np.modf(x)
    return frac, whole


def _remquo(x, y):
    r, q = mi.remquo(x, y)
    return r, q


_UNARY_EXACT = {"sqrt": np.sqrt, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
                "round": mi.round_half_away, "rint": np.rint, "nearbyint": np.rint}
_UNARY = {"cbrt": np.cbrt, "exp": np.exp, "exp2": np.exp2, "exp10": _exp10, "expm1": np.expm1, "log": np.log,
          "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
          "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
          "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "rsqrt": _rsqrt,
          "rcbrt": lambda x: x.dtype.type(1) / np.cbrt(x), "logb": lambda x: np.floor(np.log2(np.abs(x))),
          "sinpi": lambda x: np.sin(np.pi * x), "cospi": lambda x: np.cos(np.pi * x),
          "erf": mi.erf, "erfc": mi.erfc, "erfinv": mi.erfinv, "erfcinv": mi.erfcinv, "erfcx": mi.erfcx,
          "normcdf": lambda x: 0.5 * mi.erfc(-np.asarray(x, np.float64) / np.sqrt(2.0)),
          "normcdfinv": mi.normcdfinv, "lgamma": mi.lgamma, "tgamma": mi.tgamma, "j0": mi.j0, "j1": mi.j1,
          "y0": mi.y0, "y1": mi.y1}
_BINARY_EXACT = {"fmin": np.fmin, "fmax": np.fmax, "fmod": np.fmod, "copysign": np.copysign, "fdim": _fdim,
                 "remainder": mi.remainder, "nextafter": np.nextafter}
_BINARY = {"pow": np.power, "atan2": np.arctan2, "hypot": np.hypot,
           "rhypot": lambda x, y: x.dtype.type(1) / np.hypot(x, y)}


def _math_functions() -> list[Function]:
    out: list[Function] = []
    for name, fn in _UNARY_EXACT.items():
        out += _fd(name, fn, exact=True)
    for name, fn in _UNARY.items():
        out += _fd(name, fn)
    for name, fn in _BINARY_EXACT.items():
        out += _fd(name, fn, 2, exact=True)
    for name, fn in _BINARY.items():
        out += _fd(name, fn, 2)
    out += _fd("fma", mi.rounded("fma", "rn", np.float64), 3, exact=True)
    out[-2:] = [Function(f.name, f.params, f.returns, mi.rounded("fma", "rn", np.float32)) for f in out[-2:]]
    for t, suffix in (("double", ""), ("float", "f")):
        out += [
            Function(f"sincos{suffix}", (t, f"{t} *", f"{t} *"), "void", _sincos, False),
            Function(f"sincospi{suffix}", (t, f"{t} *", f"{t} *"), "void", _sincospi, False),
            Function(f"frexp{suffix}", (t, "int *"), t, _frexp),
            Function(f"modf{suffix}", (t, f"{t} *"), t, _modf),
            Function(f"remquo{suffix}", (t, t, "int *"), t, _remquo),
            Function(f"ldexp{suffix}", (t, "int"), t, lambda x, e: np.ldexp(x, e)),
            Function(f"scalbn{suffix}", (t, "int"), t, lambda x, e: np.ldexp(x, e)),
            Function(f"scalbln{suffix}", (t, "long"), t, lambda x, e: np.ldexp(x, e.astype(np.int32))),
            Function(f"ilogb{suffix}", (t,), "int", lambda x: np.floor(np.log2(np.abs(x)))),
            Function(f"jn{suffix}", ("int", t), t, mi.jn, False),
            Function(f"yn{suffix}", ("int", t), t, mi.yn, False),
            Function(f"norm3d{suffix}", (t, t, t), t, lambda a, b, c: np.sqrt(a * a + b * b + c * c), False),
            Function(f"rnorm3d{suffix}", (t, t, t), t, lambda a, b, c: 1 / np.sqrt(a * a + b * b + c * c), False),
            Function(f"norm4d{suffix}", (t,) * 4, t, lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
                     False),
            Function(f"rnorm4d{suffix}", (t,) * 4, t,
                     lambda a, b, c, d: 1 / np.sqrt(a * a + b * b + c * c + d * d), False),
            Function(f"lrint{suffix}", (t,), "long", mi.float_to_int("rn", np.int64)),
            Function(f"llrint{suffix}", (t,), "long long", mi.float_to_int("rn", np.int64)),
            Function(f"lround{suffix}", (t,), "long", lambda x: mi.round_half_away(x).astype(np.int64)),
            Function(f"llround{suffix}", (t,), "long long", lambda x: mi.round_half_away(x).astype(np.int64)),
        ]
    out += [Function("fdividef", ("float", "float"), "float", np.divide, False)]
    for name, fn in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite), ("signbit", np.signbit)):
        out += [Function(name, ("double",), "bool", fn), Function(name, ("float",), "bool", fn)]
    out += [Function("__isnanf", ("float",), "int", np.isnan), Function("__isinff", ("float",), "int", np.isinf),
            Function("__finitef", ("float",), "int", np.isfinite),
            Function("__signbitf", ("float",), "int", np.signbit)]
    return out


_MODES = ("rn", "rz", "ru", "rd")


def _intrinsics() -> list[Function]:
    """The single and double precision intrinsics: rounding-mode arithmetic, fast math, conversions."""
    out: list[Function] = []
    for mode in _MODES:
        for op in ("add", "sub", "mul", "div"):
            out.append(Function(f"__f{op}_{mode}", ("float", "float"), "float", mi.rounded(op, mode, np.float32)))
            out.append(Function(f"__d{op}_{mode}", ("double", "double"), "double", mi.rounded(op, mode, np.float64)))
        out += [Function(f"__fmaf_{mode}", ("float",) * 3, "float", mi.rounded("fma", mode, np.float32)),
                Function(f"__fma_{mode}", ("double",) * 3, "double", mi.rounded("fma", mode, np.float64),
                         exact=mode == "rn"),
                Function(f"__frcp_{mode}", ("float",), "float", mi.rounded("rcp", mode, np.float32)),
                Function(f"__drcp_{mode}", ("double",), "double", mi.rounded("rcp", mode, np.float64)),
                Function(f"__fsqrt_{mode}", ("float",), "float", mi.rounded("sqrt", mode, np.float32)),
                Function(f"__dsqrt_{mode}", ("double",), "double", mi.rounded("sqrt", mode, np.float64))]
    out.append(Function("__fmaf_ieee_rn", ("float",) * 3, "float", mi.rounded("fma", "rn", np.float32)))
    out += [Function("__frsqrt_rn", ("float",), "float", _rsqrt, False),
            Function("__fdividef", ("float", "float"), "float", np.divide, False),
            Function("__saturatef", ("float",), "float", lambda x: np.clip(np.nan_to_num(x, nan=0.0), 0, 1))]
    for fast, base in (("__expf", np.exp), ("__exp10f", _exp10), ("__logf", np.log), ("__log2f", np.log2),
                       ("__log10f", np.log10), ("__sinf", np.sin), ("__cosf", np.cos), ("__tanf", np.tan)):
        out.append(Function(fast, ("float",), "float", base, False))
    out += [Function("__powf", ("float", "float"), "float", np.power, False),
            Function("__sincosf", ("float", "float *", "float *"), "void", _sincos, False)]
    out += _conversions()
    return out


_INT_TYPES = {"int": np.int32, "uint": np.uint32, "ll": np.int64, "ull": np.uint64}
_C_INT = {"int": "int", "uint": "unsigned int", "ll": "long long", "ull": "unsigned long long"}


def _conversions() -> list[Function]:
    out: list[Function] = []
    for mode in _MODES:
        for short, dtype in _INT_TYPES.items():
            c = _C_INT[short]
            out += [Function(f"__float2{short}_{mode}", ("float",), c, mi.float_to_int(mode, dtype)),
                    Function(f"__double2{short}_{mode}", ("double",), c, mi.float_to_int(mode, dtype)),
                    Function(f"__{short}2float_{mode}", (c,), "float", mi.convert_rounded(mode, np.float32))]
            if short in ("ll", "ull"):
                out.append(Function(f"__{short}2double_{mode}", (c,), "double", mi.convert_rounded(mode, np.float64)))
        out.append(Function(f"__double2float_{mode}", ("double",), "float", mi.convert_rounded(mode, np.float32)))
    out += [Function("__int2double_rn", ("int",), "double", lambda x: x.astype(np.float64)),
            Function("__uint2double_rn", ("unsigned int",), "double", lambda x: x.astype(np.float64))]
    for name, src, dst in (("__float_as_int", "float", "int"), ("__float_as_uint", "float", "unsigned int"),
                           ("__int_as_float", "int", "float"), ("__uint_as_float", "unsigned int", "float"),
                           ("__double_as_longlong", "double", "long long"),
                           ("__longlong_as_double", "long long", "double")):
        out.append(Function(name, (src,), dst, _reinterpret(dst)))
    out += [Function("__double2hiint", ("double",), "int",
                     lambda x: (np.asarray(x).view(np.int64) >> 32).astype(np.int32)),
            Function("__double2loint", ("double",), "int",
                     lambda x: (np.asarray(x).view(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)),
            Function("__hiloint2double", ("int", "int"), "double",
                     lambda hi, lo: ((np.asarray(hi).astype(np.int64) << 32)
                                     | np.asarray(lo).view(np.uint32).astype(np.int64)).view(np.float64))]
    return out


def _reinterpret(dst: str):
    return lambda x: np.asarray(x).view(cuda_types.scalar_type(dst).dtype)


def _integer_functions() -> list[Function]:
    u, i, ll, ull = "unsigned int", "int", "long long", "unsigned long long"
    return [
        Function("__popc", (u,), i, mi.popcount), Function("__popcll", (ull,), i, mi.popcount),
        Function("__clz", (i,), i, mi.count_leading_zeros(32)),
        Function("__clzll", (ll,), i, mi.count_leading_zeros(64)),
        Function("__ffs", (i,), i, mi.find_first_set(32)), Function("__ffsll", (ll,), i, mi.find_first_set(64)),
        Function("__brev", (u,), u, mi.bit_reverse(32)), Function("__brevll", (ull,), ull, mi.bit_reverse(64)),
        Function("__byte_perm", (u, u, u), u, mi.byte_perm),
        Function("__mulhi", (i, i), i, mi.high_product(True, 32)),
        Function("__umulhi", (u, u), u, mi.high_product(False, 32)),
        Function("__mul64hi", (ll, ll), ll, mi.high_product(True, 64)),
        Function("__umul64hi", (ull, ull), ull, mi.high_product(False, 64)),
        Function("__mul24", (i, i), i, lambda a, b: _sext24(a) * _sext24(b)),
        Function("__umul24", (u, u), u, lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF)),
        Function("__sad", (i, i, u), u, lambda x, y, z: np.abs(x.astype(np.int64) - y) + z),
        Function("__usad", (u, u, u), u, lambda x, y, z: np.abs(x.astype(np.int64) - y) + z),
        Function("__hadd", (i, i), i, lambda x, y: (x.astype(np.int64) + y) >> 1),
        Function("__rhadd", (i, i), i, lambda x, y: (x.astype(np.int64) + y + 1) >> 1),
        Function("__uhadd", (u, u), u, lambda x, y: (x.astype(np.uint64) + y) >> 1),
        Function("__urhadd", (u, u), u, lambda x, y: (x.astype(np.uint64) + y + 1) >> 1),
        Function("__funnelshift_l", (u, u, u), u, mi.funnel_shift(True, False)),
        Function("__funnelshift_lc", (u, u, u), u, mi.funnel_shift(True, True)),
        Function("__funnelshift_r", (u, u, u), u, mi.funnel_shift(False, False)),
        Function("__funnelshift_rc", (u, u, u), u, mi.funnel_shift(False, True)),
        Function("min", ("T", "T"), "T", np.fmin), Function("max", ("T", "T"), "T", np.fmax),
        Function("umin", (u, u), u, np.minimum), Function("umax", (u, u), u, np.maximum),
        Function("llmin", (ll, ll), ll, np.minimum), Function("llmax", (ll, ll), ll, np.maximum),
        Function("ullmin", (ull, ull), ull, np.minimum), Function("ullmax", (ull, ull), ull, np.maximum),
        Function("abs", ("T",), "T", np.abs), Function("labs", ("long",), "long", np.abs),
        Function("llabs", (ll,), ll, np.abs),
    ]


def _sext24(x):
    low = np.asarray(x).astype(np.int64) & 0xFFFFFF
    return np.where(low >= 0x800000, low - 0x1000000, low)


def _hints() -> list[Function]:
    """Loads and stores with a cache hint: global accesses through their first argument."""
    loads = [Function(n, ("T *",), "T", None, memory="load")
             for n in ("__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv")]
    stores = [Function(n, ("T *", "T"), "void", None, memory="store") for n in ("__stcg", "__stcs", "__stwb", "__stwt")]
    return loads + stores


def _complex_functions() -> list[Function]:
    """<cuComplex.h>: complex numbers as float2 / double2 (x real, y imaginary). nvcc may contract the
    products of cuCmul into fma, so those are not bit-exact."""
    out = []
    for t, v, f, kind in (("float", "float2", "f", "Float"), ("double", "double2", "", "Double")):
        h = "cuComplex.h"
        out += [
            Function(f"cuCreal{f}", (v,), t, lambda a: a[0], header=h),
            Function(f"cuCimag{f}", (v,), t, lambda a: a[1], header=h),
            Function(f"make_cu{kind}Complex", (t, t), v, lambda r, i: (r, i), header=h),
            Function(f"cuConj{f}", (v,), v, lambda a: (a[0], -a[1]), header=h),
            Function(f"cuCadd{f}", (v, v), v, lambda a, b: (a[0] + b[0], a[1] + b[1]), header=h),
            Function(f"cuCsub{f}", (v, v), v, lambda a, b: (a[0] - b[0], a[1] - b[1]), header=h),
            Function(f"cuCmul{f}", (v, v), v, lambda a, b: (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]),
                     False, header=h),
            Function(f"cuCdiv{f}", (v, v), v, _complex_divide, False, header=h),
            Function(f"cuCabs{f}", (v,), t, lambda a: np.hypot(a[0], a[1]), False, header=h),
        ]
    out.append(Function("make_cuComplex", ("float", "float"), "float2", lambda r, i: (r, i), header="cuComplex.h"))
    return out


def _complex_divide(a, b):
    with np.errstate(all="ignore"):
        den = b[0] * b[0] + b[1] * b[1]
        return (a[0] * b[0] + a[1] * b[1]) / den, (a[1] * b[0] - a[0] * b[1]) / den


def _timers() -> list[Function]:
    """The SM's clock counters: no value the emulator could give them (a kernel using one is not emulated),
    and never pure (each read differs)."""
    return [Function("clock", (), "long", None, memory="clock"),
            Function("clock64", (), "long long", None, memory="clock"),
            # <cassert>, visible in device code without an include: stops the kernel where it fails
            Function("assert", ("int",), "void", None, memory="trap")]


FUNCTIONS: tuple[Function, ...] = tuple(_math_functions() + _intrinsics() + _integer_functions() + _hints()
                                        + _complex_functions() + _timers())


def _by_name() -> dict[str, tuple[Function, ...]]:
    table: dict[str, list[Function]] = {}
    for f in FUNCTIONS:
        table.setdefault(f.name, []).append(f)
    from gpgpu_opt.frontend.half_api import HALF_FUNCTIONS   # the fp16/bf16 part of the table
    for f in HALF_FUNCTIONS:
        table.setdefault(f.name, []).append(f)
    return {name: tuple(entries) for name, entries in table.items()}


BY_NAME: dict[str, tuple[Function, ...]] = _by_name()

#: The names of <cmath>'s functions (float, double and C++'s overloads), which `std::` may qualify.
CMATH_NAMES: frozenset[str] = frozenset(f.name for f in _math_functions())


def written_arguments(name: str) -> frozenset[int]:
    """Positions of the arguments through which a call of `name` stores: a store hint's pointer
    (`__stcs(&a[i], v)` writes a[i]) and the out-parameters (`sincosf(x, &s, &c)`)."""
    positions: set[int] = set()
    for f in BY_NAME.get(name, ()):
        positions.update((0,) if f.memory == "store" else f.out_params)
    return frozenset(positions)


def memory_effect(name: str) -> str:
    """'load' or 'store' for a cache-hinted access, 'out-parameters' for a function storing through
    pointers, '' for a function of its arguments only (or a name not in the table)."""
    entries = BY_NAME.get(name, ())
    if any(f.memory for f in entries):
        return entries[0].memory
    return "out-parameters" if any(f.out_params for f in entries) else ""
