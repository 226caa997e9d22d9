"""Shared-memory tile geometry (coalesce's staging and block merge's re-staging): the shape of a staged tile,
its bank-conflict padding, the cooperative loader that fills it and the shared-memory read that replaces the
global one. The C-building kit these use is `rewriting.cbuild`.

A staged read `A[e]` is looked at over one *tile step*: the threads of one block and, when the subscript
depends on a loop, `U` consecutive iterations of that loop (the loop is unrolled by `U`). Over a tile
step the subscript varies with at most three variables: `x` (threadIdx.x), `y` (threadIdx.y) and `u`
(the iteration within the step). At most one of them may move along a row of the array (a small constant
stride: the tile's *columns*) and at most one may jump between rows (a symbolic or large stride, the
*pitch*: the tile's *rows*). The tile is then `R x C` elements; the loader has consecutive threads read
consecutive columns of one row, which is what makes the global read coalesced whatever the naive access
pattern was.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.dim3 import Dim3, Dim3Like
from gpgpu_opt.analysis.symbolic import TID
from gpgpu_opt.rewriting.cbuild import Unsupported, add, builtin, const, mul, parse_statements, text
from gpgpu_opt.templating import render


# -- tile shapes ------------------------------------------------------------------------------------
@dataclass
class Dim:
    kind: str            # 'x', 'y' (thread axes) or 'u' (iteration within the tile step)
    coef: sympy.Expr     # elements per unit of the variable (for 'u': per iteration, the step included)
    extent: int = 0      # values per tile step (block dimension, or the unroll factor U)


@dataclass
class Shape:
    row: Dim | None
    col: Dim | None

    def unroll_factor(self, width: int) -> int:
        """Iterations per tile step for this access alone: W / gcd(m, W) for a column stride m (so that a
        step reads whole segments), W when the iteration moves between rows."""
        if self.col is not None and self.col.kind == "u":
            m = int(self.col.coef)
            return width // math.gcd(m, width)
        return width


def classify(index: sympy.Expr, block: Dim3Like, anchor_sym, anchor_stride: int, width: int) -> Shape:
    """Row/column roles of x, y and the anchor loop's iteration in `index` (bdim already substituted).
    `anchor_stride` is the size of the loop's step: a loop that counts down is staged over the same
    addresses as the upward loop over its values, so the subscript must grow with the iterator either way."""
    rows, cols = [], []
    candidates = [("x", TID["x"], block[0], 1), ("y", TID["y"], block[1], 1)]
    if anchor_sym is not None:
        candidates.append(("u", anchor_sym, None, anchor_stride))
    for kind, sym, extent, scale in candidates:
        if extent == 1:
            continue  # threadIdx is 0 along an axis of extent 1: the address does not vary with it
        c = sympy.expand(sympy.expand(index).coeff(sym) * scale)
        if c == 0:
            continue
        if c.free_symbols & (set(TID.values()) | ({anchor_sym} if anchor_sym is not None else set())):
            raise Unsupported("the subscript is not affine in the thread index and the loop iterator")
        if c.is_Integer and 0 < int(c) < width:
            cols.append(Dim(kind, c, extent or 0))
        elif c.is_Integer and int(c) < 0:
            raise Unsupported("the subscript decreases with the thread index or the iteration")
        else:
            if c.is_Integer is False and c.could_extract_minus_sign():
                raise Unsupported("the subscript decreases with the thread index or the iteration")
            rows.append(Dim(kind, c, extent or 0))
    if len(rows) > 1:
        raise Unsupported("the subscript jumps between rows in more than one dimension")
    if len(cols) > 1:
        raise Unsupported("the subscript moves along a row in more than one dimension (a halo; not staged)")
    return Shape(rows[0] if rows else None, cols[0] if cols else None)


@dataclass
class Tile:
    name: str
    elem_type: str
    elem_bytes: int
    shape: Shape
    rows: int
    cols: int
    pad: int = 0

    @property
    def two_d(self) -> bool:
        return self.rows > 1

    @property
    def bytes(self) -> int:
        return self.rows * (self.cols + self.pad) * self.elem_bytes

    def declaration(self) -> str:
        dims = f"[{self.rows}][{self.cols + self.pad}]" if self.two_d else f"[{self.cols}]"
        return render("coalesce_tile.cu.j2", elem_type=self.elem_type, tile_name=self.name, dims=dims).strip()


def tile_extent(shape: Shape, unroll: int) -> tuple[int, int]:
    for d in (shape.row, shape.col):
        if d is not None and d.kind == "u":
            d.extent = unroll
    rows = shape.row.extent if shape.row else 1
    if shape.col is None:
        cols = 1
    elif shape.col.kind == "u":
        cols = int(shape.col.coef) * unroll      # whole segments: lcm(m, W) elements for U = W/gcd(m, W)
    else:
        cols = int(shape.col.coef) * (shape.col.extent - 1) + 1
    return rows, cols


# -- the cooperative loader ---------------------------------------------------------------------------
@dataclass
class Loader:
    """Which tile element each thread loads in each pass: `row`/`col` as C text over the loop variables
    `row_var`/`col_var` (when there are several passes) and the thread index."""
    row: str
    col: str
    row_loop: tuple[str, int, int] | None = None      # (variable, rows, rows per pass)
    col_loop: tuple[str, int, int] | None = None      # (variable, columns, columns per pass)
    guard: str | None = None                           # threads (or passes) that load nothing
    lanes: list = field(default_factory=list)          # [(row, col)] of the first pass, by linear thread id


def plan_loader(rows: int, cols: int, block: Dim3Like, row_var: str, col_var: str) -> Loader:
    bx, by = Dim3.of(block).xy
    n = bx * by
    tid = "threadIdx.x" if by == 1 else "(threadIdx.y * %d + threadIdx.x)" % bx
    lanes = list(range(n))
    if cols >= n:
        # One row per pass; the block sweeps the row in chunks of n consecutive columns.
        col = tid.strip("()") if cols == n else f"{col_var} + {tid}"
        col_loop = None if cols == n else (col_var, cols, n)
        guard = None if cols % n == 0 else f"{col_var} + {tid} < {cols}"
        row_loop = None if rows == 1 else (row_var, rows, 1)
        row = "0" if rows == 1 else row_var
        return Loader(row, col, row_loop, col_loop, guard, [(0, t) for t in lanes])
    if rows == 1 and cols > 1:
        # One short row: its first `cols` threads load it, the others have nothing to load.
        return Loader("0", tid.strip("()"), guard=f"{tid.strip('()')} < {cols}",
                      lanes=[(0, t) for t in lanes[:cols]])
    # Several rows per pass: cols consecutive threads per row.
    per_pass = n // cols
    if cols == 1:
        in_row, row_in_pass = "0", tid.strip("()")
    elif by > 1 and cols == bx:
        in_row, row_in_pass = "threadIdx.x", "threadIdx.y"
    elif by == 1:
        in_row, row_in_pass = f"threadIdx.x % {cols}", f"threadIdx.x / {cols}"
    else:
        in_row, row_in_pass = f"{tid} % {cols}", f"{tid} / {cols}"
    guards = []
    if n % cols:
        guards.append(f"{tid} < {per_pass * cols}")
    if rows <= per_pass:
        row = row_in_pass
        if rows < per_pass:
            guards.append(f"{row_in_pass} < {rows}" if rows > 1 else f"{row_in_pass} == 0")
        row_loop = None
    else:
        row = f"{row_var} + {row_in_pass}"
        row_loop = (row_var, rows, per_pass)
        if rows % per_pass:
            guards.append(f"{row_var} + {row_in_pass} < {rows}")
    return Loader(row, in_row, row_loop, None, " && ".join(guards) or None,
                  [(t // cols, t % cols) for t in lanes[:per_pass * cols]])


# -- bank conflicts -------------------------------------------------------------------------------------
def _degree(addresses: list[int], banks: int, words_per_elem: int) -> int:
    per_bank: dict[int, set[int]] = {}
    for a in set(addresses):
        for w in range(words_per_elem):
            word = a * words_per_elem + w
            per_bank.setdefault(word % banks, set()).add(word)
    return max((len(v) for v in per_bank.values()), default=1)


def choose_padding(tile: Tile, block: Dim3Like, loader: Loader, banks: int, bank_bytes: int,
                   group: int) -> tuple[int, int, int]:
    """Smallest padding of the rows that makes the reads (first) and the loader's writes (second) free
    of bank conflicts, judged per request group of `group` threads. Returns (pad, read, write degree)."""
    if not tile.two_d:
        return 0, 1, 1
    words = max(1, tile.elem_bytes // bank_bytes)
    bx, by = Dim3.of(block).xy
    n = bx * by
    best = None
    for pad in range(0, banks + 1):
        stride = tile.cols + pad
        read_deg = write_deg = 1
        for g0 in range(0, min(n, 8 * group), group):
            lanes = range(g0, min(n, g0 + group))
            reads = []
            for t in lanes:
                r, c = read_coords(tile.shape, t % bx, t // bx)
                reads.append(r * stride + c)
            read_deg = max(read_deg, _degree(reads, banks, words))
            writes = [loader.lanes[t][0] * stride + loader.lanes[t][1] for t in lanes if t < len(loader.lanes)]
            if writes:
                write_deg = max(write_deg, _degree(writes, banks, words))
        key = (read_deg, write_deg, pad)
        if best is None or key < best:
            best = key
    return best[2], best[0], best[1]


def read_coords(shape: Shape, tx: int, ty: int) -> tuple[int, int]:
    """Tile row and column that thread (tx, ty) reads in the first iteration of a step."""
    value = {"x": tx, "y": ty, "u": 0}
    row = value[shape.row.kind] if shape.row else 0
    col = int(shape.col.coef) * value[shape.col.kind] if shape.col else 0
    return row, col


@dataclass
class TileStep:
    """One step of a loop unrolled around tiles: `unroll` iterations of `var`, `stride` apart (the size of
    the loop's step), starting at the value of `chunk`, counting up or down. Either way a step's tile holds
    its elements in address order, from the step's lowest value (`lowest`)."""
    var: str
    chunk: str
    stride: int
    unroll: int
    down: bool

    def lowest(self) -> c_ast.Node:
        """The step's lowest value: its first iteration going up, its last one going down."""
        if not self.down:
            return c_ast.ID(self.chunk)
        return c_ast.BinaryOp("-", c_ast.ID(self.chunk), const((self.unroll - 1) * self.stride))

    def lead(self, per_iteration: int) -> int:
        """Tile columns before the element of the lowest value, for a column that moves `per_iteration`
        elements per iteration. The elements between two reads are loaded for the later of the two, which
        is the higher one going up (no lead) and the lower one going down: there the tile starts
        `per_iteration - 1` elements early and ends at the element of the step's first value, so that it
        never holds elements above what the loop's first iteration reads."""
        return per_iteration - 1 if self.down else 0


def read_ref(tile: Tile, step: TileStep | None) -> c_ast.ArrayRef:
    """`tile[row][col]` as the reading thread sees it (inside the unrolled loop for loop-index forms)."""
    def coordinate(dim: Dim | None, scale: int) -> c_ast.Node:
        if dim is None:
            return const(0)
        if dim.kind in ("x", "y"):
            return mul(builtin("threadIdx", dim.kind), scale)
        offset = c_ast.BinaryOp("-", c_ast.ID(step.var), step.lowest())
        if dim is tile.shape.row:
            return offset if step.stride == 1 else c_ast.BinaryOp("/", offset, const(step.stride))
        per_iter = scale // step.stride if scale % step.stride == 0 else None
        if per_iter is None:
            raise Unsupported("the column stride is not a multiple of the loop step")
        return add(mul(offset, per_iter), const(step.lead(scale)))

    col = coordinate(tile.shape.col, int(tile.shape.col.coef) if tile.shape.col else 1)
    ref = c_ast.ArrayRef(c_ast.ID(tile.name), col)
    if tile.two_d:
        row = coordinate(tile.shape.row, 1)
        ref = c_ast.ArrayRef(c_ast.ArrayRef(c_ast.ID(tile.name), row), col)
    return ref


ZERO = {"float": "0.0f", "double": "0.0"}


def loader_statements(tile: Tile, loader: Loader, load: c_ast.Node, predicate: c_ast.Node | None) -> list:
    index = f"[{loader.row}][{loader.col}]" if tile.two_d else f"[{loader.col}]"
    return parse_statements(render(
        "coalesce_load.cu.j2", tile=tile.name, index=index, row_loop=loader.row_loop, col_loop=loader.col_loop,
        guard=loader.guard, load=text(load), predicate=text(predicate) if predicate is not None else None,
        zero=ZERO.get(tile.elem_type, "0")))
