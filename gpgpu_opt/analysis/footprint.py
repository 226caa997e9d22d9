"""Footprints across statements: the reads of one array that a thread makes around its own element.

A 2-D stencil reads `a[(y + dy) * P + (x + dx)]` for a set of offsets (dy, dx): written statement by
statement (demosaic's nine RAW reads, a 5-point Jacobi sweep) or with loops of constant bounds (conv's
`in[(y + j) * W + x + i]`, j, i < FILTER). Each read on its own is touched by one thread per element, but
together the block's threads read each element up to |offsets| times: the block's footprint is its
outputs grown by the stencil's reach in each direction (the halo), read once from a tile.

`footprints` groups a kernel's reads into such footprints: the subscript minus the thread's own element
`P * y + x` (y, x the global indices) leaves `P * dy + dx`, where dy and dx depend on constants and on
iterators of loops with constant bounds only. The offsets are enumerated; the reach and the counts of a
block's distinct elements against its reads follow from them.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

import sympy

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.loops import Loop
from gpgpu_opt.analysis.symbolic import BDIM, BID, GDIM, TID, is_opaque, iterator_symbol

#: Iterations of a loop nest enumerated for the offsets it reads (a 16x16 filter is 256).
MAX_OFFSETS = 4096


@dataclass
class Footprint:
    array: str
    pitch: sympy.Expr                              # elements from one row to the next (P)
    reads: list[Access] = field(default_factory=list)
    #: per read (by node id): (dy, dx) as expressions of the enclosing loops' iterators
    offset_of: dict = field(default_factory=dict)
    offsets: set = field(default_factory=set)       # every (dy, dx) a thread reads
    loops: dict = field(default_factory=dict)       # iterator name -> its values

    @property
    def reach(self) -> tuple[int, int, int, int]:
        """(up, down, left, right): rows above and below, columns left and right of the thread's element."""
        dys = [d[0] for d in self.offsets]
        dxs = [d[1] for d in self.offsets]
        return -min(0, min(dys)), max(0, max(dys)), -min(0, min(dxs)), max(0, max(dxs))

    @property
    def origin(self) -> tuple[int, int]:
        """The smallest (dy, dx): where the tile starts relative to the block's first output."""
        return min(d[0] for d in self.offsets), min(d[1] for d in self.offsets)

    def extent(self, block: tuple[int, int]) -> tuple[int, int]:
        """(rows, cols) of the block's footprint: its outputs plus the offsets' span in each direction."""
        dys = [d[0] for d in self.offsets]
        dxs = [d[1] for d in self.offsets]
        return block[1] + max(dys) - min(dys), block[0] + max(dxs) - min(dxs)

    def elements(self, block: tuple[int, int]) -> int:
        """Distinct elements the block reads (the tile less the corners no thread reads)."""
        seen = {(ty + dy, tx + dx) for ty in range(block[1]) for tx in range(block[0]) for dy, dx in self.offsets}
        return len(seen)

    def reads_per_thread(self) -> int:
        """Loads a thread makes: each read once per iteration of its loops."""
        total = 0
        for a in self.reads:
            n = 1
            for loop in a.loops:
                if loop.var in self.loops and iterator_symbol(loop.var) in a.index.free_symbols:
                    n *= len(self.loops[loop.var])
            total += n
        return total

    def describe(self, block: tuple[int, int]) -> str:
        rows, cols = self.extent(block)
        up, down, left, right = self.reach
        elements = self.elements(block)
        reads = self.reads_per_thread() * block[0] * block[1]
        return (f"{len(self.reads)} read{'s' if len(self.reads) > 1 else ''} of {self.array} at "
                f"{len(self.offsets)} offsets around the thread's element share one footprint: a "
                f"{block[0]}x{block[1]} block reads {elements} distinct elements of a {rows}x{cols} tile "
                f"(reach {up} up, {down} down, {left} left, {right} right) {reads} times, "
                f"{reads / elements:.1f} reads per element")


def loop_values(loop: Loop, bindings: dict[str, int]) -> list[int] | None:
    """The values of a loop with constant bounds (after the bindings), None otherwise."""
    if loop.multiplicative or loop.bound is None:
        return None
    subs = {s: bindings[s.name] for s in loop.start.free_symbols | loop.bound.free_symbols if s.name in bindings}
    trip = loop.trip_count()
    if trip is None:
        return None
    start, trip = loop.start.subs(subs), trip.subs(subs)
    if not (start.is_Integer and trip.is_Integer) or int(trip) <= 0:
        return None
    return [int(start) + k * loop.step for k in range(int(trip))]


def split_offset(index: sympy.Expr, block: tuple[int, int] | None = None):
    """(P, dy, dx) with index = P * (y + dy) + (x + dx), y and x the global thread indices (blockDim
    symbolic, or `block` substituted), or None when the subscript is not of that shape."""
    sub = {BDIM["x"]: block[0], BDIM["y"]: block[1]} if block else {}
    index = sympy.expand(index.subs(sub))
    bdx, bdy = sub.get(BDIM["x"], BDIM["x"]), sub.get(BDIM["y"], BDIM["y"])
    if index.free_symbols & (set(GDIM.values()) | {TID["z"], BID["z"]}):
        return None
    if sympy.expand(index.coeff(TID["x"]) - 1) != 0:
        return None
    pitch = sympy.expand(index.coeff(TID["y"]))
    if pitch == 0 or pitch.free_symbols & (set(TID.values()) | set(BID.values())) \
            or any(is_opaque(s) for s in pitch.free_symbols):
        return None
    y = BID["y"] * bdy + TID["y"]
    x = BID["x"] * bdx + TID["x"]
    rest = sympy.expand(index - pitch * y - x)
    if rest.free_symbols & (set(TID.values()) | set(BID.values()) | set(BDIM.values())) \
            or any(is_opaque(s) for s in rest.free_symbols):
        return None
    params = sorted(pitch.free_symbols, key=str)
    if params:
        # P = c * p + ... for a parameter p: the rows are the multiple of p, the rest are columns.
        p = params[0]
        dy = sympy.expand(rest.coeff(p) / pitch.coeff(p))
        dx = sympy.expand(rest - pitch * dy)
        if dx.free_symbols & pitch.free_symbols or dy.free_symbols & pitch.free_symbols:
            return None
        return pitch, dy, dx
    # A literal pitch: each term splits into whole rows and a column offset less than half a row.
    dy = dx = sympy.Integer(0)
    for term in sympy.Add.make_args(rest):
        coef, syms = term.as_coeff_Mul()
        rows = sympy.floor(coef / pitch + sympy.Rational(1, 2))
        dy += rows * syms
        dx += (coef - rows * pitch) * syms
    return pitch, sympy.expand(dy), sympy.expand(dx)


def footprints(accesses: list[Access], bindings: dict[str, int] | None = None) -> list[Footprint]:
    """The kernel's 2-D footprints: reads of one array (never written by the kernel) at offsets around
    the thread's element, with more than one offset between them."""
    bindings = bindings or {}
    written = {a.array for a in accesses if a.mode == "write"}
    groups: dict[tuple, Footprint] = {}
    for a in accesses:
        if a.mode != "read" or a.array in written or a.index is None or a.kind == "unresolved":
            continue
        split = split_offset(a.index)
        if split is None:
            continue
        pitch, dy, dx = split
        values = {}
        for loop in a.loops:
            sym = iterator_symbol(loop.var)
            if sym in (dy.free_symbols | dx.free_symbols):
                vals = loop_values(loop, bindings)
                if vals is None:
                    values = None
                    break
                values[loop.var] = vals
        if values is None or (dy.free_symbols | dx.free_symbols) - {iterator_symbol(v) for v in values}:
            continue
        names = list(values)
        if len(list(itertools.product(*values.values()))) > MAX_OFFSETS:
            continue
        offsets = set(_offsets(dy, dx, tuple(names), tuple(tuple(v) for v in values.values())))
        key = (a.array, pitch)
        fp = groups.setdefault(key, Footprint(a.array, pitch))
        fp.reads.append(a)
        fp.offset_of[id(a.node)] = (dy, dx)
        fp.offsets |= offsets
        fp.loops.update(values)
    return [fp for fp in groups.values() if len(fp.offsets) > 1]


@functools.lru_cache(maxsize=1024)
def _offsets(dy: sympy.Expr, dx: sympy.Expr, names: tuple[str, ...], values: tuple[tuple[int, ...], ...]) -> frozenset:
    """Every (dy, dx) over the loops' values (`names[k]` takes `values[k]`), once per these values: each
    pass and each compile of a stencil enumerates the same filter offsets again."""
    offsets = set()
    for combo in itertools.product(*values):
        point = {iterator_symbol(n): v for n, v in zip(names, combo)}
        offsets.add((int(dy.subs(point)), int(dx.subs(point))))
    return frozenset(offsets)


__all__ = ["Footprint", "footprints", "split_offset", "loop_values"]
