"""The emulator's model of each PTX instruction the output may write inline (cuda_nodes.InlineAsm).

An instruction is looked up by its opcode, exactly as written (`mma.sync.aligned.m16n8k8.row.col.f32.tf32.
tf32.f32`): a model for each one the compiler emits, nothing else (an unknown opcode is refused). A model
takes the operands' values over the lanes of a batch, grouped as the template groups them (`{%0, %1},
{%2}`), and returns the values of the outputs.

The matrix instructions (`mma.sync`) are warp-collective: the fragments of the 32 lanes of a warp make the
matrices, as the PTX ISA lays them out ("Matrix Fragments for mma.m16n8k8", "...m16n8k16", "...m8n8k4"),
with `g = lane / 4` (the group) and `t = lane % 4` (the thread in the group):

  m16n8k8, .tf32 A (16 x 8, row): a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
           .tf32 B (8 x 8, col): b0 (t, g), b1 (t+4, g)
  m16n8k16, .f16/.bf16 A (16 x 16): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
           .f16/.bf16 B (16 x 8): b0 (2t..2t+1, g), b1 (2t+8..2t+9, g); the lower half of a register holds
           the element of the lower index
  m16n8k8, .f64 as .tf32 (A a0..a3, B b0..b1), each register one double
  m16n8k4, .f64 A (16 x 4): a0 (g, t), a1 (g+8, t); B (4 x 8): b0 (t, g)
  m8n8k4, .f64 A (8 x 4): a0 (g, t); B (4 x 8): b0 (t, g); C/D (8 x 8): c0 (g, 2t), c1 (g, 2t+1)
  C/D of the m16n8 shapes (16 x 8, f32 or f64): c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)

The products are exact and summed with C in double precision, the result rounded once to the accumulator's
type: the hardware's order of summation is unspecified, so the compile's check compares within a tolerance
(what it checks is the indexing: which element meets which). `.tf32` operands are read from their upper 19
bits (`cvt.rna.tf32.f32` rounds to them: to nearest, ties away from zero).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

WARP = 32


class PtxError(Exception):
    """An instruction the model cannot run as written (an unknown opcode, a warp not all there)."""


# -- element formats ------------------------------------------------------------------------------------
def _bits32(x) -> np.ndarray:
    return np.asarray(x).astype(np.int64).astype(np.uint32)


def tf32_round(x: np.ndarray) -> np.ndarray:
    """`cvt.rna.tf32.f32`: the float32 rounded to 10 explicit mantissa bits, to nearest, ties away from zero,
    as its bits (uint32, the low 13 zero). Infinities and NaN pass through."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    special = (bits & 0x7F800000) == 0x7F800000
    rounded = ((bits.astype(np.uint64) + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return np.where(special, bits, rounded)


def _tf32_value(bits) -> np.ndarray:
    return (_bits32(bits) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def _halves(bits, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The two 16-bit elements of a 32-bit register (low, high) as float64."""
    b = _bits32(bits)
    low, high = (b & 0xFFFF).astype(np.uint16), (b >> 16).astype(np.uint16)
    if kind == "f16":
        return low.view(np.float16).astype(np.float64), high.view(np.float16).astype(np.float64)
    return ((low.astype(np.uint32) << 16).view(np.float32).astype(np.float64),
            (high.astype(np.uint32) << 16).view(np.float32).astype(np.float64))


# -- fragment layouts -----------------------------------------------------------------------------------
#: (row, col) of register r of lane (g, t), per fragment kind: A of m16n8k8 tf32, B of it, ...
_LAYOUTS: dict[str, Callable[[int, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "a16x8": lambda r, g, t: (g + 8 * (r % 2), t + 4 * (r // 2)),
    "b8x8": lambda r, g, t: (t + 4 * r, g),
    "a16x4": lambda r, g, t: (g + 8 * r, t),
    "b4x8": lambda r, g, t: (t, g),
    "a8x4": lambda r, g, t: (g, t),
    "c16x8": lambda r, g, t: (g + 8 * (r // 2), 2 * t + r % 2),
    "c8x8": lambda r, g, t: (g, 2 * t + r),
}
#: Packed 16-bit fragments: (row, col) of the low element of register r; the high one is the next column
#: (A) or the next row (B).
_PACKED: dict[str, Callable[[int, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "a16x16": lambda r, g, t: (g + 8 * (r % 2), 2 * t + 8 * (r // 2)),
    "b16x8": lambda r, g, t: (2 * t + 8 * r, g),
}


@dataclass(frozen=True)
class MmaShape:
    m: int
    n: int
    k: int
    a: str          # layout of A's fragment (a key of _LAYOUTS or _PACKED)
    b: str
    c: str
    operand: str    # 'tf32', 'f16', 'bf16', 'f64'
    accumulator: str  # 'f32' or 'f64'


_MMA = {
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32": MmaShape(16, 8, 8, "a16x8", "b8x8", "c16x8", "tf32", "f32"),
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32": MmaShape(16, 8, 16, "a16x16", "b16x8", "c16x8", "f16", "f32"),
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32": MmaShape(16, 8, 16, "a16x16", "b16x8", "c16x8", "bf16",
                                                                    "f32"),
    "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64": MmaShape(16, 8, 8, "a16x8", "b8x8", "c16x8", "f64", "f64"),
    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64": MmaShape(8, 8, 4, "a8x4", "b4x8", "c8x8", "f64", "f64"),
    "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64": MmaShape(16, 8, 4, "a16x4", "b4x8", "c16x8", "f64", "f64"),
}


def _gather(regs: list[np.ndarray], layout: str, operand: str, rows: int, cols: int, warps: int) -> np.ndarray:
    """The (warps, rows, cols) matrices a fragment's registers (each (warps, 32)) hold."""
    out = np.zeros((warps, rows, cols))
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    w = np.arange(warps)[:, None]
    for r, reg in enumerate(regs):
        if layout in _PACKED:
            row, col = _PACKED[layout](r, g, t)
            low, high = _halves(reg, operand)
            out[w, row, col] = low
            if layout.startswith("a"):
                out[w, row, col + 1] = high
            else:
                out[w, row + 1, col] = high
        else:
            row, col = _LAYOUTS[layout](r, g, t)
            out[w, row, col] = _tf32_value(reg) if operand == "tf32" else np.asarray(reg, np.float64)
    return out


def _scatter(d: np.ndarray, layout: str, count: int) -> list[np.ndarray]:
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    return [d[:, row, col] for row, col in (_LAYOUTS[layout](r, g, t) for r in range(count))]


def _expected_counts(shape: MmaShape) -> tuple[int, int, int]:
    per = 2 if shape.a in _PACKED else 1
    return (shape.m * shape.k // (WARP * per), shape.k * shape.n // (WARP * per), shape.m * shape.n // WARP)


def mma(opcode: str, d_count: int, a: list[np.ndarray], b: list[np.ndarray], c: list[np.ndarray]) -> list[np.ndarray]:
    """D = A * B + C per warp; every register given as (warps, 32) lanes."""
    shape = _MMA[opcode]
    want = _expected_counts(shape)
    if (len(a), len(b), len(c)) != want or d_count != want[2]:
        raise PtxError(f"{opcode} takes {want[0]} A, {want[1]} B and {want[2]} C/D registers a lane, "
                       f"not {len(a)}, {len(b)}, {len(c)} and {d_count}")
    warps = a[0].shape[0]
    am = _gather(a, shape.a, shape.operand, shape.m, shape.k, warps)
    bm = _gather(b, shape.b, shape.operand, shape.k, shape.n, warps)
    cm = _gather(c, shape.c, "f64", shape.m, shape.n, warps)
    d = np.einsum("wmk,wkn->wmn", am, bm) + cm
    dtype = np.float32 if shape.accumulator == "f32" else np.float64
    return [reg.astype(dtype) for reg in _scatter(d, shape.c, d_count)]


# -- templates ------------------------------------------------------------------------------------------
_OPERAND = re.compile(r"%(\d+)")


def parse_template(template: str) -> tuple[str, list[list[int]]]:
    """`op {%0, %1}, %2;` as ('op', [[0, 1], [2]])."""
    text = template.strip().rstrip(";").strip()
    opcode, _, rest = text.partition(" ")
    groups = []
    for part in re.findall(r"\{[^}]*\}|[^,{}\s][^,{}]*", rest):
        indices = [int(i) for i in _OPERAND.findall(part)]
        if not indices:
            raise PtxError(f"an operand of '{template}' names no %n")
        groups.append(indices)
    return opcode, groups


def lanes_of_warps(mask: np.ndarray, lane_in_warp: np.ndarray) -> np.ndarray:
    """The lanes of the warps executing a warp-collective instruction, warp by warp ((warps, 32) indices);
    every lane of such a warp must execute it (the `.aligned` form's requirement)."""
    starts = np.flatnonzero(mask & (lane_in_warp == 0))
    lanes = starts[:, None] + np.arange(WARP)[None, :]
    if lanes.size and (lanes.max() >= mask.size or not mask[lanes].all()
                       or (lane_in_warp[np.clip(lanes, 0, mask.size - 1)] != np.arange(WARP)).any()):
        raise PtxError("a warp-collective instruction executed by part of a warp (every lane must execute it)")
    if int(mask.sum()) != lanes.size:
        raise PtxError("a warp-collective instruction executed by part of a warp (every lane must execute it)")
    return lanes


def is_modelled(opcode: str) -> bool:
    return opcode in _MMA or opcode in _ELEMENTWISE


#: Per-lane instructions: opcode -> (outputs, the function of the inputs' values).
_ELEMENTWISE: dict[str, Callable] = {
    "cvt.rna.tf32.f32": lambda x: tf32_round(np.asarray(x, np.float32)),
}


def run(opcode: str, groups: list[list[np.ndarray]], outputs: int, lane_in_warp: np.ndarray,
        mask: np.ndarray) -> list[np.ndarray]:
    """The values of the `outputs` destination registers (over all lanes; only the masked ones are stored) of
    `opcode` applied to its source operand groups' values (each over all lanes, as the template groups them
    after the destinations)."""
    if opcode in _ELEMENTWISE:
        if outputs != 1 or len(groups) != 1 or len(groups[0]) != 1:
            raise PtxError(f"{opcode} takes one destination and one source")
        return [_ELEMENTWISE[opcode](groups[0][0])]
    if opcode in _MMA:
        if len(groups) != 3:
            raise PtxError(f"{opcode} takes four operand groups: D, A, B, C")
        lanes = lanes_of_warps(mask, lane_in_warp)
        n = mask.size

        def per_warp(values):
            return [np.broadcast_to(np.asarray(v), (n,))[lanes] for v in values]
        d = mma(opcode, outputs, per_warp(groups[0]), per_warp(groups[1]), per_warp(groups[2]))
        out = []
        for reg in d:
            full = np.zeros(n, reg.dtype)
            full[lanes] = reg
            out.append(full)
        return out
    raise PtxError(f"no model of the PTX instruction '{opcode}'")


__all__ = ["PtxError", "is_modelled", "mma", "parse_template", "run", "tf32_round"]
