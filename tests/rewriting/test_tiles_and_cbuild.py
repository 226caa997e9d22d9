"""rewriting/cbuild.py and rewriting/tiles/geometry.py alone, without a kernel: the C-building kit, a staged tile's geometry (row and
column roles, extents), the cooperative loader (every element loaded exactly once, by the lanes it says),
the bank-conflict padding and the generated-snippet parser. The geometry of the paper's tiles is checked
against what the golden outputs carry (mv's `tile_A[32][17]` loaded in 16 passes of 2 rows, transpose's
`tile_in[16][17]`)."""
import itertools
import re

import pytest
import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import TID
from gpgpu_opt.rewriting import cbuild
from gpgpu_opt.rewriting.tiles import geometry
from gpgpu_opt.rewriting.cbuild import (Unsupported, add, conj, const, mul, parse_expr, parse_statements, text)
from gpgpu_opt.rewriting.tiles.geometry import (Dim, Shape, Tile, TileStep, choose_padding, classify, plan_loader,
                                                read_ref, tile_extent)

N = sympy.Symbol("n", integer=True, positive=True)
K = sympy.Symbol("k", integer=True)
X, Y = TID["x"], TID["y"]


# -- the C-building kit -------------------------------------------------------------------------------
def test_add_and_mul_drop_identities_and_build_the_rest():
    a = c_ast.ID("a")
    assert add(None, a) is a and add(a, None) is a
    assert add(a, const(0)) is a and add(const(0), a) is a
    assert text(add(a, const(3))) == "a + 3"
    assert mul(a, 1) is a
    assert text(mul(const(0), 7)) == "0"
    assert text(mul(a, 4)) == "a * 4"


def test_conj_chains_clauses_left_to_right_and_is_none_for_no_clause():
    assert conj([]) is None
    only = parse_expr("x < n")
    assert conj([only]) is only
    assert text(conj([parse_expr("x < n"), parse_expr("y < m"), parse_expr("k < p")])) == "x < n && y < m && k < p"


def test_builtin_is_what_is_builtin_recognises():
    ref = cbuild.builtin("threadIdx", "y")
    assert text(ref) == "threadIdx.y"
    assert cbuild.is_builtin(ref, "threadIdx", "y")
    assert not cbuild.is_builtin(ref, "threadIdx", "x") and not cbuild.is_builtin(ref, "blockIdx", "y")
    assert not cbuild.is_builtin(c_ast.ID("threadIdx"), "threadIdx", "y")


def test_generated_snippets_parse_as_statements_and_expressions():
    stmts = parse_statements("int a = threadIdx.x;\nfloat4 v;\nif (a < 4) a += 2;")
    assert [type(s).__name__ for s in stmts] == ["Decl", "Decl", "If"]
    assert text(parse_expr("(a + 1) * b")) == "(a + 1) * b"
    __shared__ = parse_statements("__shared__ float t[4];")[0]
    assert "__shared__" in text(__shared__)     # CUDA's storage class survives the C parser


def test_a_snippet_that_does_not_parse_is_an_internal_unsupported_not_a_crash():
    with pytest.raises(Unsupported, match="internal: generated code does not parse"):
        parse_statements("int = ;")


def test_placeholder_calls_are_recognised_by_name():
    (call,) = parse_statements("__body(1);")
    assert cbuild.is_placeholder(call, "__body") and not cbuild.is_placeholder(call, "__other")


# -- tile geometry ------------------------------------------------------------------------------------
def test_classify_gives_the_symbolic_stride_the_rows_and_the_unit_stride_the_columns():
    shape = classify(X * N + Y, (16, 16), None, 1, 16)          # transpose's in[x * cols + y]
    assert (shape.row.kind, shape.row.coef, shape.row.extent) == ("x", N, 16)
    assert (shape.col.kind, shape.col.coef, shape.col.extent) == ("y", 1, 16)
    shape = classify(X * N + K, (32, 1), K, 1, 16)              # mv's A[r * cols + c], c the anchor loop
    assert (shape.row.kind, shape.col.kind, shape.col.coef) == ("x", "u", 1)


def test_classify_ignores_an_axis_of_one_thread():
    shape = classify(Y * N + X, (256, 1), None, 1, 16)
    assert shape.row is None and shape.col.kind == "x"


@pytest.mark.parametrize("index, why", [
    (-X + N, "decreases"),
    (X * N + Y * N * N, "more than one dimension"),
    (X + 2 * K, "moves along a row in more than one dimension"),
    (X * Y + X, "not affine"),
])
def test_classify_refuses_what_it_cannot_stage(index, why):
    with pytest.raises(Unsupported, match=why):
        classify(index, (16, 16), K, 1, 16)


def test_a_loop_counting_down_is_classified_by_its_step():
    """`anchor_stride` -1: a subscript that grows as the iterator falls is a decreasing one."""
    with pytest.raises(Unsupported, match="decreases"):
        classify(X * N + K, (16, 1), K, -1, 16)


def test_unroll_factor_reads_whole_segments():
    assert Shape(None, Dim("u", sympy.Integer(2))).unroll_factor(16) == 8      # 16 / gcd(2, 16)
    assert Shape(None, Dim("u", sympy.Integer(3))).unroll_factor(16) == 16
    assert Shape(Dim("u", N), Dim("x", sympy.Integer(1), 16)).unroll_factor(16) == 16


def test_tile_extent_covers_the_reach_of_the_column_stride():
    assert tile_extent(Shape(Dim("x", N, 32), Dim("u", sympy.Integer(1))), 16) == (32, 16)
    assert tile_extent(Shape(None, Dim("x", sympy.Integer(2), 16)), 1) == (1, 31)   # 2 * 15 + 1
    assert tile_extent(Shape(Dim("u", N), None), 8) == (8, 1)
    assert tile_extent(Shape(Dim("y", N, 16), Dim("u", sympy.Integer(2))), 8) == (16, 16)


def test_tile_declaration_pads_rows_and_counts_its_bytes():
    tile = Tile("tile_A", "float", 4, Shape(Dim("x", N, 32), Dim("u", sympy.Integer(1))), 32, 16, pad=1)
    assert tile.declaration() == "__shared__ float tile_A[32][17];"               # g80 mv's tile
    assert tile.two_d and tile.bytes == 32 * 17 * 4
    flat = Tile("tile_x", "float", 4, Shape(None, Dim("u", sympy.Integer(1))), 1, 16)
    assert flat.declaration() == "__shared__ float tile_x[16];" and not flat.two_d


def test_read_ref_replaces_the_global_read_by_the_tile_element_the_thread_wants():
    transposed = Tile("tile_in", "float", 4, classify(X * N + Y, (16, 16), None, 1, 16), 16, 16)
    assert text(read_ref(transposed, None)) == "tile_in[threadIdx.x][threadIdx.y]"
    rows = Tile("tile_A", "float", 4, classify(X * N + K, (32, 1), K, 1, 16), 32, 16)
    assert text(read_ref(rows, TileStep("c", "c0", 1, 16, False))) == "tile_A[threadIdx.x][c - c0]"
    strided = Tile("tile_B", "float", 4, Shape(None, Dim("u", sympy.Integer(2))), 1, 16)
    assert text(read_ref(strided, TileStep("k", "k0", 1, 8, False))) == "tile_B[(k - k0) * 2]"


def test_read_ref_refuses_a_column_stride_that_the_loop_step_does_not_divide():
    strided = Tile("tile_B", "float", 4, Shape(None, Dim("u", sympy.Integer(3))), 1, 24)
    with pytest.raises(Unsupported, match="not a multiple of the loop step"):
        read_ref(strided, TileStep("k", "k0", 2, 8, False))


def test_a_step_counting_down_starts_at_its_lowest_value_and_leads_by_the_gap():
    up, down = TileStep("k", "k0", 1, 16, False), TileStep("k", "k0", 2, 16, True)
    assert text(up.lowest()) == "k0" and up.lead(3) == 0
    assert text(down.lowest()) == "k0 - 30" and down.lead(3) == 2


# -- the cooperative loader ---------------------------------------------------------------------------
def _c_value(expression: str, names: dict) -> int:
    """A loader's C text (integer + - * / % <, &&) evaluated for non-negative values."""
    python = expression.replace("&&", " and ").replace("/", "//")
    python = re.sub(r"threadIdx\.([xy])", r"t\1", python)
    return eval(python, {}, names)    # the expression is the loader's own output, over the names given


def _loaded_elements(loader, block) -> list[tuple[int, int]]:
    """Every (row, col) some thread stores in some pass, with repeats, as the generated loop nest runs."""
    passes = [range(0, loader.row_loop[1], loader.row_loop[2])] if loader.row_loop else [[0]]
    passes += [range(0, loader.col_loop[1], loader.col_loop[2])] if loader.col_loop else [[0]]
    stored = []
    for ty, tx, r, c in itertools.product(range(block[1]), range(block[0]), *passes):
        names = {"tx": tx, "ty": ty, "rr": r, "cc": c}
        if loader.guard is None or _c_value(loader.guard, names):
            stored.append((_c_value(loader.row, names), _c_value(loader.col, names)))
    return stored


@pytest.mark.parametrize("rows, cols, block", [
    (16, 16, (16, 16)),      # transpose's tile: one element per thread
    (32, 16, (32, 1)),       # mv's: 16 passes of 2 rows
    (1, 256, (256, 1)),      # a row of exactly one block
    (1, 16, (256, 1)),       # a short row: 16 threads load, the rest wait
    (4, 600, (256, 1)),      # rows longer than the block: chunks, the last one partial
    (16, 1, (256, 1)),       # a column
    (20, 24, (32, 8)),       # 256 threads, rows of 24: 10 rows per pass, the last pass partial
    (3, 24, (16, 4)),        # fewer rows than one pass holds
    (31, 31, (16, 16)),      # conv's footprint tile
])
def test_the_loader_stores_every_tile_element_exactly_once(rows, cols, block):
    loader = plan_loader(rows, cols, block, "rr", "cc")
    stored = _loaded_elements(loader, block)
    assert sorted(stored) == [(r, c) for r in range(rows) for c in range(cols)]


@pytest.mark.parametrize("rows, cols, block", [(32, 16, (32, 1)), (20, 24, (32, 8)), (1, 16, (256, 1))])
def test_the_loaders_lanes_are_what_the_first_pass_stores(rows, cols, block):
    """`lanes` is what the padding judges the writes by: it must be the first pass's (row, col) by thread."""
    loader = plan_loader(rows, cols, block, "rr", "cc")
    for t, lane in enumerate(loader.lanes):
        names = {"tx": t % block[0], "ty": t // block[0], "rr": 0, "cc": 0}
        assert (_c_value(loader.row, names), _c_value(loader.col, names)) == lane


def test_consecutive_threads_load_consecutive_columns():
    """What makes the staged read coalesced: within a row, the column follows the thread index."""
    loader = plan_loader(32, 16, (32, 1), "rr", "cc")
    assert (loader.row, loader.col, loader.row_loop, loader.guard) == \
        ("rr + threadIdx.x / 16", "threadIdx.x % 16", ("rr", 32, 2), None)
    tile = Tile("tile_A", "float", 4, Shape(Dim("x", N, 32), Dim("u", sympy.Integer(1))), 32, 16, pad=1)
    statements = geometry.loader_statements(tile, loader, parse_expr("A[i]"), parse_expr("i < n"))
    assert text(statements[-1]).strip() == "for (int rr = 0; rr < 32; rr += 2)\n" \
        "  tile_A[rr + threadIdx.x / 16][threadIdx.x % 16] = (i < n) ? A[i] : 0.0f;"


# -- bank-conflict padding ----------------------------------------------------------------------------
def test_a_transposed_read_gets_one_column_of_padding():
    """Threads of a half-warp read down a column: 16 rows of 16 floats all hit one bank; 17 spread them."""
    shape = classify(X * N + Y, (16, 16), None, 1, 16)
    tile = Tile("tile_in", "float", 4, shape, 16, 16)
    loader = plan_loader(16, 16, (16, 16), "rr", "cc")
    assert choose_padding(tile, (16, 16), loader, banks=16, bank_bytes=4, group=16) == (1, 1, 1)
    wide = Tile("tile_in", "float", 4, classify(X * N + Y, (32, 8), None, 1, 32), 32, 8)
    pad, read_degree, _ = choose_padding(wide, (32, 8), plan_loader(32, 8, (32, 8), "rr", "cc"), 32, 4, 32)
    assert read_degree == 1 and (8 + pad) % 2 == 1


def test_a_row_read_needs_no_padding_and_a_flat_tile_none_at_all():
    rows = Tile("tile_A", "float", 4, Shape(Dim("u", N), Dim("x", sympy.Integer(1), 16)), 16, 16)
    assert choose_padding(rows, (16, 1), plan_loader(16, 16, (16, 1), "rr", "cc"), 16, 4, 16) == (0, 1, 1)
    flat = Tile("tile_x", "float", 4, Shape(None, Dim("u", sympy.Integer(1))), 1, 16)
    assert choose_padding(flat, (16, 1), plan_loader(1, 16, (16, 1), "rr", "cc"), 16, 4, 16) == (0, 1, 1)


def test_doubles_take_two_banks_each():
    """8-byte elements over 4-byte banks: a 16-wide column read needs an odd padding in words."""
    shape = classify(X * N + Y, (16, 16), None, 1, 16)
    tile = Tile("tile_in", "double", 8, shape, 16, 16)
    pad, read_degree, _ = choose_padding(tile, (16, 16), plan_loader(16, 16, (16, 16), "rr", "cc"), 32, 4, 16)
    assert read_degree == 1 and pad >= 1
