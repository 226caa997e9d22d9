"""The rewrite of a planned stencil window (stencil_window/__init__ says what and why)."""
from __future__ import annotations

import itertools

import sympy
from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.passes.merge.dependence import builtin_axis
from gpgpu_opt.passes.merge.stencil_window.interior import fast_path
from gpgpu_opt.passes.merge.stencil_window.plan import Window, ccode as _c
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import parse_expr, parse_statements, text
from gpgpu_opt.templating import render

_FIELDS = "xyzw"


def apply_stencil_window(kernel: Kernel, info: KernelInfo, w: Window) -> None:
    names = {k: info.fresh(k) for k in ("x0", "y0", "r", "v", "i", "e", "row", "row_read", "quad", "pair",
                                            "from_left", "from_right")}
    win = info.fresh(f"{w.array}_win")
    first_row = w.reach["y"][0]
    first_col = min(w.reach["x"][0], 0)
    replace = {}
    for read in w.reads:
        row = _index(names["r"], read.dy, -first_row)
        col = _index(names["v"], read.dx, -first_col)
        replace[id(read.node)] = parse_expr(f"{win}[{row}][{col}]")
    for n in walk(kernel.body):
        axis = builtin_axis(n, "xy")
        if axis:
            top = info.index_expression(n)
            base = names["x0"] if axis == "x" else names["y0"]
            copy = names["v"] if axis == "x" else names["r"]
            replace[id(top)] = parse_expr(f"({base} + {copy})")
    _replace(kernel.body, replace)
    prologue = parse_statements(_window_source(w, names, win, first_row, first_col))
    copies = parse_statements(
        f"#pragma unroll\nfor (int {names['r']} = 0; {names['r']} < {w.rows}; {names['r']}++)\n"
        f"#pragma unroll\nfor (int {names['v']} = 0; {names['v']} < {w.vector}; {names['v']}++) {{}}")
    loop_v = [n for n in walk(copies[-1]) if isinstance(n, c_ast.For)][-1]
    loop_v.stmt = c_ast.Compound(g.items(kernel.body))
    if w.interior is not None:
        copies = fast_path(w.interior, copies, names, w, info)
    else:
        copies = [Comment("each copy is a naive thread's statements, with its own guard, reading the window"),
                  *copies]
    kernel.body.block_items = [Comment(describe_code(w)), *prologue, *copies]
    kernel.launch = LaunchConfig(block=w.block, outputs_per_block=w.outputs_per_block)


def _index(copy_var: str, offset: dict, shift: int) -> str:
    parts = [copy_var]
    for var, coef in offset.items():
        if var != 1:
            parts.append(var if coef == 1 else f"{coef} * {var}")
    const = offset.get(1, 0) + shift
    text_ = " + ".join(parts)
    return f"{text_} + {const}" if const > 0 else f"{text_} - {-const}" if const < 0 else text_


def _bounds(w: Window, axis: str, lower: bool) -> list[sympy.Expr]:
    values = [b.value for b in w.bounds if b.axis == axis and b.lower == lower]
    numbers = [v for v in values if v.is_Integer]
    keep = [v for v in values if not v.is_Integer]
    if numbers:
        keep.append(max(numbers) if lower else min(numbers))
    return keep


def _conds(w: Window, axis: str, at: str, shift, reach: tuple[int, int], sides=(True, False)) -> list[str]:
    """The clauses that keep row/column `at` (at least the thread's base, which is >= 0, + `shift`: an int, or
    None when unknown) inside [lo + reach[0], hi + reach[1]): where naive threads inside the guard read with
    those offsets. A lower bound that `at` cannot fall below gets no clause."""
    out = []
    if True in sides:
        for lo in _bounds(w, axis, True):
            edge = sympy.expand(lo + reach[0])
            if not (edge.is_Integer and shift is not None and int(edge) <= shift):      # the base is >= 0
                out.append(f"{at} >= {_c(edge)}")
    if False in sides:
        out += [f"{at} < {_c(sympy.expand(hi + reach[1]))}" for hi in _bounds(w, axis, False)]
    return out


def _nonempty(w: Window) -> list[str]:
    """Some naive thread passes the guard at all (else the widened bounds could admit loads)."""
    out = [text(c) for c in w.uniform]
    for axis in "xy":
        for lo in _bounds(w, axis, True):
            for hi in _bounds(w, axis, False):
                if not ((hi - lo).is_Integer and hi - lo > 0):
                    out.append(f"{_c(lo)} < {_c(hi)}")
    return list(dict.fromkeys(out))


def _terms(w: Window) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The stencil's offsets as rectangles (rows [c, d] x columns [a, b]) whose union they are."""
    points = set()
    for read in w.reads:
        loops = sorted({k for k in (*read.dy, *read.dx) if k != 1})
        for values in itertools.product(*(range(w.loop_ranges[v][0], w.loop_ranges[v][1] + 1) for v in loops)):
            at = {**dict(zip(loops, values)), 1: 1}
            points.add((sum(c * at[k] for k, c in read.dy.items()), sum(c * at[k] for k, c in read.dx.items())))
    by_cols: dict[tuple[int, int], list[int]] = {}
    for dy in sorted({p[0] for p in points}):
        for run in _runs(sorted(p[1] for p in points if p[0] == dy)):
            by_cols.setdefault(run, []).append(dy)
    return [(rows, cols) for cols, dys in by_cols.items() for rows in _runs(dys)]


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _window_source(w: Window, names: dict, win: str, first_row: int, first_col: int) -> str:
    x0, row, V = names["x0"], names["row"], w.vector
    cols = max(w.reach["x"][1], 0) + V - first_col
    rows = w.rows + w.reach["y"][1] - first_row
    terms = _terms(w)
    flags = [names["row_read"]] + [f"{names['row_read']}{k + 2}" for k in range(len(terms) - 1)]
    nonempty = _nonempty(w)
    row_conds = [(flag, " && ".join(_conds(w, "y", row, first_row, rows_) + nonempty) or "1")
                 for flag, (rows_, _) in zip(flags, terms)]

    def cond(at: str, shift, sides=(True, False), tail=None) -> str:
        """Some naive thread reads column `at` of the row (each term: its rows flag and its columns)."""
        alts = []
        for flag, (_, cols_) in zip(flags, terms):
            clauses = [flag] + _conds(w, "x", at, shift, cols_, sides)
            if tail is not None:
                clauses += _conds(w, "x", tail[0], tail[1], cols_, (False,))
            alts.append(" && ".join(clauses))
        return alts[0] if len(alts) == 1 else " || ".join(f"({a})" for a in alts)

    element = f"{x0} + {names['e']}"
    element_cond = cond(f"({element})", 0)
    vector_cond = cond(x0, 0, (True,), (f"{x0} + {V - 1}", V - 1))
    L = w.load_width
    if w.load_test == "pitch":
        vector_cond = f"{_c(w.pitch)} % {L} == 0 && " + (f"({vector_cond})" if "||" in vector_cond else vector_cond)
    elif w.load_test == "address":
        vector_cond = (f"({vector_cond})" if "||" in vector_cond else vector_cond) + \
            f" && ((size_t) ({w.array} + {row} * {_c(w.pitch)} + {x0}) & {4 * L - 1}) == 0"
    halo = []
    centre_col = -first_col
    right = max(w.reach["x"][1], 0)
    for c in range(first_col, 0):       # left of the row's V elements: the lane to the left holds them
        halo.append(dict(col=c - first_col, source=c + V - first_col, dir="up", edge_lane=0,
                         cond=_parenthesised(cond(f"{x0} - {-c}", c)), offset=f" - {-c}",
                         name=names["from_left"] + (str(-c) if first_col < -1 else "")))
    for c in range(V, V + right):
        halo.append(dict(col=c - first_col, source=c - V - first_col, dir="down", edge_lane=w.block[0] - 1,
                         cond=_parenthesised(cond(f"{x0} + {c}", c)), offset=f" + {c}",
                         name=names["from_right"] + (str(c - V + 1) if right > 1 else "")))
    chunk = names["quad"] if L == 4 else names["pair"]
    chunks = [dict(name=chunk if V == L else f"{chunk}{k}", offset=f" + {k}" if k else "",
                   fields=[dict(col=centre_col + k + j, field=_FIELDS[j]) for j in range(L)])
              for k in range(0, V, L)] if L > 1 else []
    return render("merge_stencil_window.cu.j2", array=w.array, element=w.element, win=win, rows=rows, cols=cols,
                  vector=V, rows_per_thread=w.rows, block_x=w.block[0], block_y=w.block[1],
                  first_row=f" - {-first_row}" if first_row < 0 else f" + {first_row}" if first_row else "",
                  first_col=str(first_col) if first_col else "", pitch=_c(w.pitch), row_conds=row_conds,
                  chunks=chunks, vector_cond=vector_cond, vtype=f"float{L}", centre=f"{centre_col} + " if centre_col else "",
                  element_cond=element_cond, halo=halo, **names)


def _parenthesised(cond: str) -> str:
    return f"({cond})" if "||" in cond else cond


def _replace(root: c_ast.Node, replace: dict) -> None:
    for n in walk(root):
        for attr in n.__slots__:
            value = getattr(n, attr, None)
            if isinstance(value, c_ast.Node) and id(value) in replace:
                setattr(n, attr, replace[id(value)])
            elif isinstance(value, list) and any(isinstance(v, c_ast.Node) and id(v) in replace for v in value):
                setattr(n, attr, [replace.get(id(v), v) if isinstance(v, c_ast.Node) else v for v in value])


def describe_code(w: Window) -> str:
    L = w.load_width
    how = f"{'one' if L == w.vector else w.vector // L} float{L} load{'s' if L < w.vector else ''} per row" \
        if L > 1 else f"{w.vector} element loads per row"
    return (f"stencil window: each thread computes {w.vector} x {w.rows} outputs from a register window of "
            f"{w.array}; {how}, the neighbouring columns from the neighbouring lanes (__shfl_up/down_sync)")


def describe(w: Window) -> str:
    return (f"stencil window, {w.vector} x {w.rows} outputs per thread, {w.array} read once per row into "
            f"registers (reach x {w.reach['x']}, y {w.reach['y']}): {w.why}")


def describe_launch(w: Window) -> str:
    per = w.outputs_per_block
    return f"blocks of {w.block[0]}x{w.block[1]} threads, each covering {per[0]}x{per[1]} outputs"
