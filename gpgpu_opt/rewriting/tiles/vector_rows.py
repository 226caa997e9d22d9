"""16-byte loads of a transposed tile whose rows are contiguous in global memory.

The scalar loader has each thread load one element of a tile row per pass (`loader`). On targets whose
preferred access is 16 bytes (`Target.preferred_vector_bytes`; `--vector-width 1` keeps the scalar loads)
each thread instead loads V consecutive elements of a row as one vector (float4: V = 4): C/V threads per
row of C elements, every pass covering n/(C/V) rows for n threads, and stores the V components into the
(still padded) tile as scalars, so the reads of its columns stay conflict-free and one barrier follows.

A vector load is only correct where its address is V-element aligned:
- the row start: the tile element [row][0]'s subscript, a polynomial in the block index, the loader's row
  and the kernel's scalars, must be a multiple of V for every row: a term whose coefficient is not a
  multiple needs a scalar factor that is (known from the bindings, else tested at run time: `cols % 4 == 0`);
  a term of indices alone whose coefficient is not a multiple makes the vector form impossible;
- the base: `analysis.alignment`'s proof from the cudaMalloc'd launch arguments, else `((size_t) in & 15) == 0`
  at run time.
Ragged edges: the vector loads carry no predicate, so they run only in blocks whose whole tile the naive
threads read. Each clause of an element's predicate must be a comparison affine in the tile's row and column
(integer coefficients): it then holds on the whole tile if it holds at the corner where its slack is least
(`blockIdx.x * 64 + 63 < rows`). Those clauses and whatever alignment is not proved make one block-uniform
test that selects the vector loads; the other branch is today's scalar loads, predicated element by element
(zeros where the naive kernel reads nothing), so no access is added that the naive kernel would not make and
the barrier after the load stays in uniform control flow.
"""
from __future__ import annotations

import math
from typing import Callable

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, NotAffine, param_symbol, to_sympy
from gpgpu_opt.ast_util import substitute, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.tiles.staged import Plan
from gpgpu_opt.rewriting.cbuild import Unsupported, const, is_placeholder, parse_expr, text
from gpgpu_opt.rewriting.witness import fold
from gpgpu_opt.rewriting.vector import COMPONENTS, parse_vector_statements, vector_type
from gpgpu_opt.templating import render


#: (row, column, names the two use) -> (the element's global ArrayRef, the clauses of its predicate).
ElementLoad = Callable[[c_ast.Node, c_ast.Node, set], tuple]


def vectorize_loads(p: Plan, info: KernelInfo, block, threads, element: ElementLoad) -> None:
    """Replace the scalar `p.statements` by vector loads where the target prefers them and they are safe;
    `p.load_note` says which loads the tile gets and why."""
    ctx = info.ctx
    width = _width(p, ctx)
    if width is None:
        return
    nbytes = width * p.tile.elem_bytes
    try:
        statements, why = _vector_statements(p, info, block, threads, element, width)
    except Unsupported as not_vector:
        p.load_note = f"{p.tile.elem_bytes}-byte loads, not {nbytes}: {not_vector}"
        return
    p.statements = statements
    p.load_note = f"each thread loads {width} consecutive elements of a row as one {nbytes}-byte load, {why}"


def _width(p: Plan, ctx) -> int | None:
    """Elements per vector load, or None where the tile keeps its scalar loads without a note (a target
    that does not prefer 16-byte accesses, `--vector-width 1`, a tile that is not a transposed 2-D one)."""
    if ctx.options.target.preferred_vector_bytes < 16 or ctx.options.vector_width == 1:
        return None
    if p.anchor is not None or not p.tile.two_d or p.shape.col is None or p.shape.col.kind not in ("x", "y"):
        return None
    width = ctx.options.vector_width or ctx.options.target.preferred_vector_bytes // p.tile.elem_bytes
    width = min(width, 16 // p.tile.elem_bytes)
    return width if vector_type(p.tile.elem_type, width) else None


def _vector_statements(p: Plan, info: KernelInfo, block, threads, element: ElementLoad, width: int):
    tile = p.tile
    if int(p.shape.col.coef) != 1:
        raise Unsupported("the tile's rows are not contiguous in global memory")
    if tile.cols % width:
        raise Unsupported(f"rows of {tile.cols} elements are not whole vectors")
    per_row = tile.cols // width
    n = threads[0] * threads[1]
    if n % per_row:
        raise Unsupported(f"{n} threads do not load whole rows of {per_row} vectors")
    per_pass = n // per_row
    inside = _tile_inside(p, info, element)
    tid, vrow, vcol = info.fresh("tid"), info.fresh("vrow"), info.fresh("vcol")
    row_var = p.loader.row_loop[0] if p.loader.row_loop else info.fresh("rr")
    names = {tid, vrow, vcol, row_var}
    first, _ = element(parse_expr(f"{row_var} + {vrow}"), parse_expr(vcol), names)
    aligned, proved = _alignment(p, info, block, first, names, vcol, width)
    tests = aligned + [text(c) for c in inside]
    vtype = vector_type(tile.elem_type, width)
    source = render(
        "coalesce_tile_vector.cu.j2", test=" && ".join(f"({t})" if "&" in t else t for t in tests), tid=tid,
        tid_expr="threadIdx.x" if threads[1] == 1 else f"threadIdx.y * {threads[0]} + threadIdx.x",
        vrow=vrow, vcol=vcol, per_row=per_row, width=width, rr=row_var, rows=tile.rows, per_pass=per_pass,
        row_guard=None if tile.rows % per_pass == 0 else f"{row_var} + {vrow} < {tile.rows}",
        vtype=vtype, value=info.fresh("v"), vector_load=f"*(const {vtype} *) &{text(first)}", tile=tile.name,
        components=COMPONENTS[:width])
    statements = parse_vector_statements(source, {vtype})
    nbytes = width * tile.elem_bytes
    if tests:
        for node in walk(statements[-1]):
            if isinstance(node, c_ast.Compound):
                node.block_items = [s for item in node.block_items or []
                                    for s in (p.statements if is_placeholder(item, "__coalesce_scalar__") else [item])]
        parts = (["the naive threads read the block's whole tile"] if inside else []) + \
            ([f"its rows start {nbytes}-byte aligned"] if aligned else [])
        note = (f"{nbytes}-byte loads, {width} elements of a row per thread, where {' and '.join(parts)}; "
                "otherwise element by element")
        why = (f"tested at run time, per block ({' and '.join(tests)}; else the scalar loads)"
               + (f"; proved: {proved}" if proved else ""))
    else:
        note = f"{nbytes}-byte loads, {width} elements of a row per thread: the rows start aligned"
        why = f"alignment proved ({proved}), the tile always lies inside what the naive threads read"
    statements.insert(0, Comment(note))
    return statements, why


def _tile_inside(p: Plan, info: KernelInfo, element: ElementLoad) -> list:
    """Block-uniform clauses under which the naive kernel reads every element of the block's tile: each
    clause of an element's predicate must be a comparison affine in the tile's row and column (integer
    coefficients), so it holds on the whole tile if it holds at the corner where its slack is least."""
    tile = p.tile
    row, col = info.fresh("tile_row"), info.fresh("tile_col")
    _, clauses = element(c_ast.ID(row), c_ast.ID(col), {row, col})
    env = {**info.flat_env(), row: sympy.Symbol(row, integer=True), col: sympy.Symbol(col, integer=True)}
    out = []
    for clause in clauses:
        found = g.slack(clause, env)
        if found is None:
            raise Unsupported(f"the guard '{text(clause)}' is not a comparison the tile's corners decide")
        corner = {}
        for name, extent in ((row, tile.rows), (col, tile.cols)):
            coef = sympy.diff(found[0], env[name])
            if not coef.is_Integer:
                raise Unsupported(f"the guard '{text(clause)}' is not affine in the tile's row and column")
            corner[name] = const(extent - 1 if coef < 0 else 0)
        at_corner = fold(substitute(clause, corner))
        if at_corner is False:
            raise Unsupported("no block's tile is read whole by the naive threads")
        if at_corner is True:
            continue
        if not info.uniform(at_corner):
            raise Unsupported(f"the guard '{text(clause)}' differs between the threads of a block")
        if all(text(at_corner) != text(c) for c in out):
            out.append(at_corner)
    return out


def _alignment(p: Plan, info: KernelInfo, block, first: c_ast.ArrayRef, names: set[str], vcol: str,
               width: int):
    """The run-time tests the vector loads need (C text, block-uniform) and what is proved without them."""
    ctx = info.ctx
    env = {**info.flat_env(), **{name: sympy.Symbol(name, integer=True) for name in names}}
    # The loader's column is a multiple of the width by construction.
    env[vcol] = width * sympy.Symbol(f"{vcol}_vector", integer=True)
    try:
        start = sympy.expand(to_sympy(first.subscript, env).subs(
            {BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: 1}))
        terms = sympy.Poly(start, *sorted(start.free_symbols, key=str)).terms() if start.free_symbols else \
            [((), start)]
    except (NotAffine, sympy.PolynomialError):
        raise Unsupported("the row start is not a polynomial in the indices and sizes") from None
    symbols = sorted(start.free_symbols, key=str)
    scalars = {param_symbol(name): name for name in info.scalars}
    tests, proved = [], []
    for powers, coef in terms:
        if not coef.is_Integer:
            raise Unsupported("the row start has a non-integer coefficient")
        need = width // math.gcd(int(coef), width)
        if need == 1:
            continue
        factors = [scalars[s] for s, e in zip(symbols, powers) if e and s in scalars]
        bound = [f for f in factors if f in ctx.facts.bindings and ctx.facts.bindings[f] % need == 0]
        if bound:
            fact = f"{bound[0]} = {ctx.facts.bindings[bound[0]]}"
            if fact not in proved:
                proved.append(fact)
            continue
        if not factors:
            raise Unsupported(f"a row start is not a multiple of {width} elements")
        test = f"{factors[0]} % {need} == 0"
        if test not in tests:
            tests.append(test)
    array = p.access.array
    nbytes = width * p.tile.elem_bytes
    if ctx.facts.alignment.get(array, 0) >= nbytes:
        proved.append(f"'{array}' is a cudaMalloc'd buffer at every launch")
    else:
        tests.append(f"((size_t) {array} & {nbytes - 1}) == 0")
    return tests, ", ".join(proved)
