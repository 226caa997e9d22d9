"""Halo tiles: a stencil's footprint (`analysis.footprint`) staged in a 2-D shared tile.

The block's outputs grown by the stencil's reach in each direction are loaded once into
`tile[rows][cols + pad]` (rows = outputs in y + reach up + reach down, likewise the columns) by all the
block's threads: a loop over the tile's elements in steps of the block, consecutive threads on consecutive
columns of a row (coalesced), then one barrier; each read `a[(y + dy) * P + x + dx]` becomes
`tile[threadIdx.y + dy - up][threadIdx.x + dx - left]`.

Loads are predicated: element (gr, gc) is loaded only if a thread of the block reads it in the naive
kernel. The reads' guards must bound the global indices (`x >= 1 && x < w - 1`: an interval per axis,
with block-uniform bounds), and their loops must have constant bounds; a thread y reads rows y + dy for
the offsets, so a row is read iff the interval [gr - dy_max, gr - dy_min] meets the block's rows and the
guard's interval (likewise the columns), for each run of offsets that forms a rectangle (a 5-point
stencil's plus is three). No access is added that the naive kernel would not make, at any image size.

Whether it pays (`staging_pays`): on GPUs whose global loads bypass a cache (g80, gt200) always, as in
the paper. Where an L1 serves global loads, neighbouring threads' reads already hit it, so the tile saves
L1 wavefronts (misaligned rows cost two), not DRAM bytes: it pays when the kernel is bound by those
wavefronts (a 16x16 filter) and not when DRAM bounds it (a 3x3 or 5-point stencil).

Reusable for other passes (register blocking): `HaloTile.plan(footprint, outputs, threads, ...)` gives the
tile for a block of outputs (extents = outputs + reach) and `HaloTile.loader(...)` the cooperative load.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from types import SimpleNamespace

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.footprint import Footprint, loop_values
from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, cuda_text, is_opaque
from gpgpu_opt.ast_util import ids_in, transform
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.cuda_types import size_of
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.tiles.plan import _write_between
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_expr, parse_statements, text
from gpgpu_opt.rewriting.tiles.geometry import ZERO
from gpgpu_opt.targets import Target
from gpgpu_opt.templating import render

_ELEMENT = {t: size_of(t) for t in ("float", "double", "int", "unsigned int", "unsigned")}  # stageable types
#: The tile must cut the L1 time by this factor to pay for its barrier and shared memory.
_MARGIN = 0.8


@dataclass
class HaloTile:
    footprint: Footprint
    name: str
    elem_type: str
    outputs: tuple[int, int]        # outputs per block (x, y)
    rows: int
    cols: int
    pad: int

    @classmethod
    def plan(cls, fp: Footprint, outputs: tuple[int, int], threads: tuple[int, int], target: Target,
             name: str, elem_type: str) -> "HaloTile":
        """The tile for `outputs` (x, y) outputs per block loaded by `threads`: extents = outputs + reach,
        rows padded so that the reads of a request (consecutive x) and the loader's writes are free of bank
        conflicts."""
        rows, cols = fp.extent(outputs)
        words = max(1, _ELEMENT[elem_type] // target.bank_bytes)
        request = min(target.request_threads, threads[0] * threads[1])
        best = None
        for pad in range(target.shared_banks):
            stride = cols + pad
            reads = [(t // threads[0]) * stride + t % threads[0] for t in range(request)]
            writes = [(e // cols) * stride + e % cols for e in range(request)]
            key = (_degree(reads, target.shared_banks, words), _degree(writes, target.shared_banks, words), pad)
            best = key if best is None or key < best else best
        return cls(fp, name, elem_type, outputs, rows, cols, best[2])

    @property
    def bytes(self) -> int:
        return self.rows * (self.cols + self.pad) * _ELEMENT[self.elem_type]

    def read(self, dy: sympy.Expr, dx: sympy.Expr) -> c_ast.Node:
        """The tile element a thread reads at offset (dy, dx)."""
        oy, ox = self.footprint.origin
        return parse_expr(f"{self.name}[{_plus('threadIdx.y', dy - oy)}][{_plus('threadIdx.x', dx - ox)}]")

    def loader(self, threads: tuple[int, int], names: dict, predicate: str | None, block_guard: str | None) -> str:
        """The cooperative load (declaration, loop over the tile in steps of the block's threads); `names`:
        the loop's variables {'e', 'gr', 'gc'}."""
        oy, ox = self.footprint.origin
        fp = self.footprint
        load = f"{fp.array}[{names['gr']} * {_paren(cuda_text(fp.pitch))} + {names['gc']}]"
        return render("coalesce_halo.cu.j2", elem_type=self.elem_type, tile=self.name, rows=self.rows,
                      cols=self.cols, pad=self.pad, bx=threads[0], by=threads[1], row_origin=_offset(oy),
                      col_origin=_offset(ox), load=load, predicate=predicate, block_guard=block_guard,
                      zero=ZERO.get(self.elem_type, "0"), **names)


def _degree(addresses: list[int], banks: int, words: int) -> int:
    """Worst number of distinct words one bank serves for a request."""
    per_bank: dict[int, set] = {}
    for a in addresses:
        for w in range(words):
            per_bank.setdefault((a * words + w) % banks, set()).add(a * words + w)
    return max(len(v) for v in per_bank.values())


def _offset(k: int) -> str:
    return "" if k == 0 else f" + {k}" if k > 0 else f" - {-k}"


def _plus(base: str, k: sympy.Expr) -> str:
    k = sympy.expand(k)
    if k == 0:
        return base
    if k.is_number and k < 0:
        return f"{base} - {-k}"
    return f"{base} + {cuda_text(k)}"


def _paren(s: str) -> str:
    return s if s.replace("_", "").isalnum() else f"({s})"


# -- the model ------------------------------------------------------------------------------------------
def staging_pays(fp: Footprint, outputs: tuple[int, int], tile: HaloTile, target: Target,
                 out_bytes: int) -> tuple[bool, str]:
    """Whether the tile pays, and the numbers. Without an L1 for global loads it always does (the paper's
    GPUs: every read is a DRAM transaction). With one: time = max(DRAM bytes / bandwidth, L1 wavefronts x
    128 B / L1 bandwidth) per block of outputs, naive against staged (shared reads and writes take the
    same wavefronts); the DRAM bytes are the footprint and the outputs either way."""
    if not target.l1_bytes_per_clock:
        return True, "global loads bypass a cache on this GPU: every halo read would go to DRAM"
    elem = _ELEMENT[tile.elem_type]
    w = target.warp_size
    n = outputs[0] * outputs[1]
    line = 128
    # The first warp's lines per read: a row of 32 outputs is one line aligned, two when misaligned.
    lanes = [(t // outputs[0], t % outputs[0]) for t in range(min(w, n))]
    naive_lines = 0
    for dy, dx in _offset_multiset(fp):
        naive_lines += len({((ty + dy) * 4096 + tx + dx) * elem // line for ty, tx in lanes})
    naive_l1 = naive_lines * (n // w) * line
    loads = tile.rows * math.ceil((tile.cols * elem) / line + 1)     # rows of the tile, misaligned
    staged_l1 = (loads + 2 * math.ceil(tile.rows * tile.cols * elem / line)  # loads, shared writes
                 + fp.reads_per_thread() * (n // w)) * line                  # shared reads
    dram = (fp.elements(outputs) * elem + n * out_bytes)
    l1_bw = target.sm_count * target.l1_bytes_per_clock * target.clock_ghz          # GB/s
    t_dram = dram / target.memory_bandwidth_gbs
    t_naive = max(t_dram, naive_l1 / l1_bw)
    t_staged = max(t_dram, staged_l1 / l1_bw)
    numbers = (f"per {outputs[0]}x{outputs[1]} outputs: {dram} DRAM bytes ({t_dram:.2f} ns at "
               f"{target.memory_bandwidth_gbs:.0f} GB/s) either way; L1 {naive_l1} bytes naive "
               f"({naive_l1 / l1_bw:.2f} ns at {l1_bw:.0f} GB/s) against {staged_l1} staged "
               f"({staged_l1 / l1_bw:.2f} ns)")
    if t_staged < _MARGIN * t_naive:
        return True, f"the L1 wavefronts bound the naive kernel and the tile cuts them: {numbers}"
    return False, (f"the L1 already absorbs the halo's reuse and DRAM bounds the kernel, so the tile's barrier "
                   f"and shared memory would not pay: {numbers}")


def _offset_multiset(fp: Footprint):
    """Every (dy, dx) each thread loads (a loop's offsets once per iteration)."""
    for a in fp.reads:
        dy, dx = fp.offset_of[id(a.node)]
        names = [n for n in fp.loops if sympy.Symbol(n, integer=True) in dy.free_symbols | dx.free_symbols]
        for combo in itertools.product(*(fp.loops[n] for n in names)):
            point = {sympy.Symbol(n, integer=True): v for n, v in zip(names, combo)}
            yield int(dy.subs(point)), int(dx.subs(point))


# -- which elements a block reads -----------------------------------------------------------------------
def _guard_bounds(reads: list, info: KernelInfo):
    """The reads' common guard as inclusive bounds on the global indices: ({'x': [(lo|hi, expr)], 'y': ..},
    uniform clauses as C text). Raises Unsupported for anything else around a read."""
    keys = None
    bounds = {"x": [], "y": []}
    uniform = []
    G = {a: sympy.Symbol(f"G{a}", integer=True) for a in "xy"}
    to_global = {TID[a]: G[a] - BID[a] * BDIM[a] for a in "xy"}
    for a in reads:
        frames = g.frames_to(a.node, info.parents, info.body)
        ifs = []
        in_loop = False
        for f in frames:
            if f.kind == "else":
                raise Unsupported("a read is in an else branch")
            if f.kind == "if" and in_loop:
                raise Unsupported("a read is under a condition inside its loop")
            if f.kind == "for":
                in_loop = True
                var, _, _ = g.loop_var(f.node)
                loop = next((l for l in a.loops if l.node is f.node), None)
                if loop is None or loop_values(loop, info.ctx.facts.bindings) is None or var in assigned_names(f.node.stmt):
                    raise Unsupported("the loop around a read does not run a fixed number of times")
            if f.kind == "if":
                ifs.append(f.node)
        key = [id(n) for n in ifs]
        if keys is not None and key != keys:
            raise Unsupported("the reads are under different conditions")
        if keys is not None:
            continue
        keys = key
        env = a.extra.get("env", {})
        for node in ifs:
            for clause in g.clauses(node.cond):
                if info.uniform(clause):
                    if not ids_in(clause) <= info.scalars:
                        raise Unsupported(f"the guard '{text(clause)}' uses local variables")
                    uniform.append(clause)
                    continue
                bound = _bound(clause, env, to_global, G)
                if bound is None:
                    raise Unsupported(f"the guard '{text(clause)}' is not a bound on the global x or y index")
                axis, side, expr = bound
                bounds[axis].append((side, expr))
    return bounds, uniform


def _bound(clause, env, to_global, G):
    """`G op e` as (axis, 'lo' | 'hi', inclusive bound), or None."""
    found = g.slack(clause, env)
    if found is None:
        return None
    d, strict = sympy.expand(found[0].subs(to_global)), found[1]     # holds while d > 0 (strict) or d >= 0
    for axis in "xy":
        c = d.coeff(G[axis])
        rest = sympy.expand(d - c * G[axis])
        if c not in (1, -1) or rest.free_symbols & (set(TID.values()) | set(BID.values()) | set(G.values())) \
                or any(is_opaque(s) for s in rest.free_symbols):
            continue
        value = -rest * c                                  # c * (G - value) > 0 (>= 0)
        if c < 0:                                          # G < value (<=)
            return axis, "hi", value - 1 if strict else value
        return axis, "lo", value + 1 if strict else value
    return None


def _runs(offsets: set) -> list[tuple[int, int, int, int]]:
    """The offsets as rectangles (dy0, dy1, dx0, dx1): per row the runs of consecutive dx, rows with the
    same runs next to each other merged."""
    per_row: dict[int, list] = {}
    for dy in sorted({o[0] for o in offsets}):
        xs = sorted(o[1] for o in offsets if o[0] == dy)
        runs, start = [], xs[0]
        for a, b in zip(xs, xs[1:] + [None]):
            if b != a + 1:
                runs.append((start, a))
                start = b
        per_row[dy] = runs
    rects = []
    for dy, runs in per_row.items():
        for run in runs:
            prev = next((r for r in rects if r[1] == dy - 1 and (r[2], r[3]) == run), None)
            if prev is not None:
                rects[rects.index(prev)] = (prev[0], dy, run[0], run[1])
            else:
                rects.append((dy, dy, run[0], run[1]))
    return rects


def reader_predicate(fp: Footprint, bounds: dict, outputs: tuple[int, int], names: dict):
    """(predicate on the element (gr, gc), block-uniform condition): whether some thread of the block reads
    the element in the naive kernel; None where every element is read."""
    gsym = {"y": sympy.Symbol(names["gr"], integer=True), "x": sympy.Symbol(names["gc"], integer=True)}
    # The block's first output row and column, ints (blockIdx is unsigned: comparisons must stay signed).
    first = {a: sympy.Symbol(names[f"{a}0"], integer=True, nonnegative=True) for a in "yx"}
    size = {"y": outputs[1], "x": outputs[0]}
    span = {"y": (min(o[0] for o in fp.offsets), max(o[0] for o in fp.offsets)),
            "x": (min(o[1] for o in fp.offsets), max(o[1] for o in fp.offsets))}
    uniform = set()
    for axis in "yx":
        lows = [e for s, e in bounds[axis] if s == "lo"]
        highs = [e for s, e in bounds[axis] if s == "hi"]
        for hi in highs:
            uniform.add(sympy.Le(first[axis], hi))
            for lo in lows:
                uniform.add(sympy.Le(lo, hi))
        for lo in lows:
            uniform.add(sympy.Le(lo, first[axis] + size[axis] - 1))
    terms = []
    for dy0, dy1, dx0, dx1 in _runs(fp.offsets):
        clauses = []
        for axis, (a, b) in (("y", (dy0, dy1)), ("x", (dx0, dx1))):
            gv = gsym[axis]
            if b != span[axis][1]:
                clauses.append(sympy.Le(gv, first[axis] + size[axis] - 1 + b))
            if a != span[axis][0]:
                clauses.append(sympy.Ge(gv, first[axis] + a))
            for side, e in bounds[axis]:
                clauses.append(sympy.Le(gv, e + b) if side == "hi" else sympy.Ge(gv, e + a))
        terms.append([c for c in clauses if c is not sympy.true])
    uniform = [u for u in uniform if u is not sympy.true]
    if any(u is sympy.false for u in uniform):
        raise Unsupported("no thread of a block passes the guard")
    pred = " || ".join(("(" + " && ".join(_rel(c) for c in t) + ")") if len(terms) > 1 and len(t) > 1
                       else " && ".join(_rel(c) for c in t) for t in terms if t) if all(terms) else None
    return pred or None, " && ".join(sorted(_rel(u) for u in uniform)) or None


def _rel(r) -> str:
    """`a <= b` as C text, `a < b + 1` when that reads better (`gc < w` rather than `gc <= w - 1`)."""
    return _relation(r)


def _relation(r) -> str:
    lhs, rhs, op = (r.lhs, r.rhs, "<=") if isinstance(r, sympy.Le) else (r.lhs, r.rhs, ">=")
    if op == "<=" and not sympy.expand(rhs).is_number:
        return f"{cuda_text(lhs)} < {cuda_text(sympy.expand(rhs + 1))}"
    if op == ">=" and sympy.expand(rhs).as_coeff_Add()[0] > 0:
        return f"{cuda_text(lhs)} > {cuda_text(sympy.expand(rhs - 1))}"
    return f"{cuda_text(lhs)} {op} {cuda_text(rhs)}"


# -- the pass's part ------------------------------------------------------------------------------------
def halo_blocks(target: Target, naive: tuple[int, int]) -> list[tuple[int, int]]:
    """Outputs (and threads) per block, best first: rows of one request, 256 threads (the paper's 16x16 on
    g80), else the naive block (which needs no guard to cover the naive threads)."""
    w = target.request_threads
    return list(dict.fromkeys([(w, max(1, 256 // w)), tuple(naive)]))


def stage_halos(work: Kernel, ctx: PassContext, info: KernelInfo, fps: list[Footprint],
                others: list) -> list | None:
    """Stage the footprints that pay in halo tiles (the kernel and its launch rewritten), with them the
    reads of `others` (AccessReports of reads to stage) that every thread makes alike over loops of constant
    bounds (a filter: `uniform_tile`). Returns the reports staged, [] (with notes) when nothing is."""
    where = Location.of(work.funcdef)
    problem = None
    for block in halo_blocks(ctx.options.target, ctx.facts.naive_block):
        problem = info.coverage_problem(ctx.facts.naive_block, block)
        if not problem:
            break
    if problem:
        for fp in fps:
            ctx.log.skip(_subject(fp), f"no halo tile: {problem}", fp.reads[0].location)
        return False
    out_bytes = max((a.element_bytes for a in info.accesses if a.mode == "write"), default=0)
    names = {"e": info.fresh("elem"), "gr": info.fresh("row"), "gc": info.fresh("col"), "y0": info.fresh("row0"),
             "x0": info.fresh("col0")}
    staged = []
    budget = ctx.options.target.shared_per_block
    for fp in fps:
        try:
            param = info.params[fp.array]
            if param.base_type not in _ELEMENT:
                raise Unsupported(f"elements of type {param.base_type} are not staged")
            if any(not (isinstance(a.node.name, c_ast.ID) and a.node.name.name == fp.array) for a in fp.reads):
                raise Unsupported("the array is read through a pointer alias")
            tile = HaloTile.plan(fp, block, block, ctx.options.target, info.fresh(f"tile_{fp.array}"), param.base_type)
            if tile.bytes > budget:
                raise Unsupported(f"the tile needs {tile.bytes} bytes of shared memory, {budget} are left")
            if any(loop_values(l, {}) is None for a in fp.reads for l in a.loops if l.var in fp.loops):
                raise Unsupported("the filter's size is a parameter: a tile sized for its bound value would "
                                  "not hold other sizes (a loop over tile steps is not built)")
            bounds, uniform = _guard_bounds(fp.reads, info)
            pays, why = staging_pays(fp, block, tile, ctx.options.target, out_bytes)
            if not pays:
                raise Unsupported(why)
            top = _first_top(fp, info)
            alias = _aliasing_store(fp, info, top)
            if alias:
                raise Unsupported(alias)
            predicate, block_guard = reader_predicate(fp, bounds, block, names)
            if uniform:
                block_guard = " && ".join([text(u) for u in uniform] + ([block_guard] if block_guard else []))
        except Unsupported as why:
            ctx.log.skip(_subject(fp), f"no halo tile: {why}", fp.reads[0].location)
            continue
        budget -= tile.bytes
        staged.append((fp, tile, top, predicate, block_guard, why))
    if not staged:
        return None
    items = list(work.body.block_items or [])
    replacement = {}
    alike = []
    for rep in others:
        try:
            u = uniform_tile(rep.access, info, staged[0][0].reads, budget, names)
        except Unsupported as why:
            ctx.log.skip(f"{rep.access.array}[{rep.access.index_text}]", f"not staged: {why}", rep.access.location)
            continue
        budget -= u.bytes
        alike.append((rep, u))
        replacement[id(rep.access.node)] = u.read
    for fp, tile, *_ in staged:
        for a in fp.reads:
            replacement[id(a.node)] = tile.read(*fp.offset_of[id(a.node)])
    at = min(s[2] for s in staged)
    loads = []
    for fp, tile, top, predicate, block_guard, _ in staged:
        up, down, left, right = fp.reach
        loads.append(Comment(f"coalesce: stage the {fp.array} reads' footprint in {tile.name} ({tile.rows}x"
                             f"{tile.cols}: the block's {block[0]}x{block[1]} outputs and the stencil's reach, "
                             f"{up} up, {down} down, {left} left, {right} right), each element once"))
        if len(loads) == 1:
            loads.extend(parse_statements(f"const int {names['y0']} = blockIdx.y * {block[1]};\n"
                                          f"const int {names['x0']} = blockIdx.x * {block[0]};"))
        loads.extend(parse_statements(tile.loader(block, names, predicate, block_guard)))
    for rep, u in alike:
        loads.append(Comment(f"coalesce: stage {u.array}[{rep.access.index_text}], the same for every thread, "
                             f"in {u.name} ({u.size} elements), each element once"))
        loads.extend(parse_statements(u.loader(block, names, staged[0][4])))
    loads.extend(parse_statements("__syncthreads();"))
    items[at:at] = loads
    work.body.block_items = items
    transform(work.body, lambda n: replacement.get(id(n)))
    work.launch = LaunchConfig(block=block, outputs_per_block=block)
    for fp, tile, _, _, _, why in staged:
        dims = f"{tile.name}[{tile.rows}][{tile.cols + tile.pad}]"
        pad = (f"rows padded by {tile.pad}" if tile.pad else "no padding needed") + \
            f": reads and loader writes are conflict-free on {ctx.options.target.shared_banks} banks"
        ctx.log.applied(_subject(fp), f"staged through shared memory in a halo tile {dims} ({fp.describe(block)}); "
                                  f"loaded cooperatively with coalesced rows, only the elements the block's "
                                  f"threads read; {pad}; {why}", fp.reads[0].location)
    for rep, u in alike:
        ctx.log.applied(f"{rep.access.array}[{rep.access.index_text}]",
                    f"staged through shared memory: the same elements for every thread, loaded once per block "
                    f"with coalesced requests into {u.name}[{u.size}] with the halo tiles", rep.access.location)
    ctx.log.applied("launch", f"blocks of {block[0]}x{block[1]} threads, one thread per output, each block "
                          f"loading its tiles once", where)
    return [rep for rep, _ in alike]


@dataclass
class UniformTile:
    array: str
    name: str
    elem_type: str
    first: int
    size: int
    read: c_ast.Node

    @property
    def bytes(self) -> int:
        return self.size * _ELEMENT[self.elem_type]

    def loader(self, threads, names, block_guard) -> str:
        return render("coalesce_halo_uniform.cu.j2", elem_type=self.elem_type, tile=self.name, size=self.size,
                      bx=threads[0], by=threads[1], e=names["e"], array=self.array, block_guard=block_guard,
                      first=f"{self.first} + " if self.first else "")


def uniform_tile(a, info: KernelInfo, halo_reads: list, budget: int, names: dict) -> UniformTile:
    """A read free of thread indices over loops of constant bounds, under the same guard as the halo reads:
    its elements (a contiguous range) in a 1-D tile, read back at the subscript less the first element."""
    param = info.params.get(a.array)
    if a.index is None or param is None or param.base_type not in _ELEMENT or a.array in info.written:
        raise Unsupported("not a read-only array of a staged type")
    if a.index.free_symbols & (set(TID.values()) | set(BID.values())):
        raise Unsupported("the subscript depends on the thread; only the halo reads are staged")
    values = {}
    for loop in a.loops:
        if sympy.Symbol(loop.var, integer=True) in a.index.free_symbols:
            vals = loop_values(loop, info.ctx.facts.bindings)
            if vals is None:
                raise Unsupported(f"the '{loop.var}' loop has no constant bounds")
            values[sympy.Symbol(loop.var, integer=True)] = vals
    if a.index.free_symbols - set(values):
        raise Unsupported("the subscript depends on more than constant-bound loops")
    seen = {int(a.index.subs(dict(zip(values, combo)))) for combo in itertools.product(*values.values())}
    lo, hi = min(seen), max(seen)
    if len(seen) != hi - lo + 1:
        raise Unsupported("the elements read are not contiguous")
    for f in g.frames_to(a.node, info.parents, info.body):
        loop = next((l for l in a.loops if l.node is f.node), None)
        if f.kind == "for" and (loop is None or loop_values(loop, info.ctx.facts.bindings) is None):
            raise Unsupported("a loop around the read does not run a fixed number of times")
    if [f.node for f in g.frames_to(a.node, info.parents, info.body) if f.kind in ("if", "else")] != \
            [f.node for f in g.frames_to(halo_reads[0].node, info.parents, info.body) if f.kind in ("if", "else")]:
        raise Unsupported("it is read under other conditions than the halo tile")
    size = hi - lo + 1
    if size * _ELEMENT[param.base_type] > budget:
        raise Unsupported(f"its {size} elements do not fit the shared memory left")
    name = info.fresh(f"tile_{a.array}")
    subscript = text(a.node.subscript)
    read = parse_expr(f"{name}[{subscript if lo == 0 else f'({subscript}) - {lo}'}]")
    return UniformTile(a.array, name, param.base_type, lo, size, read)


def _subject(fp: Footprint) -> str:
    return f"{fp.array}[{fp.reads[0].index_text}]" + (f" and {len(fp.reads) - 1} more reads of {fp.array}"
                                                      if len(fp.reads) > 1 else "")


def _first_top(fp: Footprint, info: KernelInfo) -> int:
    items = info.body.block_items or []
    return min(items.index(g.path_to(a.node, info.parents, info.body)[1]) for a in fp.reads)


def _aliasing_store(fp: Footprint, info: KernelInfo, top: int) -> str | None:
    """A store between the tile's load and a read, to an array that may alias the staged one."""
    last = max((info.body.block_items or []).index(g.path_to(a.node, info.parents, info.body)[1])
               for a in fp.reads)
    view = SimpleNamespace(top_index=last, nodes=[a.node for a in fp.reads], access=fp.reads[0])
    return _write_between(view, info, top)


__all__ = ["HaloTile", "staging_pays", "reader_predicate", "stage_halos", "halo_blocks"]
