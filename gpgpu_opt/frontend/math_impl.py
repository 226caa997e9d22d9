"""Numeric kernels of the CUDA Math API's emulation (numpy only): IEEE rounding in the four modes, the
half and bfloat16 formats, bit intrinsics, and the special functions numpy lacks.

Rounding: an operation's exact value is carried as a double `s` (its round-to-nearest) and the sign of
the rest (`err`: exact - s). From the pair, a float (or double) result is rounded in any mode exactly as
IEEE 754 says: the double is first rounded to odd (53 >= 24 + 2 bits makes the second rounding right).
"""
from __future__ import annotations

import math

import numpy as np

F32, F64 = np.float32, np.float64


def two_sum(a, b):
    """s = fl(a + b) and the exact error a + b - s (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    c = F64(134217729.0) * a        # 2**27 + 1 (Veltkamp)
    hi = c - (c - a)
    return hi, a - hi


def two_product(a, b):
    """p = fl(a * b) and the exact error a * b - p (Dekker), for values far from overflow."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _exact(op: str, args):
    """(s, err) in double for a float or double operation."""
    with np.errstate(all="ignore"):
        if op == "add":
            return two_sum(args[0], args[1])
        if op == "sub":
            return two_sum(args[0], -args[1])
        if op == "mul":
            return two_product(args[0], args[1])
        if op == "fma":
            p, e = two_product(args[0], args[1])
            s, e2 = two_sum(p, args[2])
            return s, e + e2
        if op in ("div", "rcp"):
            a, b = (np.ones_like(args[0]), args[0]) if op == "rcp" else args
            q = a / b
            p, e = two_product(q, b)
            rest = (a - p) - e                  # a - q*b, exactly
            return q, np.where(np.isfinite(q), rest * np.sign(b), 0.0)
        if op == "sqrt":
            s = np.sqrt(args[0])
            p, e = two_product(s, s)
            return s, np.where(np.isfinite(s), (args[0] - p) - e, 0.0)
    raise ValueError(op)


def _toward_zero_odd(s, err):
    """Round-to-odd of s + err, as a double."""
    s = np.asarray(s, F64)
    err = np.asarray(err, F64)
    inexact = (err != 0) & np.isfinite(s)
    trunc = np.where(inexact & (np.sign(err) != np.sign(s)), np.nextafter(s, F64(0)), s)
    bits = trunc.view(np.uint64) | np.where(inexact, np.uint64(1), np.uint64(0))
    return bits.view(F64)


def round_pair(s, err, mode: str, dtype):
    """Round the exact value s + err (err: only its sign matters beyond s) to `dtype` in `mode`."""
    s = np.asarray(s, F64)
    err = np.asarray(err, F64)
    if np.dtype(dtype) == np.float64:
        f, diff = s, err
    else:
        with np.errstate(all="ignore"):
            f = _toward_zero_odd(s, err).astype(F32)
            back = f.astype(F64)
            diff = np.where(s != back, s - back, err)
    if mode == "rn":
        return f
    target = {"ru": np.inf, "rd": -np.inf}.get(mode)
    if target is None:   # rz: step toward zero where |f| > |exact|
        move = (diff != 0) & (np.sign(diff) != np.sign(f)) & (f != 0)
        target_arr = np.zeros_like(f)
    else:
        move = diff > 0 if mode == "ru" else diff < 0
        target_arr = np.full_like(f, target)
    return np.where(move, np.nextafter(f, target_arr), f)


def rounded(op: str, mode: str, dtype):
    """An IEEE operation in a rounding mode, on float (dtype float32) or double operands."""
    def fn(*args):
        s, err = _exact(op, [np.asarray(a, F64) for a in args])
        out = round_pair(s, err, mode, dtype)
        return out[()] if np.ndim(out) == 0 else out
    return fn


def convert_rounded(mode: str, dtype):
    """An integer or a float converted to a float type in `mode`. A 64-bit integer may not fit a double:
    its rest (x - double(x)) is computed in Python's integers."""
    def fn(x):
        x = np.asarray(x)
        x64 = x.astype(F64)
        if x.dtype.kind in "iu" and x.dtype.itemsize == 8:
            err = np.asarray(np.frompyfunc(lambda v, f: float(int(v) - int(f)), 2, 1)(x, x64), F64)
        else:
            err = np.zeros_like(x64)
        out = round_pair(x64, err, mode, dtype)
        return out[()] if np.ndim(out) == 0 else out
    return fn


def float_to_int(mode: str, dtype):
    """A float converted to an integer type with a rounding mode, saturating as the hardware does (NaN: 0)."""
    info = np.iinfo(dtype)
    rnd = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode]

    def one(v: float) -> int:
        return 0 if math.isnan(v) else min(max(int(v) if math.isfinite(v) else (info.max if v > 0 else info.min),
                                               info.min), info.max)

    def fn(x):
        out = np.asarray(np.frompyfunc(one, 1, 1)(rnd(np.asarray(x, F64)))).astype(dtype)
        return out[()] if np.ndim(out) == 0 else out
    return fn


# ---------------------------------------------------------------- bfloat16 (stored as float32)
def to_bfloat16(x):
    """Round to bfloat16 (round to nearest even, as cvt.rn.bf16 does), kept in float32. From a double, the
    value is rounded to odd in float32 first, so the result is rounded once."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        with np.errstate(all="ignore"):
            f = x.astype(F32)
            inexact = (f.astype(F64) != x) & np.isfinite(x)
            f = np.where(inexact & (np.abs(f.astype(F64)) > np.abs(x)), np.nextafter(f, F32(0)), f).astype(F32)
            f = (f.view(np.uint32) | np.where(inexact, np.uint32(1), np.uint32(0))).view(F32)   # round to odd
    else:
        f = x.astype(F32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded_bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = np.where(np.isnan(f), np.float32(np.nan), rounded_bits.view(F32))
    return out[()] if out.ndim == 0 else out


# ---------------------------------------------------------------- integer intrinsics
def popcount(x):
    x = np.asarray(x).astype(np.uint64)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int32)


def _bits_of(x, width):
    return np.asarray(x).astype(np.uint64) & np.uint64((1 << width) - 1)


def count_leading_zeros(width):
    return lambda x: _clz(x, width)


def _clz(x, width):
    v = _bits_of(x, width)
    out = np.full(v.shape, width, np.int32)
    for bit in range(width):             # the highest set bit wins (bits visited upward)
        out = np.where((v >> np.uint64(bit)) & np.uint64(1) != 0, width - 1 - bit, out)
    return out


def find_first_set(width):
    def fn(x):
        v = _bits_of(x, width)
        out = np.zeros(v.shape, np.int32)
        for bit in reversed(range(width)):   # the lowest set bit wins (bits visited downward)
            out = np.where((v >> np.uint64(bit)) & np.uint64(1) != 0, bit + 1, out)
        return out
    return fn


def bit_reverse(width):
    def fn(x):
        v = _bits_of(x, width)
        out = np.zeros(v.shape, np.uint64)
        for bit in range(width):
            out |= ((v >> np.uint64(bit)) & np.uint64(1)) << np.uint64(width - 1 - bit)
        return out
    return fn


def byte_perm(x, y, s):
    """__byte_perm: byte k of the result is byte (s >> 4k) & 7 of the 8 bytes y:x."""
    both = (_bits_of(y, 32) << np.uint64(32)) | _bits_of(x, 32)
    sel = _bits_of(s, 32)
    out = np.zeros(np.broadcast(both, sel).shape, np.uint64)
    for k in range(4):
        which = (sel >> np.uint64(4 * k)) & np.uint64(7)
        out |= ((both >> (which * np.uint64(8))) & np.uint64(0xFF)) << np.uint64(8 * k)
    return out


def high_product(signed: bool, width: int):
    """The high half of the 2*width-bit product (__mulhi, __umulhi, __mul64hi, __umul64hi)."""
    def fn(a, b):
        def one(x, y):
            return (int(x) * int(y)) >> width
        return np.frompyfunc(one, 2, 1)(a, b)
    return fn


def funnel_shift(left: bool, clamp: bool):
    def fn(lo, hi, shift):
        both = (_bits_of(hi, 32) << np.uint64(32)) | _bits_of(lo, 32)
        n = _bits_of(shift, 32)
        n = np.minimum(n, np.uint64(32)) if clamp else n & np.uint64(31)
        if left:
            return ((both << n) >> np.uint64(32)) & np.uint64(0xFFFFFFFF)
        return (both >> n) & np.uint64(0xFFFFFFFF)
    return fn


# ---------------------------------------------------------------- special functions
def _elementwise(fn):
    def apply(*args):
        return np.asarray(np.frompyfunc(fn, len(args), 1)(*[np.asarray(a, F64) for a in args]), F64)
    return apply


def _gamma_pole(fn):
    """math.lgamma/math.gamma raise at poles and on overflow, where C returns a value: lgamma +inf at the
    poles; tgamma +-inf at zero, NaN at the negative integers, +inf on overflow."""
    def wrapped(x):
        try:
            return fn(x)
        except OverflowError:
            return math.inf
        except ValueError:
            if fn is math.lgamma:
                return math.inf
            return math.copysign(math.inf, x) if x == 0 else math.nan
    return wrapped


def _safe(fn):
    def wrapped(*args):
        try:
            return fn(*args)
        except (ValueError, OverflowError):
            return math.nan
    return wrapped


def _erfinv(y: float) -> float:
    if not -1.0 <= y <= 1.0:
        return math.nan
    if abs(y) == 1.0:
        return math.copysign(math.inf, y)
    a = 0.147                                # Winitzki's start, then Newton on erf
    ln = math.log(1.0 - y * y)
    t = 2.0 / (math.pi * a) + ln / 2.0
    x = math.copysign(math.sqrt(math.sqrt(t * t - ln / a) - t), y)
    for _ in range(4):
        x -= (math.erf(x) - y) / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def _erfcx(x: float) -> float:
    if x < 25.0:
        return math.exp(x * x) * math.erfc(x)
    inv = 1.0 / (x * x)
    return (1.0 - 0.5 * inv + 0.75 * inv * inv) / (x * math.sqrt(math.pi))


_NODES = 256


def _bessel_j(n: int, x: float) -> float:
    """J_n(x) = (1/pi) * integral_0^pi cos(n t - x sin t) dt, by the trapezoid rule (exact for smooth
    periodic integrands once the nodes outnumber |x| + n)."""
    t = np.linspace(0.0, math.pi, _NODES + 1)
    f = np.cos(n * t - x * np.sin(t))
    return float((f[0] / 2 + f[1:-1].sum() + f[-1] / 2) * (math.pi / _NODES) / math.pi)


def _simpson(f: np.ndarray, width: float) -> float:
    """Simpson's rule over an even number of intervals of `width`."""
    return float((f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()) * width / 3)


def _bessel_y(n: int, x: float) -> float:
    """Y_n(x) = (1/pi) integral_0^pi sin(x sin t - n t) dt
              - (1/pi) integral_0^inf (e^(n u) + (-1)^n e^(-n u)) e^(-x sinh u) du, by Simpson's rule."""
    if x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    nodes = 8 * _NODES
    t = np.linspace(0.0, math.pi, nodes + 1)
    first = _simpson(np.sin(x * np.sin(t) - n * t), math.pi / nodes)
    end = math.asinh(60.0 / x + 1.0) + 1.0
    u = np.linspace(0.0, end, nodes + 1)
    second = _simpson((np.exp(n * u) + (-1) ** n * np.exp(-n * u)) * np.exp(-x * np.sinh(u)), end / nodes)
    return (first - second) / math.pi


remainder = _elementwise(_safe(math.remainder))
erfinv = _elementwise(_erfinv)
erfcinv = _elementwise(lambda y: _erfinv(1.0 - y))
erfcx = _elementwise(_erfcx)
normcdfinv = _elementwise(lambda p: -math.sqrt(2.0) * _erfinv(1.0 - 2.0 * p))
erf = _elementwise(math.erf)
erfc = _elementwise(math.erfc)
lgamma = _elementwise(_gamma_pole(math.lgamma))
tgamma = _elementwise(_gamma_pole(math.gamma))
j0, j1 = _elementwise(lambda x: _bessel_j(0, x)), _elementwise(lambda x: _bessel_j(1, x))
y0, y1 = _elementwise(lambda x: _bessel_y(0, x)), _elementwise(lambda x: _bessel_y(1, x))
jn = _elementwise(lambda n, x: _bessel_j(int(n), x))
yn = _elementwise(lambda n, x: _bessel_y(int(n), x))


def round_half_away(x):
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)).astype(np.asarray(x).dtype)


def remquo(x, y):
    """remainder(x, y) and the low 3 bits of the quotient's magnitude, with its sign."""
    x64, y64 = np.asarray(x, F64), np.asarray(y, F64)
    r = remainder(x64, y64)
    with np.errstate(all="ignore"):
        q = np.rint((x64 - r) / y64)
    quo = (np.abs(np.nan_to_num(q)).astype(np.int64) & 7) * np.where(np.sign(x64) * np.sign(y64) < 0, -1, 1)
    return r, quo.astype(np.int32)
