"""The C and CUDA environment a kernel sees, as data: one table per kind.

- The types (scalars, aliases, vector and half types) are in gpgpu_opt.cuda_types, the one table every floor
  reads.
- `CONSTANTS`: the object-like macros of <math.h>, <limits.h>, <float.h>, <stdint.h> and CUDA's
  <math_constants.h>, by header. A modelled header is not expanded (see gpgpu_opt.frontend.preprocess):
  including it defines its macros from here. Which are visible without an `#include` follows nvcc 13
  (asked, not assumed): its implicit `cuda_runtime.h` brings <cmath> and <climits> (`M_PI`, `INFINITY`,
  `INT_MAX` compile in a `.cu` with no include), but not <cfloat> (`FLT_MAX`), nor <cstdint>'s limits
  (`INT32_MAX`), nor <math_constants.h> (`CUDART_PI_F`).
- The CUDA Math API and intrinsics are in gpgpu_opt.frontend.math_api.

The parser's prelude (gpgpu_opt.frontend.cuda_c) and the emulator (gpgpu_opt.emulator) are generated from
these tables. Types are declared for every kernel whatever it includes (a program nvcc rejects for a
missing include fails there, not here); macros only where nvcc would see them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Constant:
    name: str
    text: str            # the macro's definition, as C text nvcc accepts in device code
    header: str          # the canonical header that defines it


#: C++'s boolean literals: the C99 parser sees them as names, declared `const bool` by the prelude.
BOOL_LITERALS: dict[str, int] = {"true": 1, "false": 0}


def _limits() -> tuple[Constant, ...]:
    h = "limits.h"
    return (
        Constant("CHAR_BIT", "8", h), Constant("SCHAR_MIN", "(-128)", h), Constant("SCHAR_MAX", "127", h),
        Constant("UCHAR_MAX", "255", h), Constant("CHAR_MIN", "(-128)", h), Constant("CHAR_MAX", "127", h),
        Constant("SHRT_MIN", "(-32768)", h), Constant("SHRT_MAX", "32767", h), Constant("USHRT_MAX", "65535", h),
        Constant("INT_MIN", "(-2147483647 - 1)", h), Constant("INT_MAX", "2147483647", h),
        Constant("UINT_MAX", "4294967295U", h),
        Constant("LONG_MIN", "(-9223372036854775807L - 1L)", h), Constant("LONG_MAX", "9223372036854775807L", h),
        Constant("ULONG_MAX", "18446744073709551615UL", h),
        Constant("LLONG_MIN", "(-9223372036854775807LL - 1LL)", h),
        Constant("LLONG_MAX", "9223372036854775807LL", h), Constant("ULLONG_MAX", "18446744073709551615ULL", h),
    )


def _stdint() -> tuple[Constant, ...]:
    h = "stdint.h"
    out = []
    for bits, smax, suffix in ((8, "127", ""), (16, "32767", ""), (32, "2147483647", ""),
                               (64, "9223372036854775807", "L")):
        out += [Constant(f"INT{bits}_MAX", f"{smax}{suffix}", h),
                Constant(f"INT{bits}_MIN", f"(-{smax}{suffix} - 1{suffix})", h),
                Constant(f"UINT{bits}_MAX", f"{2 ** bits - 1}U{suffix}" if bits >= 32 else str(2 ** bits - 1), h)]
    out += [Constant("SIZE_MAX", "18446744073709551615UL", h), Constant("INTPTR_MAX", "9223372036854775807L", h),
            Constant("INTPTR_MIN", "(-9223372036854775807L - 1L)", h),
            Constant("UINTPTR_MAX", "18446744073709551615UL", h), Constant("PTRDIFF_MAX", "9223372036854775807L", h),
            Constant("PTRDIFF_MIN", "(-9223372036854775807L - 1L)", h)]
    return tuple(out)


def _float_h() -> tuple[Constant, ...]:
    h = "float.h"
    return (
        Constant("FLT_RADIX", "2", h), Constant("FLT_MANT_DIG", "24", h), Constant("DBL_MANT_DIG", "53", h),
        Constant("FLT_DIG", "6", h), Constant("DBL_DIG", "15", h),
        Constant("FLT_MIN_EXP", "(-125)", h), Constant("FLT_MAX_EXP", "128", h),
        Constant("DBL_MIN_EXP", "(-1021)", h), Constant("DBL_MAX_EXP", "1024", h),
        Constant("FLT_MAX", "3.40282346638528859811704183484516925e+38F", h),
        Constant("FLT_MIN", "1.17549435082228750796873653722224568e-38F", h),
        Constant("FLT_EPSILON", "1.19209289550781250000000000000000000e-7F", h),
        Constant("FLT_TRUE_MIN", "1.40129846432481707092372958328991613e-45F", h),
        Constant("DBL_MAX", "1.79769313486231570814527423731704357e+308", h),
        Constant("DBL_MIN", "2.22507385850720138309023271733240406e-308", h),
        Constant("DBL_EPSILON", "2.22044604925031308084726333618164062e-16", h),
        Constant("DBL_TRUE_MIN", "4.94065645841246544176568792868221372e-324", h),
    )


_INF_F = "__int_as_float(0x7f800000)"
_INF = "__longlong_as_double(0x7ff0000000000000LL)"


def _math_h() -> tuple[Constant, ...]:
    h = "math.h"
    values = {"M_E": "2.7182818284590452354", "M_LOG2E": "1.4426950408889634074", "M_LOG10E": "0.43429448190325182765",
              "M_LN2": "0.69314718055994530942", "M_LN10": "2.30258509299404568402", "M_PI": "3.14159265358979323846",
              "M_PI_2": "1.57079632679489661923", "M_PI_4": "0.78539816339744830962",
              "M_1_PI": "0.31830988618379067154",
              "M_2_PI": "0.63661977236758134308", "M_2_SQRTPI": "1.12837916709551257390",
              "M_SQRT2": "1.41421356237309504880", "M_SQRT1_2": "0.70710678118654752440"}
    return tuple(Constant(n, v, h) for n, v in values.items()) + (
        Constant("INFINITY", _INF_F, h), Constant("NAN", "__int_as_float(0x7fffffff)", h),
        Constant("HUGE_VALF", _INF_F, h), Constant("HUGE_VAL", _INF, h),
    )


def _math_constants_h() -> tuple[Constant, ...]:
    h = "math_constants.h"
    floats = {"PI": "3.141592654F", "PIO2": "1.570796327F", "PIO4": "0.785398163F", "2_OVER_PI": "0.636619772F",
              "SQRT_TWO": "1.414213562F", "SQRT_HALF": "0.707106781F", "THIRD": "0.333333333F",
              "L2E": "1.442695041F", "L2T": "3.321928094F", "LG2": "0.301029996F", "LGE": "0.434294482F",
              "LN2": "0.693147181F", "LNT": "2.302585093F", "ZERO": "0.0F", "ONE": "1.0F",
              "INF": _INF_F, "NAN": "__int_as_float(0x7fffffffU)", "MAX_NORMAL": "__int_as_float(0x7f7fffffU)",
              "MIN_DENORM": "__int_as_float(0x00000001U)", "NEG_ZERO": "__int_as_float(0x80000000U)"}
    doubles = {"PI": "3.1415926535897931e+0", "PIO2": "1.5707963267948966e+0", "PIO4": "7.8539816339744828e-1",
               "2_OVER_PI": "6.3661977236758138e-1", "SQRT_TWO": "1.4142135623730951e+0",
               "SQRT_HALF": "7.0710678118654757e-1", "SQRT_2PI": "2.5066282746310007e+0",
               "SQRT_2OPI": "7.9788456080286536e-1", "SQRT_PIO2": "1.2533141373155003e+0",
               "THIRD": "3.3333333333333333e-1", "L2E": "1.4426950408889634e+0", "LN2": "6.9314718055994529e-1",
               "LNT": "2.3025850929940459e+0", "ZERO": "0.0", "ONE": "1.0", "INF": _INF,
               "NAN": "__longlong_as_double(0xfff8000000000000ULL)",
               "NEG_ZERO": "__longlong_as_double(0x8000000000000000ULL)"}
    return tuple(Constant(f"CUDART_{n}_F", v, h) for n, v in floats.items()) + \
        tuple(Constant(f"CUDART_{n}", v, h) for n, v in doubles.items())


CONSTANTS: tuple[Constant, ...] = _limits() + _stdint() + _float_h() + _math_h() + _math_constants_h()

#: The headers an `#include` may name, by the canonical header whose constants they bring.
HEADERS: dict[str, str] = {"math.h": "math.h", "cmath": "math.h", "limits.h": "limits.h", "climits": "limits.h",
                           "float.h": "float.h", "cfloat": "float.h", "stdint.h": "stdint.h",
                           "cstdint": "stdint.h", "math_constants.h": "math_constants.h"}

#: What nvcc's implicit `cuda_runtime.h` makes visible in every .cu file (see the module doc).
IMPLICIT_HEADERS: frozenset[str] = frozenset({"math.h", "limits.h"})


def header_macros(include_name: str) -> dict[str, str]:
    """The macros an `#include <include_name>` (or "include_name") of a modelled header defines."""
    header = HEADERS.get(include_name.replace("\\", "/").rsplit("/", 1)[-1])
    return {c.name: c.text for c in CONSTANTS if c.header == header}


def implicit_macros() -> dict[str, str]:
    """The macros nvcc defines in device code of a file that includes nothing."""
    return {c.name: c.text for c in CONSTANTS if c.header in IMPLICIT_HEADERS}


def define_modelled_macros(preprocessor, include_name: str | None = None) -> None:
    """Define, in a pcpp Preprocessor, the macros of a modelled header (None: the implicit ones), unless the
    program defined the name itself first (as a real header guarded by #ifndef would leave it). They are
    marked `modelled`: the macros the preprocessor reports are the program's and -D's."""
    macros = implicit_macros() if include_name is None else header_macros(include_name)
    for name, text in macros.items():
        if name not in preprocessor.macros:
            preprocessor.define(f"{name} {text}")
            preprocessor.macros[name].modelled = True   # the environment's, not the program's
