"""The window's interior fast path: where every copy's guard provably holds, the copies run unguarded and
each output row is stored as one vector.

Measured on an H200 (the lead's hand edits of the generated 3x3 blur, 8192^2): per-copy guards and four
scalar stores per thread at a 16-byte lane stride kept the window kernel L1/LSU-bound (slower than naive);
the unguarded interior with one float4 store per row halved its time. The guarded copies stay as the else
path for the ragged edges. Rows that are not aligned (a width that is not a multiple of V) stay in the
interior with element stores: H200, a 3x3 blur at 1037x773 went from 0.77x naive (every thread on the
guarded path) to 1.03x, a Sobel filter at 1921x1079 from 0.78x to 1.25x.

Safety:
- the fast path is taken only where the naive guard `if (G) { S }` holds for all V x R copies: each bound
  of G on x or y at the corners x0, x0 + V - 1 (y0, y0 + R - 1), and G's clauses on parameters;
- a store `P[y * pitch + x + c] = e` that S runs unconditionally becomes `P_row[v] = e`, stored after the
  copies of a row as aligned vectors: P is stored once and never read by the kernel, and no read follows
  the store (the deferred store changes no value read) unless the pointers are restrict; the vector's
  alignment is proved (cudaMalloc'd base, pitch and c multiples of the width) or checked at run time before
  each row's stores (warp-uniform: it depends on parameters only), the row stored element by element where
  it fails.
"""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.passes.merge.stencil_window.plan import Interior, Window, ccode as _c
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import parse_expr, parse_statements
from gpgpu_opt.templating import render


def fast_path(interior: Interior, copies: list[c_ast.Node], names: dict, w: Window, info: KernelInfo) -> list[c_ast.Node]:
    """`if (interior) { unguarded copies, vector stores } else { copies }` (copies: the guarded loops)."""
    V, R = w.vector, w.rows
    x0, y0, r, v = names["x0"], names["y0"], names["r"], names["v"]
    memo: dict = {}
    body = copy.deepcopy(g.items(info.body), memo)
    stores = []
    for s in interior.stores:
        row = info.fresh(f"{s.array}_row")
        node = memo[id(s.node)]
        node.lvalue = parse_expr(f"{row}[{v}]")
        at = f"({y0} + {r}) * {_c(s.pitch)} + {x0}"
        stores.append(dict(row=row, array=s.array, width=s.width, vtype=f"float{s.width}",
                           element_at=at + (f" + {s.offset}" if s.offset else ""),
                           pairs=[dict(at=at + (f" + {k + s.offset}" if k + s.offset else ""),
                                       parts=[f"{row}[{k}]", f"{row}[{k + 1}]"]) for k in range(0, V, 2)],
                           chunks=[
            dict(at=at + (f" + {k + s.offset}" if k + s.offset else ""), parts=[f"{row}[{k + j}]" for j in range(s.width)])
            for k in range(0, V, s.width)]))
    lead = next((k for k, s in enumerate(body) if not isinstance(s, c_ast.Decl)), len(body))
    statements = g.items(body[-1].iftrue) if interior.guard is not None else body[lead:]
    unguarded = _drop_unused(body[:lead], statements)
    condition = _condition(interior, w, names)
    aligned = _aligned(interior)
    pairs = _pairs_aligned(interior) if aligned else None
    skeleton = parse_statements(render("merge_stencil_window_interior.cu.j2", condition=condition,
                                       aligned=aligned, pairs=pairs, stores=stores, vector=V, rows=R, r=r, v=v))
    branch = skeleton[0]
    loop_v = next(n for n in walk(branch.iftrue) if isinstance(n, c_ast.For) and isinstance(n.stmt, c_ast.Compound)
                  and not n.stmt.block_items)
    loop_v.stmt = c_ast.Compound(unguarded)
    widths = sorted({f"float{s['width']}" for s in stores})
    how = f"each row of {', '.join(s['array'] for s in stores)} one {' / '.join(widths)} store" if stores else ""
    how += " where aligned (else element by element)" if aligned else ""
    if interior.guard is None:          # no guard to drop: the whole body is the interior
        return [Comment(f"the copies' stores widened: {how}"), *branch.iftrue.block_items]
    branch.iftrue.block_items.insert(0, Comment(
        f"interior: every copy's guard holds, so the copies run unguarded{', ' + how if how else ''}"))
    branch.iffalse = c_ast.Compound([Comment("the edges: each copy is a naive thread's statements, with its own "
                                             "guard, reading the window"), *copies])
    return [branch]


def _condition(interior: Interior, w: Window, names: dict) -> str:
    corner = {("x", True): names["x0"], ("x", False): f"{names['x0']} + {w.vector - 1}",
              ("y", True): names["y0"], ("y", False): f"{names['y0']} + {w.rows - 1}"}
    clauses = []
    for b in interior.bounds:
        if b.lower and b.value.is_Integer and int(b.value) <= 0:
            continue                            # x0, y0 >= 0
        clauses.append(f"{corner[b.axis, b.lower]} {'>=' if b.lower else '<'} {_c(b.value)}")
    clauses += interior.uniform
    return " && ".join(dict.fromkeys(clauses)) or "1"


def _pairs_aligned(interior: Interior) -> str | None:
    """Where the float4 tests fail, the tests for float2 stores ("1": proved); None where not every store can
    take them. An even width that is not a multiple of 4 (H200, demosaic at 1030x517: element stores of its
    three planes 0.51x naive)."""
    if not interior.stores or any(s.width != 4 or s.pair_tests is None for s in interior.stores):
        return None
    tests = [t for s in interior.stores for t in s.pair_tests]
    return " && ".join(dict.fromkeys(sorted(tests, key=lambda t: not t.startswith("((size_t)")))) or "1"


def _aligned(interior: Interior) -> str:
    """The run-time alignment tests of the vector stores (warp-uniform: parameters only), "" if proved."""
    tests = [t for s in interior.stores for t in s.tests]
    return " && ".join(dict.fromkeys(sorted(tests, key=lambda t: not t.startswith("((size_t)"))))  # bases, then pitches


def _drop_unused(decls: list[c_ast.Node], stmts: list[c_ast.Node]) -> list[c_ast.Node]:
    """The declarations the unguarded statements still use (the guard and the stores used x, y)."""
    kept = list(decls)
    changed = True
    while changed:
        changed = False
        for d in list(kept):
            used = {n.name for s in [*kept, *stmts] if s is not d for n in walk(s) if isinstance(n, c_ast.ID)}
            pure = d.init is None or not any(isinstance(n, (c_ast.FuncCall, c_ast.Assignment)) or
                                             (isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"))
                                             for n in walk(d.init))
            if d.name not in used and pure:
                kept.remove(d)
                changed = True
    return [*kept, *stmts]
