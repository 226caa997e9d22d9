"""One staged read's record (`Plan`): the access, the loop it is unrolled around (`anchor_loop`), its tile, its
loader and the statements that fill it. The planner (`plan`) makes them; the loader (`loader`, `vector_rows`)
and the rewriting (`rewrite`, `rows`) read them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpgpu_opt.analysis import AccessReport
from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.loops import Loop
from gpgpu_opt.analysis.symbolic import iterator_symbol
from gpgpu_opt.rewriting.tiles.geometry import Shape, Tile, TileStep


def anchor_loop(a: Access) -> Loop | None:
    """The innermost enclosing loop whose iterator the subscript uses: the loop that gets unrolled."""
    free = a.index.free_symbols
    for loop in reversed(a.loops):
        if iterator_symbol(loop.var) in free:
            return loop
    return None


@dataclass
class Plan:
    report: AccessReport
    access: Access
    anchor: Loop | None
    shape: Shape
    frames: list
    site_path: list                  # body ... anchor loop (or the top-level statement)
    top_index: int                   # index of the top-level statement containing the access
    nodes: list = field(default_factory=list)
    tile: Tile | None = None
    loader: object = None
    unroll: int = 1
    chunk_var: str | None = None
    statements: list = field(default_factory=list)
    padding_note: str = ""
    load_note: str = ""              # how the tile is loaded where that is a choice (`vector_rows`)
    frames_key: tuple = ()
    load_index: int | None = None
    loader_vars: set = field(default_factory=set)

    @property
    def step(self) -> TileStep | None:
        """The tile step of the unrolled anchor loop (None for thread-index tiles)."""
        if self.anchor is None:
            return None
        return TileStep(self.anchor.var, self.chunk_var, abs(self.anchor.step), self.unroll,
                        self.anchor.is_downward)

    def describe(self, target) -> str:
        t = self.tile
        dims = f"[{t.rows}][{t.cols + t.pad}]" if t.two_d else f"[{t.cols}]"
        if self.anchor is not None:
            m = int(self.shape.col.coef) if self.shape.col is not None and self.shape.col.kind == "u" else None
            how = (f"the '{self.anchor.var}' loop is unrolled by {self.unroll}"
                   + (f" (W/gcd({m}, W) = {target.request_threads // math.gcd(m, target.request_threads)})"
                      if m else "")
                   + f" and each step's data is loaded with coalesced requests into {t.name}{dims}")
        else:
            how = f"the block's data is loaded once with coalesced requests into {t.name}{dims}"
        if t.two_d:
            how += f", rows read back transposed; {self.padding_note}"
        if self.load_note:
            how += f"; {self.load_note}"
        return f"staged through shared memory: {how}"
