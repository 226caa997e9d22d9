"""The emulator on the C and CUDA environment's tables: half and bfloat16 arithmetic, rounding-mode
intrinsics against exact rational arithmetic, out-parameters, integer intrinsics, cache-hinted loads and
stores, saturating conversions, C++'s bool literals, and the header constants."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from gpgpu_opt.emulator import UnsupportedConstruct, run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.frontend.math_api import BY_NAME
from gpgpu_opt.frontend.math_impl import to_bfloat16

RNG = np.random.default_rng(20)


@pytest.fixture
def cu(tmp_path):
    counter = [0]

    def load(src: str):
        counter[0] += 1
        path = tmp_path / f"env{counter[0]}.cu"
        path.write_text(src)
        return load_program(str(path))

    return load


def run(prog, threads, **args):
    return run_kernel(prog.kernels[0], ((threads + 63) // 64,), (64,), args, device_functions=prog.device_functions)


# ------------------------------------------------------------------------------------------------ half types
def test_half_arithmetic_rounds_each_result_to_half(cu):
    prog = cu("""
#include <cuda_fp16.h>
__global__ void h(__half *o, const __half *a, const __half *b, float *f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        o[i] = __hadd(a[i], b[i]) * a[i];
        f[i] = __half2float(__hfma(a[i], b[i], __float2half(0.1f)));
    }
}
""")
    n = 200
    a = RNG.uniform(-4, 4, n).astype(np.float16)
    b = RNG.uniform(-4, 4, n).astype(np.float16)
    o, f = np.zeros(n, np.float16), np.zeros(n, np.float32)
    run(prog, n, o=o, a=a, b=b, f=f, n=n)
    assert np.array_equal(o, (a + b) * a)            # numpy float16: each operation rounded to half
    exact = a.astype(np.float64) * b + np.float64(np.float16(0.1))
    assert np.array_equal(f, exact.astype(np.float16).astype(np.float32))   # fma: one rounding


def test_half2_lanes_pack_and_unpack(cu):
    prog = cu("""
#include <cuda_fp16.h>
__global__ void h2(half2 *y, const half2 *x, float *lo, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __hfma2(__float2half2_rn(a), x[i], y[i]);
        lo[i] = __low2float(y[i]) - __high2float(__lowhigh2highlow(x[i]));
    }
}
""")
    n = 50
    x = RNG.uniform(-2, 2, 2 * n).astype(np.float16)
    y = RNG.uniform(-2, 2, 2 * n).astype(np.float16)
    y0 = y.copy()
    lo = np.zeros(n, np.float32)
    run(prog, n, y=y, x=x, lo=lo, a=1.5, n=n)
    expect = (np.float64(1.5) * x + y0).astype(np.float16)
    assert np.array_equal(y, expect)
    assert np.array_equal(lo, expect[0::2].astype(np.float32) - x[0::2].astype(np.float32))


def test_half_with_float_operands_is_refused_as_nvcc_does(cu):
    prog = cu("""
#include <cuda_fp16.h>
__global__ void mixed(__half *o, const __half *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = a[i] * 2.0f;
}
""")
    with pytest.raises(UnsupportedConstruct, match="__half and float"):
        run(prog, 4, o=np.zeros(4, np.float16), a=np.ones(4, np.float16), n=4)


def test_bfloat16_rounds_to_nearest_even_once():
    one = 1.0
    assert to_bfloat16(np.float32(one + 2 ** -8)) == one                   # a tie: to the even neighbour
    assert to_bfloat16(np.float32(one + 3 * 2 ** -8)) == one + 2 ** -6     # a tie: up to the even one
    assert to_bfloat16(np.float32(one + 2 ** -8 + 2 ** -20)) == one + 2 ** -7
    # from a double just above a tie: rounding to float first would land on the tie and go down
    assert to_bfloat16(np.float64(one + 2 ** -8 + 2 ** -40)) == one + 2 ** -7
    assert np.isnan(to_bfloat16(np.float32(np.nan)))
    assert to_bfloat16(np.float32(3.4e38)) == np.inf


def test_bfloat16_kernel(cu):
    prog = cu("""
#include <cuda_bf16.h>
__global__ void bf(__nv_bfloat16 *o, const float *a, float *back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        o[i] = __hmul(__float2bfloat16(a[i]), __float2bfloat16(a[i]));
        back[i] = __bfloat162float(o[i]);
    }
}
""")
    n = 100
    a = RNG.uniform(-3, 3, n).astype(np.float32)
    o, back = np.zeros(n, np.float32), np.zeros(n, np.float32)
    run(prog, n, o=o, a=a, back=back, n=n)
    r = to_bfloat16(a)
    assert np.array_equal(back, to_bfloat16(r * r))
    assert np.array_equal(o, back)


# ------------------------------------------------------------------------------------------------ rounding
def _directed(op, mode, x, y):
    prog_text = {"add": "__fadd", "mul": "__fmul", "div": "__fdiv"}[op] + f"_{mode}"
    return BY_NAME[prog_text][0].impl(np.float32(x), np.float32(y))


def _exact(op, x, y):
    fx, fy = Fraction(float(x)), Fraction(float(y))
    return {"add": fx + fy, "mul": fx * fy, "div": fx / fy}[op]


@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_directed_rounding_brackets_the_exact_value(op):
    xs = RNG.uniform(-10, 10, 60).astype(np.float32) * np.float32(2.0) ** RNG.integers(-20, 20, 60)
    ys = RNG.uniform(-10, 10, 60).astype(np.float32)
    for x, y in zip(xs, ys):
        exact = _exact(op, x, y)
        up, down, zero = (np.float32(_directed(op, m, x, y)) for m in ("ru", "rd", "rz"))
        assert Fraction(float(down)) <= exact <= Fraction(float(up))
        assert up == down if Fraction(float(up)) == exact else np.nextafter(down, np.float32(np.inf)) == up
        assert zero == (down if exact >= 0 else up)
        assert np.float32(_directed(op, "rn", x, y)) == np.float32(float(exact))


def test_rounding_intrinsics_in_a_kernel(cu):
    prog = cu("""
__global__ void r(float *o, double *d, int *k) {
    o[0] = __fadd_rz(1.0f, 1e-9f);  o[1] = __fadd_ru(1.0f, 1e-9f);  o[2] = __fsqrt_rd(2.0f);
    o[3] = __fsqrt_ru(2.0f);        o[4] = __fmaf_rz(3.0f, 1.0f / 3.0f, -1.0f);  o[5] = __frcp_ru(3.0f);
    d[0] = __dadd_ru(1.0, 1e-20);   d[1] = __ddiv_rd(1.0, 3.0);  d[2] = __double2float_rz(0.1);
    k[0] = __float2int_rn(3e9f);    k[1] = __float2int_rz(-2.7f);  k[2] = __float2int_rn(2.5f);
    k[3] = __float2int_rd(-2.5f);   k[4] = __float2uint_rn(-5.0f);
}
""")
    o, d, k = np.zeros(6, np.float32), np.zeros(3, np.float64), np.zeros(5, np.int32)
    run_kernel(prog.kernels[0], (1,), (1,), dict(o=o, d=d, k=k))
    one_up = np.nextafter(np.float32(1), np.float32(2))
    assert o[0] == 1.0 and o[1] == one_up
    assert Fraction(float(o[2])) ** 2 < 2 < Fraction(float(o[3])) ** 2 and np.nextafter(o[2], o[3]) == o[3]
    third = np.float32(1) / np.float32(3)
    assert o[4] == np.float32(float(Fraction(3) * Fraction(float(third)) - 1)) or o[4] < 0
    assert Fraction(float(o[5])) > Fraction(1, 3) > Fraction(float(np.nextafter(o[5], np.float32(0))))
    assert d[0] == np.nextafter(1.0, 2.0) and Fraction(d[1]) < Fraction(1, 3)
    assert d[2] == float(np.float32(0.1)) or Fraction(d[2]) < Fraction(1, 10)
    assert list(k) == [2147483647, -2, 2, -3, 0]     # saturating, round half to even


# ------------------------------------------------------------------------------------------------ the Math API
def test_out_parameters_store_into_locals_and_arrays(cu):
    prog = cu("""
__global__ void outs(const float *x, float *s, float *c, float *m, int *e, float *whole, int *q, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sv, cv;
        int ev;
        sincosf(x[i], &sv, &cv);
        s[i] = sv;
        c[i] = cv;
        m[i] = frexpf(x[i], &ev);
        e[i] = ev;
        remquof(x[i], 0.75f, &q[i]);
        modff(x[i], &whole[i]);
    }
}
""")
    n = 90
    x = RNG.uniform(-20, 20, n).astype(np.float32)
    s, c, m, whole = (np.zeros(n, np.float32) for _ in range(4))
    e, q = np.zeros(n, np.int32), np.zeros(n, np.int32)
    run(prog, n, x=x, s=s, c=c, m=m, e=e, whole=whole, q=q, n=n)
    assert np.array_equal(s, np.sin(x)) and np.array_equal(c, np.cos(x))
    mant, ex = np.frexp(x)
    assert np.array_equal(m, mant) and np.array_equal(e, ex)
    assert np.array_equal(whole, np.trunc(x))
    for v, got in zip(x.astype(float), q):
        quotient = round((v - math.remainder(v, 0.75)) / 0.75)
        assert got == (abs(quotient) & 7) * (1 if v >= 0 else -1)


def test_integer_intrinsics(cu):
    prog = cu("""
__global__ void ints(const unsigned int *u, const int *v, int *r, unsigned int *ru, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        r[6 * i] = __popc(u[i]);      r[6 * i + 1] = __clz(v[i]);     r[6 * i + 2] = __ffs(v[i]);
        r[6 * i + 3] = __mulhi(v[i], v[i] + 7);  r[6 * i + 4] = __hadd(v[i], 2147483647);
        r[6 * i + 5] = __rhadd(v[i], -3);
        ru[3 * i] = __brev(u[i]);  ru[3 * i + 1] = __byte_perm(u[i], 0x76543210u, 0x4152u);
        ru[3 * i + 2] = __umulhi(u[i], u[i]) + __usad(u[i], 5u, 1u);
    }
}
""")
    n = 70
    u = RNG.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    v = RNG.integers(-2 ** 31, 2 ** 31 - 8, n, dtype=np.int64).astype(np.int32)
    v[:3] = [0, -1, 1]
    r, ru = np.zeros(6 * n, np.int32), np.zeros(3 * n, np.uint32)
    run(prog, n, u=u, v=v, r=r, ru=ru, n=n)
    for k in range(n):
        a, b = int(u[k]), int(v[k])
        ub = b & 0xFFFFFFFF
        assert r[6 * k] == bin(a).count("1")
        assert r[6 * k + 1] == 32 - ub.bit_length()
        assert r[6 * k + 2] == ((ub & -ub).bit_length() if ub else 0)
        assert r[6 * k + 3] == (b * (b + 7)) >> 32
        assert r[6 * k + 4] == (b + 2147483647) >> 1 and r[6 * k + 5] == (b - 3 + 1) >> 1
        assert ru[3 * k] == int(f"{a:032b}"[::-1], 2)
        both = (0x76543210 << 32) | a
        assert ru[3 * k + 1] == sum(((both >> (8 * ((0x4152 >> (4 * j)) & 7))) & 0xFF) << (8 * j) for j in range(4))
        assert ru[3 * k + 2] == (((a * a) >> 32) + abs(a - 5) + 1) & 0xFFFFFFFF


def test_cache_hinted_loads_and_stores(cu):
    prog = cu("""
__global__ void hints(float *o, const float *a, const float4 *v, float *w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __stcs(&o[i], __ldcs(&a[i]) * 2.0f + __ldg(&a[i]));
        float4 q = __ldg(&v[i]);
        __stwt(&w[i], q.x + q.w + __ldcg(&a[i]) + __ldlu(&a[i]) + __ldcv(&a[i]) + __ldca(&a[i]));
    }
}
""")
    n = 40
    a = RNG.uniform(-1, 1, n).astype(np.float32)
    v = RNG.uniform(-1, 1, 4 * n).astype(np.float32)
    o, w = np.zeros(n, np.float32), np.zeros(n, np.float32)
    stats = run(prog, n, o=o, a=a, v=v, w=w, n=n)
    assert np.array_equal(o, a * np.float32(2) + a)
    assert np.array_equal(w, v[0::4] + v[3::4] + a + a + a + a)
    assert stats.global_stores == 2 * n


def test_overloads_follow_the_argument_types(cu):
    prog = cu("""
__global__ void ov(const float *x, float *f, double *d, unsigned int *u, int *k) {
    int i = threadIdx.x;
    f[i] = sin(x[i]);              // C++'s sin(float): single precision
    d[i] = sin((double)x[i]);
    u[i] = min(-1, 3u);            // int and unsigned: unsigned
    k[i] = abs(-7) + max(2, 5) + (int)fmaxf(1.0f, 2.5f);
}
""")
    x = RNG.uniform(-3, 3, 8).astype(np.float32)
    f, d, u, k = np.zeros(8, np.float32), np.zeros(8), np.zeros(8, np.uint32), np.zeros(8, np.int32)
    run_kernel(prog.kernels[0], (1,), (8,), dict(x=x, f=f, d=d, u=u, k=k))
    assert np.array_equal(f, np.sin(x)) and np.array_equal(d, np.sin(x.astype(np.float64)))
    assert np.all(u == 3) and np.all(k == 7 + 5 + 2)


def test_special_functions_close_to_their_values(cu):
    prog = cu("""
__global__ void sp(const float *x, float *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        o[8 * i] = erfinvf(x[i]);        o[8 * i + 1] = normcdff(x[i]);   o[8 * i + 2] = lgammaf(x[i] + 2.0f);
        o[8 * i + 3] = tgammaf(x[i] + 2.0f);  o[8 * i + 4] = j0f(x[i]);  o[8 * i + 5] = y1f(x[i] + 1.0f);
        o[8 * i + 6] = rcbrtf(x[i] + 2.0f);   o[8 * i + 7] = norm3df(x[i], 2.0f, 3.0f);
    }
}
""")
    x = np.array([-0.9, -0.5, 0.0, 0.3, 0.75, 0.99], np.float32)
    o = np.zeros(8 * len(x), np.float32)
    run(prog, len(x), x=x, o=o, n=len(x))
    o = o.reshape(-1, 8)
    from math import erf, gamma, lgamma, sqrt
    for k, v in enumerate(x.astype(float)):
        assert erf(o[k, 0]) == pytest.approx(v, abs=1e-6)
        assert o[k, 1] == pytest.approx(0.5 * (1 + erf(v / sqrt(2))), rel=1e-6)
        assert o[k, 2] == pytest.approx(lgamma(v + 2), rel=1e-5, abs=1e-6)
        assert o[k, 3] == pytest.approx(gamma(v + 2), rel=1e-6)
        assert o[k, 6] == pytest.approx((v + 2) ** (-1 / 3), rel=1e-6)
        assert o[k, 7] == pytest.approx(sqrt(v * v + 13), rel=1e-6)
    # J0 and Y1 at tabulated points
    assert o[2, 4] == 1.0
    assert o[2, 5] == pytest.approx(-0.7812128213, rel=1e-5)   # Y1(1)
    assert o[4, 4] == pytest.approx(0.8642422751666485, rel=1e-6)       # J0(0.75)


def test_bool_literals_and_header_constants(cu):
    prog = cu("""
#include <cfloat>
#include <math_constants.h>
__global__ void consts(float *o, bool *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        bool odd = (i & 1) ? true : false;
        b[i] = odd;
        o[i] = odd ? (float)M_PI : (i == 0 ? INFINITY : (i == 2 ? FLT_MAX : CUDART_PI_F + (float)(INT_MIN < 0)));
    }
}
""")
    n = 6
    o, b = np.zeros(n, np.float32), np.zeros(n, np.bool_)
    run(prog, n, o=o, b=b, n=n)
    assert list(b) == [False, True] * 3
    assert o[1] == np.float32(np.pi) and o[0] == np.inf and o[2] == np.finfo(np.float32).max
    assert o[4] == np.float32(3.141592654) + 1


def test_unknown_function_is_not_emulated(cu):
    """A function the Math API lacks never reaches the emulator: its kernel passes through, unparsed."""
    program = cu("""
extern __device__ float no_such_fn(float);   // defined in another unit (-rdc)
__global__ void k(float *o) { o[threadIdx.x] = no_such_fn(1.0f); }
""")
    assert program.kernels == [] and program.passed_through == ["k"]


def test_complex_numbers_of_cucomplex_and_cufft(cu):
    prog = cu("""
#include <cuComplex.h>
#include <cufft.h>
__global__ void cmul(cufftComplex *o, const cuFloatComplex *a, const cufftComplex *b, cufftReal *re, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        o[i] = cuCaddf(cuCmulf(a[i], b[i]), make_cuFloatComplex(1.0f, -1.0f));
        re[i] = cuCrealf(cuConjf(o[i])) + cuCimagf(o[i]);
    }
}
""")
    n = 30
    a = RNG.uniform(-1, 1, 2 * n).astype(np.float32)
    b = RNG.uniform(-1, 1, 2 * n).astype(np.float32)
    o, re = np.zeros(2 * n, np.float32), np.zeros(n, np.float32)
    run(prog, n, o=o, a=a, b=b, re=re, n=n)
    ar, ai, br, bi = a[0::2], a[1::2], b[0::2], b[1::2]
    assert np.array_equal(o[0::2], (ar * br - ai * bi) + np.float32(1))
    assert np.array_equal(o[1::2], (ar * bi + ai * br) - np.float32(1))
    assert np.array_equal(re, o[0::2] + o[1::2])


def test_the_clock_is_not_emulated(cu):
    prog = cu("""
__global__ void timed(clock_t *t, long long *t64) {
    clock_t start = clock();
    t[threadIdx.x] = start;
    t64[threadIdx.x] = clock64();
}
""")
    with pytest.raises(UnsupportedConstruct, match="clock"):
        run_kernel(prog.kernels[0], (1,), (2,), dict(t=np.zeros(2, np.int64), t64=np.zeros(2, np.int64)))


def test_64_bit_conversions_round_and_saturate_exactly():
    x = np.array([2 ** 62 + 1, -(2 ** 62 + 1), 2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63, 2 ** 62 + 2 ** 38 + 1], np.int64)
    for mode in ("rn", "rz", "ru", "rd"):
        for name in (f"__ll2float_{mode}", f"__ll2double_{mode}"):
            for v, r in zip(x, BY_NAME[name][0].impl(x)):
                exact, got = Fraction(int(v)), Fraction(float(r))
                assert {"rz": abs(got) <= abs(exact), "ru": got >= exact, "rd": got <= exact,
                        "rn": True}[mode], (name, v)
    # one rounding to nearest: through a double first, 2**62 + 2**38 + 1 would land on a tie and go down
    assert BY_NAME["__ll2float_rn"][0].impl(x[5:]) == np.float32(2 ** 62 + 2 ** 39)
    big = np.array([1e30, -1e30, np.nan, 2.5, -3.5], np.float32)
    assert list(BY_NAME["__float2ll_rn"][0].impl(big)) == [2 ** 63 - 1, -2 ** 63, 0, 2, -4]
    assert list(BY_NAME["__float2ull_rz"][0].impl(np.array([1e30, -5, 7.9], np.float32))) == [2 ** 64 - 1, 0, 7]


def test_assert_stops_the_run_where_a_thread_fails_it(cu):
    prog = cu("""
__global__ void checked(const int *a, int *o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        assert(a[i] >= 0);
        o[i] = a[i] + 1;
    }
}
""")
    a, o = np.arange(10, dtype=np.int32), np.zeros(10, np.int32)
    run(prog, 10, a=a, o=o, n=10)
    assert np.array_equal(o, a + 1)
    a[7] = -1
    with pytest.raises(Exception, match=r"assertion failed.*thread \(7"):
        run(prog, 10, a=a, o=o, n=10)


def test_the_bits_of_16_bit_floats(cu):
    """`__half_as_ushort` / `__bfloat16_as_ushort` give the element's IEEE bits (a bfloat16 is the upper half of
    the float32 it rounds to), and the inverse functions read them back."""
    prog = cu("""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void bits(const float *a, unsigned int *h, unsigned int *b, float *back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        h[i] = __half_as_ushort(__float2half(a[i]));
        b[i] = __bfloat16_as_ushort(__float2bfloat16(a[i]));
        back[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short) b[i]));
    }
}
""")
    a = np.array([1.0, -2.0, 0.5, 3.0e-3], np.float32)
    h, b, back = np.zeros(4, np.uint32), np.zeros(4, np.uint32), np.zeros(4, np.float32)
    run(prog, 4, a=a, h=h, b=b, back=back, n=4)
    assert h.tolist() == a.astype(np.float16).view(np.uint16).tolist()
    assert b.tolist()[:3] == [0x3F80, 0xC000, 0x3F00]
    assert np.array_equal(back, to_bfloat16(a))
