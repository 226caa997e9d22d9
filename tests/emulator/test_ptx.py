"""The emulator's PTX models (emulator/ptx.py): each mma shape against a matrix product of the fragments laid
out as the PTX ISA's tables say, written out here lane by lane (not through the model's own layout maps), the
tf32 rounding against its definition, the templates' operand groups, and the warp rule."""
from __future__ import annotations

import numpy as np
import pytest

from gpgpu_opt.emulator import ptx

LANES = np.arange(32)
G, T = LANES // 4, LANES % 4


def _tf32(x):
    return ptx.tf32_round(np.asarray(x, np.float32))


def test_tf32_rounds_to_nearest_ties_away_from_zero():
    one = np.float32(1.0)
    ulp = 2.0 ** -10                     # tf32 keeps 10 mantissa bits
    cases = {1.0 + ulp / 2: 1.0 + ulp,   # a tie: away from zero
             -(1.0 + ulp / 2): -(1.0 + ulp),
             1.0 + ulp / 4: 1.0,
             1.0 + 3 * ulp / 4: 1.0 + ulp}
    for x, expected in cases.items():
        got = _tf32(np.float32(x)).view(np.float32)
        assert got == np.float32(expected), (x, got, expected)
    assert (_tf32(np.array([np.inf, -np.inf], np.float32)).view(np.float32) == [np.inf, -np.inf]).all()
    assert np.isnan(_tf32(np.float32(np.nan)).view(np.float32))
    assert _tf32(one) == one.view(np.uint32)


def test_m16n8k8_tf32_is_the_product_of_the_fragments():
    rng = np.random.default_rng(1)
    a = _tf32(rng.uniform(-1, 1, (16, 8))).view(np.float32)
    b = _tf32(rng.uniform(-1, 1, (8, 8))).view(np.float32)
    c = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    # The PTX ISA's "Matrix Fragments for mma.m16n8k8" (.tf32): rows g and g+8, columns t and t+4.
    a_regs = [a[G, T], a[G + 8, T], a[G, T + 4], a[G + 8, T + 4]]
    b_regs = [b[T, G], b[T + 4, G]]
    c_regs = [c[G, 2 * T], c[G, 2 * T + 1], c[G + 8, 2 * T], c[G + 8, 2 * T + 1]]
    bits = [r.astype(np.float32).view(np.uint32)[None, :] for r in a_regs], \
        [r.astype(np.float32).view(np.uint32)[None, :] for r in b_regs]
    d = ptx.mma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 4, bits[0], bits[1],
                [r[None, :] for r in c_regs])
    expected = a.astype(np.float64) @ b + c
    for reg, (row, col) in zip(d, [(G, 2 * T), (G, 2 * T + 1), (G + 8, 2 * T), (G + 8, 2 * T + 1)]):
        np.testing.assert_allclose(reg[0], expected[row, col], rtol=1e-6)


def _pack(low, high, dtype):
    lo = np.asarray(low, dtype).view(np.uint16).astype(np.uint32)
    hi = np.asarray(high, dtype).view(np.uint16).astype(np.uint32)
    return (lo | (hi << 16))[None, :]


def test_m16n8k16_f16_is_the_product_of_the_fragments():
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    b = rng.uniform(-1, 1, (16, 8)).astype(np.float16)
    c = np.zeros((16, 8), np.float32)
    # "Matrix Fragments for mma.m16n8k16" (.f16): each register holds two halves, the lower index low.
    a_regs = [_pack(a[G, 2 * T], a[G, 2 * T + 1], np.float16), _pack(a[G + 8, 2 * T], a[G + 8, 2 * T + 1], np.float16),
              _pack(a[G, 2 * T + 8], a[G, 2 * T + 9], np.float16),
              _pack(a[G + 8, 2 * T + 8], a[G + 8, 2 * T + 9], np.float16)]
    b_regs = [_pack(b[2 * T, G], b[2 * T + 1, G], np.float16), _pack(b[2 * T + 8, G], b[2 * T + 9, G], np.float16)]
    d = ptx.mma("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4, a_regs, b_regs,
                [np.zeros((1, 32), np.float32)] * 4)
    expected = a.astype(np.float64) @ b.astype(np.float64) + c
    np.testing.assert_allclose(d[0][0], expected[G, 2 * T], rtol=1e-6)
    np.testing.assert_allclose(d[3][0], expected[G + 8, 2 * T + 1], rtol=1e-6)


def test_m8n8k4_f64_is_the_product_of_the_fragments():
    rng = np.random.default_rng(3)
    a, b, c = rng.uniform(-1, 1, (8, 4)), rng.uniform(-1, 1, (4, 8)), rng.uniform(-1, 1, (8, 8))
    d = ptx.mma("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", 2, [a[G, T][None, :]], [b[T, G][None, :]],
                [c[G, 2 * T][None, :], c[G, 2 * T + 1][None, :]])
    expected = a @ b + c
    np.testing.assert_allclose(d[0][0], expected[G, 2 * T], rtol=1e-12)
    np.testing.assert_allclose(d[1][0], expected[G, 2 * T + 1], rtol=1e-12)


def test_templates_group_their_operands():
    opcode, groups = ptx.parse_template(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};")
    assert opcode.endswith("f32.tf32.tf32.f32") and groups == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [0, 1, 2, 3]]
    assert ptx.parse_template("cvt.rna.tf32.f32 %0, %1;") == ("cvt.rna.tf32.f32", [[0], [1]])


def test_a_warp_collective_needs_the_whole_warp():
    lane_in_warp = np.arange(64) % 32
    mask = np.ones(64, bool)
    assert ptx.lanes_of_warps(mask, lane_in_warp).shape == (2, 32)
    mask[40] = False
    with pytest.raises(ptx.PtxError, match="part of a warp"):
        ptx.lanes_of_warps(mask, lane_in_warp)


def test_an_instruction_without_a_model_is_refused():
    with pytest.raises(ptx.PtxError, match="no model"):
        ptx.run("wgmma.mma_async.sync", [[np.zeros(32)]], 1, np.arange(32), np.ones(32, bool))


def _kernel_with_asm():
    """A kernel of one warp per 16 x 8 tile: D = A (16 x 8) * B (8 x 8) through cvt.rna.tf32 and mma, its
    fragments read and written as the PTX tables lay them out."""
    from pycparser import c_ast

    from gpgpu_opt.cuda_nodes import asm
    from gpgpu_opt.frontend.cuda_c import parse_c

    source = """
    void k(const float *A, const float *B, float *D) {
        int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        unsigned a0, a1, a2, a3, b0, b1;
        float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
        float x0 = A[g * 8 + t], x1 = A[(g + 8) * 8 + t], x2 = A[g * 8 + t + 4], x3 = A[(g + 8) * 8 + t + 4];
        float y0 = B[t * 8 + g], y1 = B[(t + 4) * 8 + g];
        D[g * 8 + 2 * t] = d0; D[g * 8 + 2 * t + 1] = d1; D[(g + 8) * 8 + 2 * t] = d2; D[(g + 8) * 8 + 2 * t + 1] = d3;
    }"""
    f = parse_c(source, "<ptx>").ext[-1]
    ids = c_ast.ID
    cvts = [asm("cvt.rna.tf32.f32 %0, %1;", [("=r", ids(r))], [("f", ids(x))])
            for r, x in (("a0", "x0"), ("a1", "x1"), ("a2", "x2"), ("a3", "x3"), ("b0", "y0"), ("b1", "y1"))]
    mma = asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
              "{%0,%1,%2,%3};", [("+f", ids(d)) for d in ("d0", "d1", "d2", "d3")],
              [("r", ids(r)) for r in ("a0", "a1", "a2", "a3", "b0", "b1")])
    items = f.body.block_items
    first_store = next(k for k, s in enumerate(items) if isinstance(s, c_ast.Assignment))
    f.body.block_items = items[:first_store] + cvts + [mma] + items[first_store:]
    return f


def test_the_emulator_runs_inline_ptx_through_its_models():
    from gpgpu_opt.emulator import run_kernel

    f = _kernel_with_asm()
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-1, 1, 128).astype(np.float32), rng.uniform(-1, 1, 64).astype(np.float32)
    d = np.full(128, np.nan, np.float32)
    run_kernel(f, (1, 1, 1), (32, 1, 1), {"A": a, "B": b, "D": d})
    expected = _tf32(a).view(np.float32).reshape(16, 8).astype(np.float64) @ \
        _tf32(b).view(np.float32).reshape(8, 8).astype(np.float64)
    np.testing.assert_allclose(d.reshape(16, 8), expected, rtol=1e-6)


def test_the_emulator_refuses_an_mma_of_part_of_a_warp():
    from gpgpu_opt.emulator import EmulationError, run_kernel

    f = _kernel_with_asm()
    with pytest.raises(EmulationError, match="part of a warp"):
        run_kernel(f, (1, 1, 1), (16, 1, 1), {"A": np.ones(128, np.float32), "B": np.ones(64, np.float32),
                                               "D": np.zeros(128, np.float32)})
