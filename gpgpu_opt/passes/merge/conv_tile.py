"""Register blocking for 2-D convolutions: one thread computes R x C outputs (paper §3.5, conv_16_16).

A kernel with one output per thread of a 2-D thread space whose sum runs over two nested loops of constant
trip counts (FH rows of the filter, then FW columns),

    if (x < width && y < height) { float sum = 0;
        for (j = 0; j < FH; j++) for (i = 0; i < FW; i++) sum += in[(y + j) * pitch + (x + i)] * filt[j * FW + i];
        out[y * width + x] = sum; }

becomes blocks of 16 x TY threads, each computing R rows x C columns of outputs. The block loads its halo
tile of `in` (its outputs plus the filter's reach: (TY*R + FH - 1) x (16*C + FW - 1)) and the filter into
shared memory once; then every thread walks the R + FH - 1 input rows its outputs read: it reads row
`row` of its tile window (C + FW - 1 values) into registers once, and each of its R output rows r with
0 <= row - r < FH adds that row's FW x C products, the filter row `row - r` read by the whole warp from
one address (a broadcast). Each value read from shared memory so feeds up to R*C (input) or C (filter)
multiply-adds from a register.

Proof obligations (each a note when it fails): the input subscript is `P * (y + j) + (x + i) + base` with
P and base the same for every thread and iteration (sympy: coefficients of the output's row and of `j`
equal, of its column and of `i` both 1); other reads in the loop do not depend on the output's position
(the filter: staged per (j, i)) and no array read is written by the kernel; the loops' bounds are
constants; the guards bound each axis from above. A tile element is loaded only where some output in
range reads it (the guard at the lowest row and column that read it), so no read is new; every output
keeps its start value and its store under its guard, and its summation order (j, then i) is the naive
one. The pointers need not be restrict: a thread's stores all follow its reads, as in the naive kernel, so
only another thread's store could be seen differently, which is a race in the naive kernel already.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, iterator_symbol, to_sympy
from gpgpu_opt.ast_util import transform, walk
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import (NotAccumulation, accumulation, accumulator, canonical_header,
                                              check_path, known, trip_count)
from gpgpu_opt.rewriting.per_output import filled
from gpgpu_opt.passes.merge.output_tile import (AXIS_SYMBOL, GX, GY, check_start, global_position, guard_clauses,
                                                output_counts, per_output_code, uses_both_axes)
from gpgpu_opt.passes.merge.tile_shape import confirm_with_ptxas
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, conj, parse_expr, parse_statements, text
from gpgpu_opt.rewriting.witness import sym_to_ast
from gpgpu_opt.templating import render

#: Threads of a block in x; in y 16, or 8 where the tile of 16 rows of threads does not fit.
THREADS_X = 16
#: Threads per SM the launch bounds plan for (two blocks of 256: one block's loads overlap the other's sums).
THREADS_PER_SM = 512
#: Shapes (R rows, C columns per thread) the model tries, best first: 8x8 feeds 25 multiply-adds per
#: shared-memory read (8x4: 13), reading each input row once per 8 output rows with conflict-free 16-byte
#: reads. Measured on an H200 (conv 4096², 16x16 filter): 8x8 37.1 TF/s, 4x4 36.5, 8x4 33.6, 8x2 32.9, 4x2
#: 30.5. The smaller ones fit smaller images.
SHAPES = [(8, 8), (8, 4), (4, 4), (8, 2), (4, 2), (2, 2)]
#: Registers a thread needs besides its accumulators and its input row (addresses, the filter's values).
OVERHEAD_REGISTERS = 40
STATIC_SHARED = 48 * 1024
#: Tile loads a thread keeps in flight at once (in registers before their stores): 45 at once spilled.
LOAD_BATCH = 24

_LOAD_Y = sympy.Symbol("_load_y", integer=True)
_LOAD_X = sympy.Symbol("_load_x", integer=True)


@dataclass
class Staged:
    """An array read in the loop and the shared tile it is read from."""
    array: str
    index: sympy.Expr                 # in the output's global position (G.x, G.y), j, i and parameters
    nodes: list[c_ast.ArrayRef] = field(default_factory=list)
    tile: str = ""


@dataclass
class ConvTile:
    loop: c_ast.For                   # the filter rows' loop (its body is the columns' loop)
    inner: c_ast.For
    row_var: str
    col_var: str
    row_start: int
    col_start: int
    fh: int
    fw: int
    acc: c_ast.Decl
    source: Staged                    # the input, read at (y + j, x + i)
    filters: list[Staged]             # reads that depend on (j, i) only
    clauses: dict
    element: str
    rows: int                         # R outputs per thread in y
    cols: int                         # C outputs per thread in x
    threads_y: int
    why: str

    @property
    def block(self) -> tuple[int, int]:
        return (THREADS_X, self.threads_y)

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return (THREADS_X * self.cols, self.threads_y * self.rows)

    @property
    def halo(self) -> tuple[int, int]:
        """The input tile's extent (rows, columns): the block's outputs plus the filter's reach."""
        ox, oy = self.outputs_per_block
        return (oy + self.fh - 1, ox + self.fw - 1)

    @property
    def blocks_per_sm(self) -> int:
        return max(1, THREADS_PER_SM // (THREADS_X * self.threads_y))


# -- is the kernel a convolution ------------------------------------------------------------------------
def plan_conv_tile(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> ConvTile:
    tile = plan_by_model(kernel, ctx, info)
    if ctx.options.merge_request is not None:
        return tile
    shapes = [s for s in SHAPES if s[0] * s[1] <= tile.rows * tile.cols and _fits(tile, *s)]
    shapes = [(tile.rows, tile.cols)] + [s for s in shapes if s != (tile.rows, tile.cols)]
    shape, said = confirm_with_ptxas(kernel.name, ctx, shapes, lambda shape: _tiled_source(kernel, ctx, shape))
    if shape != (tile.rows, tile.cols):
        tile = plan_by_model(kernel, ctx, info, shape)
    tile.why += f"; {said}"
    return tile


def _tiled_source(kernel: Kernel, ctx: PassContext, shape: tuple[int, int]) -> str:
    work = kernel.copy()
    info = KernelInfo.of(work, ctx)
    apply_conv_tile(work, info, plan_by_model(work, ctx, info, shape))
    return work.with_launch_bounds(kernel_source(work.funcdef))


def plan_by_model(kernel: Kernel, ctx: PassContext, info: KernelInfo,
                  shape: tuple[int, int] | None = None) -> ConvTile:
    body = kernel.body
    loops = [n for n in walk(body) if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile))]
    if len(loops) != 2 or not all(isinstance(n, c_ast.For) for n in loops):
        raise NotAccumulation("the kernel does not have exactly two loops")
    outer, inner = loops
    if g.items(outer.stmt) != [inner]:
        raise NotAccumulation("the outer loop does more than run the inner one")
    acc_name = accumulation(inner, info.pure_calls)
    if not uses_both_axes(info):
        raise NotAccumulation("the thread space is not 2-D")
    source, filters, env = _reads(inner, info)
    info.check_kernel()
    row_var, row_start = canonical_header(outer, body)
    col_var, col_start = canonical_header(inner, body)
    fh, sj = _constant_loop(outer, row_start, info, ctx)
    fw, si = _constant_loop(inner, col_start, info, ctx)
    path = g.path_to(outer, info.parents, body)
    check_path(path, outer)
    acc = accumulator(body, outer, acc_name, path, info, updates_before=True)
    check_start(outer, acc, info)
    _check_source(source, row_var, col_var)
    for f in filters:
        f.tile = info.fresh(f"tile_{f.array}")
    source.tile = info.fresh(f"tile_{source.array}")
    clauses = guard_clauses(path, env)
    element = _element_type(info, [source, *filters])
    _check_body_uses(inner, {id(n) for s in (source, *filters) for node in s.nodes for n in walk(node)}, info, acc)
    tile = ConvTile(outer, inner, row_var, col_var, sj, si, fh, fw, acc, source, filters, clauses, element,
                    0, 0, 16, "")
    if shape is None:
        tile.rows, tile.cols, tile.why = _choose_shape(tile, ctx)
    else:
        tile.rows, tile.cols, tile.why = *shape, f"{shape[0]}x{shape[1]} outputs per thread"
    tile.threads_y = _threads_y(tile, tile.rows, tile.cols)
    if tile.threads_y == 0:
        raise Unsupported(f"the halo tile of {tile.rows}x{tile.cols} outputs per thread needs more than the "
                          f"{STATIC_SHARED} bytes of static shared memory a block can have")
    problem = info.coverage_problem(ctx.facts.naive_block, tile.outputs_per_block)
    if problem:
        raise Unsupported(problem)
    return tile


def _constant_loop(loop: c_ast.For, start: c_ast.Node, info: KernelInfo, ctx: PassContext) -> tuple[int, int]:
    """The loop's trip count and start, both constants (the filter's extent)."""
    trip = trip_count(loop, start, info, ctx)
    first = known(to_sympy(start, info.flat_env()), ctx) if trip is not None else None
    if first is None or not first.is_Integer:
        raise Unsupported(f"the filter loop '{text(loop.cond)}' does not have a constant start and length (a "
                          "register tile needs the filter's extent)")
    if trip < 1:
        raise Unsupported("the filter loop runs no iteration")
    return trip, int(first)


def _reads(inner: c_ast.For, info: KernelInfo) -> tuple[Staged, list[Staged], dict]:
    """The loop's reads: one array read at the output's position moved by the loop indices (the input),
    and reads that do not depend on the output's position (the filter)."""
    inside = {id(n) for n in walk(inner.stmt)}
    source: Staged | None = None
    filters: list[Staged] = []
    thread = set(BID.values()) | set(BDIM.values()) | set(TID.values())
    for a in info.accesses:
        if id(a.node) not in inside:
            continue
        if a.mode != "read":
            raise NotAccumulation(f"the loop writes {a.array}[{a.index_text}]")
        if a.index is None:
            raise NotAccumulation(f"the read {a.array}[{a.index_text}] cannot be analysed")
        index = global_position(a.index)
        if any(s.name.startswith("?") for s in index.free_symbols) or index.free_symbols & thread:
            raise NotAccumulation(f"{a.array}[{a.index_text}] is not a function of the output's position")
        if index.has(GX) or index.has(GY):
            if source is not None and (source.array, source.index) != (a.array, index):
                raise NotAccumulation(f"the loop reads {source.array} and {a.array}[{a.index_text}] at the "
                                      "output's position (one input array at one subscript is a convolution)")
            source = source or Staged(a.array, index)
            source.nodes.append(a.node)
        else:
            same = next((f for f in filters if (f.array, f.index) == (a.array, index)), None)
            if same is None:
                same = Staged(a.array, index)
                filters.append(same)
            same.nodes.append(a.node)
    if source is None:
        raise NotAccumulation("no read in the loop depends on the output's position")
    for s in (source, *filters):
        if s.array in info.written:
            raise Unsupported(f"the kernel writes {s.array}, which the loop reads (a staged copy would be stale)")
    return source, filters, info.flat_env()


def _check_source(source: Staged, row_var: str, col_var: str) -> None:
    """`P * (y + j) + (x + i) + base`: the output's row and `j` move the subscript by the same pitch, its
    column and `i` by one element, and nothing else depends on them."""
    j, i = iterator_symbol(row_var), iterator_symbol(col_var)
    index = sympy.expand(source.index)
    moving = (GY, j, GX, i)
    if any(sympy.diff(index, a, b) != 0 for a in moving for b in moving):
        raise Unsupported(f"{source.array}[{text(source.nodes[0].subscript)}] is not affine in the output's "
                          f"position and the filter's indices")
    pitch = sympy.diff(index, GY)
    if sympy.expand(sympy.diff(index, j) - pitch) != 0 or sympy.diff(index, GX) != 1 or sympy.diff(index, i) != 1:
        raise Unsupported(f"{source.array}[{text(source.nodes[0].subscript)}] is not the form "
                          f"(row + {row_var}) * pitch + (column + {col_var}): not a convolution's window")


def _check_body_uses(inner: c_ast.For, replaced: set[int], info: KernelInfo, acc: c_ast.Decl) -> None:
    own = {acc.name} | {n.name for n in walk(inner.stmt) if isinstance(n, c_ast.Decl)}
    position = (info.thread_vars - own) | {"threadIdx", "blockIdx", "blockDim"}
    for n in walk(inner.stmt):
        if id(n) not in replaced and isinstance(n, c_ast.ID) and n.name in position:
            raise Unsupported(f"the loop body uses '{n.name}', the output's position, outside its reads")


def _element_type(info: KernelInfo, reads: list[Staged]) -> str:
    types = {info.params[s.array].base_type for s in reads if s.array in info.params}
    if len(types) != 1 or not types <= {"float", "double"} or any(s.array not in info.params for s in reads):
        raise Unsupported("the loop's reads are not all float or all double arrays of the kernel's parameters")
    return types.pop()


# -- the shape ------------------------------------------------------------------------------------------
def _vector(cols: int) -> int:
    return 4 if cols % 4 == 0 else 2 if cols % 2 == 0 else 1


def _tile_width(tile: ConvTile, rows_cols: tuple[int, int] | None = None) -> int:
    """The halo tile's row length, padded to 16 bytes so that every thread's row starts aligned."""
    cols = rows_cols[1] if rows_cols else tile.cols
    return math.ceil((THREADS_X * cols + tile.fw - 1) / 4) * 4


def _shared_bytes(tile: ConvTile, rows: int, cols: int, threads_y: int) -> int:
    words = 2 if tile.element == "double" else 1
    halo = (threads_y * rows + tile.fh - 1) * _tile_width(tile, (rows, cols))
    return 4 * words * (halo + len(tile.filters) * tile.fh * math.ceil(tile.fw / 4) * 4)


def _threads_y(tile: ConvTile, rows: int, cols: int) -> int:
    return next((ty for ty in (16, 8) if _shared_bytes(tile, rows, cols, ty) <= STATIC_SHARED), 0)


def _fits(tile: ConvTile, rows: int, cols: int) -> bool:
    return _threads_y(tile, rows, cols) != 0


def _registers(tile: ConvTile, rows: int, cols: int) -> int:
    words = 2 if tile.element == "double" else 1
    return words * (rows * cols + cols + tile.fw - 1) + OVERHEAD_REGISTERS


def _ffma_per_shared_read(tile: ConvTile, rows: int, cols: int) -> float:
    """Multiply-adds per shared-memory instruction of a thread: per input row, its C + FW - 1 values (in
    vectors) and, per output row it feeds, the filter row (16-byte broadcasts) for FW * C updates."""
    vec = _vector(cols)
    row_reads = (rows + tile.fh - 1) * math.ceil((cols + tile.fw - 1) / vec)
    filter_reads = rows * tile.fh * math.ceil(tile.fw / 4) * len(tile.filters)
    return rows * cols * tile.fh * tile.fw / (row_reads + filter_reads)


def _choose_shape(tile: ConvTile, ctx: PassContext) -> tuple[int, int, str]:
    target = ctx.options.target
    request = ctx.options.merge_request
    if request is not None:
        if request.x not in (1, 2, 4, 8) or not 1 <= request.y <= 16:
            raise Unsupported(f"--merge {request}: a convolution tile takes 1, 2, 4 or 8 outputs per thread in x "
                              "and 1 to 16 in y")
        return request.y, request.x, f"--merge {request}"
    ox, oy = output_counts(tile.clauses, ctx)
    budget = min(target.max_registers_per_thread, target.registers_per_sm // THREADS_PER_SM)
    fitting = [(r, c) for r, c in SHAPES if _fits(tile, r, c) and _registers(tile, r, c) <= budget]
    if not fitting:
        raise Unsupported(f"no register tile of {', '.join(f'{r}x{c}' for r, c in SHAPES)} outputs per thread "
                          f"fits the target's shared memory and {budget} registers per thread")
    for r, c in fitting:
        ty = _threads_y(tile, r, c)
        said = (f"{r}x{c} outputs per thread (rows x columns): {_ffma_per_shared_read(tile, r, c):.1f} "
                f"multiply-adds per shared-memory read, about {_registers(tile, r, c)} registers of {budget}, "
                f"{_shared_bytes(tile, r, c, ty)} bytes of shared memory per block")
        if ox is None or oy is None:
            return r, c, said + "; the sizes are not known, so the tile for large images"
        blocks = math.ceil(ox / (THREADS_X * c)) * math.ceil(oy / (ty * r))
        if blocks >= target.sm_count or (r, c) == fitting[-1]:
            return r, c, said + f"; {blocks} blocks for {target.sm_count} SMs"
    raise AssertionError("unreachable")


# -- the rewrite ----------------------------------------------------------------------------------------
def apply_conv_tile(kernel: Kernel, info: KernelInfo, tile: ConvTile) -> None:
    names = {base: info.fresh(base) for base in ("first_row", "first_col", "e", "tile_row", "tile_col",
                                                  "row", "r", "c", "l", "window_rows", "window_cols")}
    names["staged"] = info.fresh(f"{tile.source.array}_staged")
    row_values = info.fresh(f"{tile.source.array}_row")
    (ox, oy), (th, tw) = tile.outputs_per_block, tile.halo
    position = {"y": parse_expr(f"blockIdx.y * {oy} + threadIdx.y * {tile.rows} + {names['r']}"),
                "x": parse_expr(f"blockIdx.x * {ox} + threadIdx.x * {tile.cols} + {names['c']}")}
    acc_ref = f"{tile.acc.name}[{names['r']}][{names['c']}]"
    init, finish = per_output_code(kernel, info, tile.loop, tile.acc, position, acc_ref)
    threads = THREADS_X * tile.threads_y
    per_thread = math.ceil(th * tw / threads)
    batches = math.ceil(per_thread / LOAD_BATCH)
    loads = math.ceil(per_thread / batches)
    ragged = batches * loads * threads != th * tw
    names["batch"] = info.fresh("batch")
    load_step = f"({names['batch']} * {loads} + {names['l']})" if batches > 1 else names["l"]
    source = render("merge_conv_tile.cu.j2", tile=tile, names=names, acc=tile.acc.name, element=tile.element,
                    acc_type=" ".join(tile.acc.type.type.names), threads=threads, halo=(th, tw),
                    width=_tile_width(tile), outputs=(ox, oy), row_values=row_values,
                    loads=loads, batches=batches, ragged=ragged, input=_input_view(tile, names, ragged),
                    first_element=f"{load_step} * {threads} + threadIdx.y * {THREADS_X} + threadIdx.x",
                    row_index=_plus(f"{names['row']} - {names['r']}", tile.row_start),
                    filters=[_filter_view(tile, f, names) for f in tile.filters],
                    fw_padded=math.ceil(tile.fw / 4) * 4, thread_index=f"threadIdx.y * {THREADS_X} + threadIdx.x")
    items = parse_statements(source)
    kernel.body.block_items = filled(items, {"__init__": init, "__body__": _body(tile, names, acc_ref, row_values),
                                              "__finish__": finish})
    kernel.launch = LaunchConfig(block=tile.block, outputs_per_block=tile.outputs_per_block, bounded=True,
                                 blocks_per_sm=tile.blocks_per_sm)


def _clauses_at(tile: ConvTile, at: dict) -> list[c_ast.Node]:
    """The guard's clauses with the output's row and column replaced (`at`: axis -> C expression)."""
    out = []
    for axis, clauses in tile.clauses.items():
        for lhs, op, rhs in clauses:
            subs = {AXIS_SYMBOL[axis]: _LOAD_Y if axis == "y" else _LOAD_X} if axis else {}
            names = {_LOAD_Y: at["y"], _LOAD_X: at["x"]}
            out.append(c_ast.BinaryOp(op, sym_to_ast(lhs.subs(subs), names), sym_to_ast(rhs.subs(subs), names)))
    return out


def _input_view(tile: ConvTile, names: dict, ragged: bool) -> dict:
    """Tile element (tile_row, tile_col) is the input at (first_row + tile_row, first_col + tile_col) of the
    window's start; the lowest output row (column) that reads it decides whether some output in range does."""
    at = {"y": f"{names['first_row']} + {names['tile_row']}", "x": f"{names['first_col']} + {names['tile_col']}"}
    load = _window_start(tile, at["y"], at["x"])
    reader = {axis: parse_expr(_reader(names[f"first_{part}"], names[f"tile_{part}"], reach))
              for axis, part, reach in (("y", "row", tile.fh - 1), ("x", "col", tile.fw - 1))}
    in_tile = [parse_expr(f"{names['e']} < {names['window_rows']} * {names['window_cols']}")] if ragged else []
    predicate = conj(in_tile + _clauses_at(tile, reader))
    return {"name": tile.source.tile, "array": tile.source.array, "load": load,
            "predicate": text(predicate) if predicate is not None else None,
            "subscript": text(tile.source.nodes[0].subscript)}


def _window_start(tile: ConvTile, row: str, col: str) -> str:
    """The input element (row, col) of the block's window: `(row + a) * pitch + col + b`, the naive
    subscript at the window's start with its constant part folded into whole rows `a` and the rest `b`."""
    j, i = iterator_symbol(tile.row_var), iterator_symbol(tile.col_var)
    index = sympy.expand(tile.source.index)
    pitch = sympy.diff(index, GY)
    rest = sympy.expand(index.subs({GY: 0, GX: 0, j: tile.row_start, i: tile.col_start}))
    rows = _whole_rows(rest, pitch)
    rest = sympy.expand(rest - rows * pitch)
    pitch_text = text(sym_to_ast(pitch))
    first = f"({_plus(row, rows)}) * {pitch_text if pitch.is_Symbol or pitch.is_Integer else f'({pitch_text})'}"
    parts = [first, col] + ([text(sym_to_ast(rest))] if rest != 0 else [])
    return text(c_ast.ArrayRef(c_ast.ID(tile.source.array), parse_expr(" + ".join(parts))))


def _whole_rows(offset: sympy.Expr, pitch: sympy.Expr) -> int:
    """How many whole rows of `pitch` elements the constant offset holds (its pitch-dependent part)."""
    if pitch.is_Integer:
        return int(offset) // int(pitch) if offset.is_Integer and pitch != 0 else 0
    symbol = next(iter(sorted(pitch.free_symbols, key=str)))
    rows = sympy.expand(offset).coeff(symbol) / pitch.coeff(symbol)
    return int(rows) if rows.is_Integer else 0


def _plus(expr: str, k: int) -> str:
    return f"{expr} + {k}" if k > 0 else f"{expr} - {-k}" if k < 0 else expr


def _reader(first: str, offset: str, reach: int) -> str:
    if reach == 0:
        return f"{first} + {offset}"
    return f"{first} + ({offset} < {reach} ? 0 : {offset} - {reach})"


def _filter_view(tile: ConvTile, f: Staged, names: dict) -> dict:
    j, i = iterator_symbol(tile.row_var), iterator_symbol(tile.col_var)
    at = {"y": parse_expr(names["first_row"]), "x": parse_expr(names["first_col"])}
    k = {"j": c_ast.ID(names["tile_row"]), "i": c_ast.ID(names["tile_col"])}
    index = f.index.subs({j: _LOAD_Y + tile.row_start, i: _LOAD_X + tile.col_start})
    load = c_ast.ArrayRef(c_ast.ID(f.array), sym_to_ast(index, {_LOAD_Y: k["j"], _LOAD_X: k["i"]}))
    predicate = conj(_clauses_at(tile, at))
    return {"name": f.tile, "array": f.array, "load": text(load), "subscript": text(f.nodes[0].subscript),
            "predicate": text(predicate) if predicate is not None else None}


def _body(tile: ConvTile, names: dict, acc_ref: str, row_values: str) -> list[c_ast.Node]:
    """The columns' loop body for output (r, c): the input from the row in registers, the filter from its
    tile, the accumulator its element."""
    memo: dict = {}
    stmts = [copy.deepcopy(s, memo) for s in g.items(tile.inner.stmt)]
    shift = f" - {tile.col_start}" if tile.col_start > 0 else f" + {-tile.col_start}" if tile.col_start else ""
    row_shift = f" - {tile.row_start}" if tile.row_start > 0 else f" + {-tile.row_start}" if tile.row_start else ""
    replacement = {id(memo[id(n)]): parse_expr(f"{row_values}[{names['c']} + {tile.col_var}{shift}]")
                   for n in tile.source.nodes}
    for f in tile.filters:
        for n in f.nodes:
            replacement[id(memo[id(n)])] = parse_expr(f"{f.tile}[{tile.row_var}{row_shift}][{tile.col_var}{shift}]")
    acc = tile.acc.name

    def swap(n: c_ast.Node):
        if id(n) in replacement:
            return replacement[id(n)]
        if isinstance(n, c_ast.ID) and n.name == acc:
            return parse_expr(acc_ref)
        return None

    return [transform(s, swap, skip_member_names=True) for s in stmts]


def describe_launch(tile: ConvTile) -> str:
    (bx, by), (ox, oy) = tile.block, tile.outputs_per_block
    return (f"blocks of {bx}x{by} threads, each covering {ox}x{oy} outputs ({tile.cols}x{tile.rows} per thread); "
            f"__launch_bounds__({bx * by}, {tile.blocks_per_sm})")


def describe(tile: ConvTile) -> str:
    th, tw = tile.halo
    return (f"convolution register tile: {tile.why}; the {th}x{tw} halo tile of {tile.source.array} and the "
            f"{tile.fh}x{tile.fw} filter in shared memory, each input row read once into registers for the "
            f"{tile.rows} output rows it feeds")

