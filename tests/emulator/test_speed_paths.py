"""The emulator's and the check's faster paths compute what the slower ones did: the same random inputs,
draw for draw; the same comparison verdicts; the same types' facts; the same values from the operators'
shortcuts; the same errors from the node dispatch tables."""
from __future__ import annotations

import numpy as np
import pytest
from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.emulator import UnsupportedConstruct, run_kernel
from gpgpu_opt.emulator.expressions import Expressions
from gpgpu_opt.emulator.values import CHAR, INT, SCALARS, UINT, VECTOR_TYPES, Value, arith
from gpgpu_opt.frontend import load_program
from gpgpu_opt.check.cases import Case, CaseResult, _compare
from gpgpu_opt.check.inputs import _signed_uniform


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n", [0, 1, 7, 1001])
def test_signed_uniform_draws_what_uniform_times_choice_drew(dtype, n):
    """Bit for bit the values of the formula it replaces, and the generator left where it left it (the
    next arrays of the same case draw the same values too)."""
    old, new = np.random.default_rng(11), np.random.default_rng(11)
    expected = old.uniform(0.5, 1.5, n).astype(dtype) * old.choice([-1, 1], n).astype(dtype)
    got = _signed_uniform(new, n, dtype)
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()
    assert new.integers(0, 1 << 30, 5).tolist() == old.integers(0, 1 << 30, 5).tolist()
    if n > 100:
        assert (got < 0).any() and (got > 0).any()


def _verdict(expected, actual):
    result = CaseResult(Case({}, (1, 1)))
    _compare(result, "a", np.array(expected, np.float32), np.array(actual, np.float32), 1e-4)
    return result.elements, result.max_rel_error, result.mismatches


def test_arrays_equal_but_for_shared_nans_match():
    """Poisoned elements nobody writes are NaN in both: no mismatch, no error, every element counted."""
    assert _verdict([1.0, np.nan, 3.0], [1.0, np.nan, 3.0]) == (3, 0.0, [])


def test_a_nan_on_one_side_only_still_differs():
    elements, _, mismatches = _verdict([1.0, np.nan, 3.0], [1.0, 2.0, 3.0])
    assert elements == 3 and mismatches == ["a: 1 of 3 elements differ; first at [1]: naive np.float32(nan), "
                                            "optimized np.float32(2.0)"]


def test_an_infinity_beside_a_nan_is_judged_as_before():
    """inf - inf is NaN, which the full comparison counts as differing: the shortcut leaves such arrays to it."""
    _, _, mismatches = _verdict([np.inf, np.nan], [np.inf, np.nan])
    assert mismatches and mismatches[0].startswith("a: 1 of 2 elements differ; first at [0]")


def test_a_value_off_by_more_than_the_tolerance_beside_nans_differs():
    _, error, mismatches = _verdict([1.0, np.nan, 3.0], [1.0, np.nan, 3.5])
    assert mismatches and error == pytest.approx(0.5 / 3.0)


def test_type_facts_worked_out_once_are_the_tables():
    for t in cuda_types.SCALAR_TYPES:
        ctype = SCALARS[t.name]
        assert ctype.size == t.size and ctype.is_float == (t.kind == "f")
        assert ctype.is_bfloat16 == (t.dtype == "bfloat16")
    for v in cuda_types.VECTOR_TYPES:
        vec = VECTOR_TYPES[v.name]
        assert vec.size == SCALARS[v.base].size * v.n and vec.align == v.align


@pytest.mark.parametrize("op, a, b, expected", [
    ("+", Value(CHAR, np.int8(100)), Value(CHAR, np.int8(100)), (INT, np.int32(200))),   # promoted first
    ("+", Value(INT, 5), Value(INT, np.int32(3)), (INT, np.int32(8))),                   # a Python int's data
    ("-", Value(UINT, np.uint32(1)), Value(UINT, np.uint32(2)), (UINT, np.uint32(0xFFFFFFFF))),
    ("<", Value(INT, np.array([1, 5], np.int32)), Value(INT, np.int32(3)), (SCALARS["bool"], [True, False])),
    ("*", Value(INT, np.array([70000], np.int64)), Value(INT, np.int32(70000)), (INT, [np.int32(70000 * 70000 - 2**32)])),
])
def test_same_type_operators_cast_what_is_not_yet_their_type(op, a, b, expected):
    """arith's shortcut skips the cast only for data already of the result's dtype."""
    got = arith(op, a, b, None, None)
    t, data = expected
    assert got.ctype is t and np.asarray(got.data).dtype == t.dtype
    assert np.asarray(got.data).tolist() == np.asarray(data).tolist()


def test_an_expression_without_an_evaluator_says_so_every_time():
    """The dispatch table keeps the refusal for a node class it has no evaluator for."""
    for _ in range(2):
        with pytest.raises(UnsupportedConstruct, match=r"^EllipsisParam expression at \?$"):
            Expressions().ev(c_ast.EllipsisParam(), None)


def test_pointer_operators_beside_the_value_shortcut(tmp_path):
    """Binary operators on two values go straight to arith; pointer arithmetic, differences and comparisons
    still take their own paths, in and out of divergent branches (masked loads and stores)."""
    path = tmp_path / "k.cu"
    path.write_text("""
    __global__ void k(const float *a, float *out, int *diff) {
        int t = threadIdx.x;
        const float *p = a + 2;
        const float *q = p - 1;
        diff[t] = (int)(p - a) * 10 + (p != a) + (q < p) * 100;
        if (t % 2 == 0) out[t] = p[t] + *(q + t);
        else out[t] = a[t] * 2.0f;
    }
    """)
    prog = load_program(str(path))
    a = np.arange(10, dtype=np.float32)
    out, diff = np.zeros(6, np.float32), np.zeros(6, np.int32)
    run_kernel(prog.kernels[0], (1,), (6,), {"a": a, "out": out, "diff": diff},
               device_functions=prog.device_functions)
    assert diff.tolist() == [121] * 6
    assert out.tolist() == [a[t + 2] + a[t + 1] if t % 2 == 0 else a[t] * 2 for t in range(6)]


def test_the_passes_that_changed_a_kernel_with_each_text_generated_once(tmp_path):
    """validate's _changed_by renders each version once: the same object twice is unchanged, another
    object with the same text too, and one with other text is a change, wherever it sits in the list."""
    from gpgpu_opt.check.validate import _changed_by

    def kernel(body: str, name: str):
        path = tmp_path / f"{name}.cu"
        path.write_text(f"__global__ void k(float *a) {{ {body} }}\n")
        return load_program(str(path)).kernels[0]

    naive, other = kernel("a[threadIdx.x] = 1.0f;", "n"), kernel("a[threadIdx.x] = 2.0f;", "o")
    same_text = kernel("a[threadIdx.x] = 2.0f;", "s")
    versions = [("naive", naive), ("p1", naive), ("p2", other), ("p3", same_text), ("p4", naive), ("p5", naive)]
    assert _changed_by(versions) == ["p2", "p4"]


@pytest.mark.parametrize("first", [0, 1, 2])
@pytest.mark.parametrize("sizes", [(7, 5, 3), (8, 6, 1000), (1, 2, 9)])
def test_poisoned_arrays_leave_every_other_array_as_it_was(tmp_path, first, sizes):
    """make_arguments moves the generator past an array the caller fills with NaN: the arrays after it (and
    their signs, drawn from held 32-bit halves) hold the same values, and the generator ends where it did.
    `first` integers drawn before leave a half held or not."""
    from gpgpu_opt.check.inputs import make_arguments, skip_signed_uniform

    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(const int *idx, float *out, const float *a, double *b, int n) "
                    "{ int i = threadIdx.x; out[i] = a[i] + b[idx[i]]; }\n")
    kernel = load_program(str(path)).kernels[0]
    extents = dict(zip(("idx", "out", "a", "b"), (*sizes, 4)))
    plain, skipping = np.random.default_rng(11), np.random.default_rng(11)
    for rng in (plain, skipping):
        rng.integers(1, 16, first)
    expected = make_arguments(kernel, {"n": 3}, extents, plain)
    got = make_arguments(kernel, {"n": 3}, extents, skipping, poisoned=frozenset({"out"}))
    assert np.isnan(got["out"]).all() and got["out"].dtype == expected["out"].dtype
    assert got["out"].size == expected["out"].size
    for name in ("idx", "a", "b"):
        assert got[name].tobytes() == expected[name].tobytes(), name
    assert got["n"] == expected["n"]
    assert plain.bit_generator.state == skipping.bit_generator.state
    assert not skip_signed_uniform(np.random.Generator(np.random.MT19937(1)), 5)   # only where it knows how
