"""The half precision part of the CUDA Math API (<cuda_fp16.h>, <cuda_bf16.h>), in gpgpu_opt.frontend.math_api's
table format. Arithmetic is exact: the hardware rounds each half or bfloat16 result to nearest even, and
the emulator computes it in float32 then rounds once (24 >= 2 * 11 + 2 bits, so that rounding is exact).
A `__half2` value is a tuple (low, high); the emulator rounds every result to the return type."""
from __future__ import annotations

import numpy as np

from gpgpu_opt.frontend.math_api import Function

_F32 = np.float32


def _f(x):
    return np.asarray(x, _F32)


def _pairwise(op):
    return lambda a, b: (op(_f(a[0]), _f(b[0])), op(_f(a[1]), _f(b[1])))


def _pairwise3(op):
    return lambda a, b, c: tuple(op(_f(a[k]), _f(b[k]), _f(c[k])) for k in (0, 1))


def _fma(a, b, c):   # one rounding of the exact a * b + c: a * b is exact in float32, the sum in double
    return (_f(a).astype(np.float64) * _f(b) + _f(c)).astype(np.float64)


def _scalar_functions(h: str, header: str, prefix: str) -> list[Function]:
    """What <cuda_fp16.h> and <cuda_bf16.h> both provide, for the scalar type h."""
    cmp = {"__heq": np.equal, "__hne": np.not_equal, "__hlt": np.less, "__hle": np.less_equal,
           "__hgt": np.greater, "__hge": np.greater_equal}
    out = [Function("__hadd", (h, h), h, lambda a, b: _f(a) + _f(b), header=header),
           Function("__hsub", (h, h), h, lambda a, b: _f(a) - _f(b), header=header),
           Function("__hmul", (h, h), h, lambda a, b: _f(a) * _f(b), header=header),
           Function("__hdiv", (h, h), h, lambda a, b: _f(a) / _f(b), header=header),
           Function("__hfma", (h, h, h), h, _fma, header=header),
           Function("__hneg", (h,), h, lambda a: -_f(a), header=header),
           Function("__habs", (h,), h, lambda a: np.abs(_f(a)), header=header),
           Function("__hmax", (h, h), h, lambda a, b: np.fmax(_f(a), _f(b)), header=header),
           Function("__hmin", (h, h), h, lambda a, b: np.fmin(_f(a), _f(b)), header=header),
           Function("__hisnan", (h,), "bool", lambda a: np.isnan(_f(a)), header=header),
           Function("hsqrt", (h,), h, lambda a: np.sqrt(_f(a)), header=header),
           Function("hrsqrt", (h,), h, lambda a: 1 / np.sqrt(_f(a)), False, header=header),
           Function("hexp", (h,), h, lambda a: np.exp(_f(a)), False, header=header),
           Function("hlog", (h,), h, lambda a: np.log(_f(a)), False, header=header),
           Function("hsin", (h,), h, lambda a: np.sin(_f(a)), False, header=header),
           Function("hcos", (h,), h, lambda a: np.cos(_f(a)), False, header=header),
           Function("hfloor", (h,), h, lambda a: np.floor(_f(a)), header=header),
           Function("hceil", (h,), h, lambda a: np.ceil(_f(a)), header=header),
           Function("htrunc", (h,), h, lambda a: np.trunc(_f(a)), header=header)]
    out += [Function(name, (h, h), "bool", lambda a, b, op=op: op(_f(a), _f(b)), header=header)
            for name, op in cmp.items()]
    out += [Function(f"__float2{prefix}", ("float",), h, _f, header=header),
            Function(f"__float2{prefix}_rn", ("float",), h, _f, header=header),
            Function(f"__double2{prefix}", ("double",), h, lambda x: np.asarray(x, np.float64), header=header),
            Function(f"__{prefix}2float", (h,), "float", _f, header=header),
            Function(f"__int2{prefix}_rn", ("int",), h, lambda x: np.asarray(x, np.float64), header=header)]
    return out


def _pair_functions(h: str, h2: str, header: str, prefix: str) -> list[Function]:
    """The two-lane versions (`__hadd2`...), packing and unpacking."""
    return [
        Function("__hadd2", (h2, h2), h2, _pairwise(np.add), header=header),
        Function("__hsub2", (h2, h2), h2, _pairwise(np.subtract), header=header),
        Function("__hmul2", (h2, h2), h2, _pairwise(np.multiply), header=header),
        Function("__h2div", (h2, h2), h2, _pairwise(np.divide), header=header),
        Function("__hfma2", (h2, h2, h2), h2, _pairwise3(_fma), header=header),
        Function("__hneg2", (h2,), h2, lambda a: (-_f(a[0]), -_f(a[1])), header=header),
        Function("__habs2", (h2,), h2, lambda a: (np.abs(_f(a[0])), np.abs(_f(a[1]))), header=header),
        Function("__hmax2", (h2, h2), h2, _pairwise(np.fmax), header=header),
        Function("__hmin2", (h2, h2), h2, _pairwise(np.fmin), header=header),
        Function("h2sqrt", (h2,), h2, lambda a: (np.sqrt(_f(a[0])), np.sqrt(_f(a[1]))), header=header),
        Function(f"__floats2{prefix}2_rn", ("float", "float"), h2, lambda a, b: (a, b), header=header),
        Function(f"__float2{prefix}2_rn", ("float",), h2, lambda a: (a, a), header=header),
        Function(f"__float22{prefix}2_rn", ("float2",), h2, lambda a: a, header=header),
        Function(f"__{prefix}22float2", (h2,), "float2", lambda a: a, header=header),
        Function(f"__halves2{prefix}2" if prefix == "half" else "__halves2bfloat162", (h, h), h2,
                 lambda a, b: (a, b), header=header),
        Function(f"__low2{prefix}", (h2,), h, lambda a: a[0], header=header),
        Function(f"__high2{prefix}", (h2,), h, lambda a: a[1], header=header),
        Function("__low2float", (h2,), "float", lambda a: a[0], header=header),
        Function("__high2float", (h2,), "float", lambda a: a[1], header=header),
        Function(f"__low2{prefix}2", (h2,), h2, lambda a: (a[0], a[0]), header=header),
        Function(f"__high2{prefix}2", (h2,), h2, lambda a: (a[1], a[1]), header=header),
        Function(f"__lows2{prefix}2", (h2, h2), h2, lambda a, b: (a[0], b[0]), header=header),
        Function(f"__highs2{prefix}2", (h2, h2), h2, lambda a, b: (a[1], b[1]), header=header),
        Function("__lowhigh2highlow", (h2,), h2, lambda a: (a[1], a[0]), header=header),
        Function("make_half2" if prefix == "half" else "make_bfloat162", (h, h), h2, lambda a, b: (a, b),
                 header=header),
    ]


def _bit_functions() -> list[Function]:
    def view(dtype):
        return lambda x: np.asarray(x).view(dtype)
    h, b = "cuda_fp16.h", "cuda_bf16.h"
    return [Function("__half_as_short", ("__half",), "short", view(np.int16), header=h),
            Function("__half_as_ushort", ("__half",), "unsigned short", view(np.uint16), header=h),
            Function("__short_as_half", ("short",), "__half", view(np.float16), header=h),
            Function("__ushort_as_half", ("unsigned short",), "__half", view(np.float16), header=h),
            Function("__half2int_rn", ("__half",), "int", lambda x: np.rint(_f(x)), header=h),
            Function("__half2int_rz", ("__half",), "int", lambda x: np.trunc(_f(x)), header=h),
            Function("__int2half_rz", ("int",), "__half", lambda x: np.asarray(x, np.float64), False, header=h),
            # bfloat16 is held as the float32 it rounds to: its bits are the float's upper half
            Function("__bfloat16_as_ushort", ("__nv_bfloat16",), "unsigned short",
                     lambda x: (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16), header=b),
            Function("__ushort_as_bfloat16", ("unsigned short",), "__nv_bfloat16",
                     lambda x: (np.asarray(x).astype(np.uint32) << 16).view(np.float32), header=b)]


HALF_FUNCTIONS: tuple[Function, ...] = tuple(
    _scalar_functions("__half", "cuda_fp16.h", "half")
    + _pair_functions("__half", "__half2", "cuda_fp16.h", "half")
    + _scalar_functions("__nv_bfloat16", "cuda_bf16.h", "bfloat16")
    + _pair_functions("__nv_bfloat16", "__nv_bfloat162", "cuda_bf16.h", "bfloat16")
    + _bit_functions())
