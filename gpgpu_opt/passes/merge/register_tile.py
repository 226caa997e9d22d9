"""2-D register tiles: one thread computes TM x TN outputs of a matrix-product-like kernel.

This is the paper's thread merge in X and Y (§3.5, Fig. 6-7) in the form modern GPUs need. A kernel with
one output per thread of a 2-D thread space and one accumulation loop (rewriting/accumulation.py),

    if (row < n && col < n) { float sum = 0; for (k...) sum += A[row*n + k] * B[k*n + col]; C[...] = sum; }

whose reads in the loop each depend on the loop and on one axis of the output (`A[row*n+k]` on its row:
shared by every output of the row, `B[k*n+col]` on its column), becomes blocks of 16x16 threads that each
compute TM x TN outputs. Per step of BK iterations the block stages the operands of its 16*TM rows and
16*TN columns in shared tiles (cooperative, coalesced loads), then every thread reads its TM row values and
TN column values into registers and runs TM*TN updates per iteration: each operand value loaded from
shared memory is used TN (or TM) times from a register. A thread's outputs are two groups of 4 rows (and
columns) 64 apart, so that its reads of a tile are 16-byte vectors and a warp's reads do not conflict in
the banks.

Each output keeps its own code: the statements before the loop (its start value, under its guard), the
loop body (per output, with the operands from registers), and the statements after it (the store, under
its guard), so ragged sizes stay exact. The summation order per output is the naive one. The loads of a
step are predicated by the guard's clauses (taken at the loading thread's row or column, and at the
block's first column or row) and by the loop's bound; iterations past the loop's end are skipped unless
the loop's length is known to divide the step.

Requires restrict-qualified (non-aliasing) arrays read in the loop and not written by the kernel, guards
that bound each axis on its own, and a target whose register file holds the tile (model: `choose_shape`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import iterator_symbol
from gpgpu_opt.ast_util import transform, walk
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.output_tile import AXIS_SYMBOL, output_counts, per_output_code
from gpgpu_opt.passes.merge.product import Operand, recognize_product
from gpgpu_opt.rewriting.per_output import filled
from gpgpu_opt.passes.merge.tile_shape import BLOCKS_PER_SM, GROUP, THREADS, choose_shape, confirm_with_ptxas
from gpgpu_opt.rewriting.cbuild import Unsupported, conj, parse_expr, parse_statements, text
from gpgpu_opt.rewriting.witness import sym_to_ast
from gpgpu_opt.templating import render

#: Iterations staged per step; measured on an H100 (bench/RESULTS.md): 16 beats 8 for 128x128 tiles.
STEP = 16

_LOAD_POS = sympy.Symbol("_load_a_pos", integer=True)  # sorts before the iterator: A[row * n + k]
_LOAD_K = sympy.Symbol("_load_b_k", integer=True)


@dataclass
class RegisterTile:
    loop: c_ast.For
    var: str
    start: c_ast.Node
    acc: c_ast.Decl
    path: list[c_ast.Node]
    operands: list[Operand]
    clauses: dict[str, list[tuple[sympy.Expr, str, sympy.Expr]]]   # guard clauses by axis ('' = neither)
    tm: int
    tn: int
    step: int
    divides: bool                   # the loop's length is a multiple of the step
    why: str
    element: str                    # the operands' C type

    @property
    def block(self) -> tuple[int, int]:
        return (THREADS, THREADS)

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return (THREADS * self.tn, THREADS * self.tm)


# -- is the kernel of the shape -------------------------------------------------------------------------
def plan_register_tile(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> RegisterTile:
    tile = plan_by_model(kernel, ctx, info)
    if ctx.options.merge_request is not None:
        return tile
    shapes = [(tm, tn) for tm, tn in ((8, 8), (4, 4)) if tm <= tile.tm and tn <= tile.tn]
    shape, said = confirm_with_ptxas(kernel.name, ctx, shapes, lambda shape: _tiled_source(kernel, ctx, shape))
    if shape != (tile.tm, tile.tn):
        tile = plan_by_model(kernel, ctx, info, shape)
    tile.why += f"; {said}"
    return tile


def _tiled_source(kernel: Kernel, ctx: PassContext, shape: tuple[int, int]) -> str:
    """The kernel with a register tile of `shape`, as the output would print it (for ptxas)."""
    work = kernel.copy()
    info = KernelInfo.of(work, ctx)
    apply_register_tile(work, info, plan_by_model(work, ctx, info, shape))
    return work.with_launch_bounds(kernel_source(work.funcdef))


def plan_by_model(kernel: Kernel, ctx: PassContext, info: KernelInfo,
                  shape: tuple[int, int] | None = None) -> RegisterTile:
    """The tile, of `shape` (TM, TN) when given, else of the model's shape (no ptxas)."""
    product = recognize_product(kernel, ctx, info)
    clauses, element, trip = product.clauses, product.element, product.trip
    tm, tn, why = (*shape, f"{shape[0]}x{shape[1]} outputs per thread") if shape else \
        choose_shape(ctx, output_counts(clauses, ctx), element)
    step = STEP if trip is None or trip > STEP // 2 else STEP // 2
    tile = RegisterTile(product.loop, product.var, product.start, product.acc, product.path, product.operands,
                        clauses, tm, tn, step, trip is not None and trip % step == 0, why, element)
    _check_body_uses(tile, info)
    _check_shared_memory(tile, ctx)
    problem = info.coverage_problem(ctx.facts.naive_block, tile.outputs_per_block)
    if problem:
        raise Unsupported(problem)
    return tile


def _check_body_uses(tile: RegisterTile, info: KernelInfo) -> None:
    """Per output, the loop body may use its operands (from registers), the accumulator, the iterator and
    values every output shares; not the output's position (the loop runs once for all outputs)."""
    replaced = {id(n) for o in tile.operands for node in o.nodes for n in walk(node)}
    own = {tile.acc.name} | {n.name for n in walk(tile.loop.stmt) if isinstance(n, c_ast.Decl)}
    position = (info.thread_vars - own) | {"threadIdx", "blockIdx", "blockDim"}
    for n in walk(tile.loop.stmt):
        if id(n) in replaced:
            continue
        if isinstance(n, c_ast.ID) and n.name in position:
            raise Unsupported(f"the loop body uses '{n.name}', the output's position, outside its operands")


def _check_shared_memory(tile: RegisterTile, ctx: PassContext) -> None:
    size = 8 if tile.element == "double" else 4
    total = sum(tile.step * (_width(tile, o) + _padding(o)) * size for o in tile.operands)
    if total > ctx.options.target.shared_per_block:
        raise Unsupported(f"the tiles need {total} bytes of shared memory, more than the target's "
                          f"{ctx.options.target.shared_per_block} per block")


def _width(tile: RegisterTile, o: Operand) -> int:
    return THREADS * (tile.tm if o.axis == "y" else tile.tn)


def _padding(o: Operand) -> int:
    """Stored along the loop, a tile's rows are written by threads a row apart: pad them by one vector
    (bank conflicts halve, and rows stay 16-byte aligned for the vector reads)."""
    return GROUP if o.along_loop else 0


# -- the rewrite ----------------------------------------------------------------------------------------
def apply_register_tile(kernel: Kernel, info: KernelInfo, tile: RegisterTile) -> None:
    names = {base: info.fresh(base) for base in ("r", "c", "k0", "kk", "e", "l")}
    position = {"y": _position(tile, "y", names["r"]), "x": _position(tile, "x", names["c"])}
    acc_ref = f"{tile.acc.name}[{names['r']}][{names['c']}]"
    init, finish = per_output_code(kernel, info, tile.loop, tile.acc, position, acc_ref)
    source = render("merge_register_tile.cu.j2", tile=tile, names=names, acc=tile.acc.name,
                    acc_type=" ".join(tile.acc.type.type.names), element=tile.element,
                    tiles=[_tile_view(tile, o, names, info) for o in tile.operands],
                    loop_cond=text(_loop_condition(tile, parse_expr(names["k0"]))),
                    k_end=None if tile.divides else text(g.negate(_loop_condition(
                        tile, parse_expr(f"{names['k0']} + {names['kk']}")))),
                    start=text(tile.start), needs_k=_body_needs_iterator(tile),
                    threads=THREADS * THREADS, fragments=[_fragment_view(tile, o, names) for o in tile.operands])
    items = parse_statements(source)
    kernel.body.block_items = filled(items, {"__init__": init, "__body__": _body(tile, names, acc_ref),
                                              "__finish__": finish})
    kernel.launch = LaunchConfig(block=tile.block, outputs_per_block=tile.outputs_per_block, bounded=True,
                                 blocks_per_sm=BLOCKS_PER_SM)


def _position(tile: RegisterTile, axis: str, counter: str) -> c_ast.Node:
    """The global index of a thread's `counter`-th output along `axis`."""
    per_thread = tile.tm if axis == "y" else tile.tn
    span = THREADS * per_thread
    part = "y" if axis == "y" else "x"
    if per_thread == GROUP:
        return parse_expr(f"blockIdx.{part} * {span} + threadIdx.{part} * {GROUP} + {counter}")
    return parse_expr(f"blockIdx.{part} * {span} + ({counter} / {GROUP}) * {THREADS * GROUP} + "
                      f"threadIdx.{part} * {GROUP} + {counter} % {GROUP}")


def _loop_condition(tile: RegisterTile, at: c_ast.Node) -> c_ast.Node:
    cond = copy.deepcopy(tile.loop.cond)
    cond.left = at
    return cond


def _body_needs_iterator(tile: RegisterTile) -> bool:
    replaced = {id(n) for o in tile.operands for node in o.nodes for n in walk(node)}
    return any(isinstance(n, c_ast.ID) and n.name == tile.var and id(n) not in replaced
               for n in walk(tile.loop.stmt))


def _tile_view(tile: RegisterTile, o: Operand, names: dict, info: KernelInfo) -> dict:
    """How the block loads one operand's tile for a step: element e of the tile is (step row, position)."""
    width, step, threads = _width(tile, o), tile.step, THREADS * THREADS
    e = names["e"]
    if o.along_loop:
        k_of, pos_of = f"{e} % {step}", f"{e} / {step}"
    else:
        k_of, pos_of = f"{e} / {width}", f"{e} % {width}"
    pos_name, k_name = ("load_row" if o.axis == "y" else "load_col"), "load_k"
    first = f"blockIdx.{o.axis} * {width}"
    pos_sym = AXIS_SYMBOL[o.axis]
    k = iterator_symbol(tile.var)
    names_map = {_LOAD_POS: c_ast.ID(pos_name), _LOAD_K: c_ast.ID(k_name)}
    load = c_ast.ArrayRef(c_ast.ID(o.array), sym_to_ast(o.index.subs({pos_sym: _LOAD_POS, k: _LOAD_K}), names_map))
    # Some output reads the element if its own axis' guard holds and some output of the other axis exists:
    # the other axis' bounds are upper bounds, so that is the first one's.
    other = "x" if o.axis == "y" else "y"
    predicate = [_clause_at(c, o.axis, c_ast.ID(pos_name)) for c in tile.clauses[o.axis]]
    predicate += [_clause_at(c, other, c_ast.Constant("int", "0")) for c in tile.clauses[other]]
    predicate += [_clause_at(c, "", None) for c in tile.clauses[""]]
    predicate.append(_loop_condition(tile, c_ast.ID(k_name)))
    return {"name": o.tile, "staged": info.fresh(f"{o.array}_staged"), "rows": step, "width": width + _padding(o), "loads": step * width // threads,
            "pos_name": pos_name, "pos": f"{first} + {pos_of}", "k_name": k_name, "k_of": k_of, "pos_of": pos_of,
            "load": text(load), "predicate": text(conj(predicate)), "array": o.array,
            "index_text": ", ".join(sorted({text(n.subscript) for n in o.nodes})),
            "what": "rows" if o.axis == "y" else "columns", "count": width}


def _clause_at(clause: tuple, axis: str, value: c_ast.Node | None) -> c_ast.Node:
    lhs, op, rhs = clause
    subs = {AXIS_SYMBOL[axis]: _LOAD_POS} if axis else {}
    names = {_LOAD_POS: value} if axis else {}
    return c_ast.BinaryOp(op, sym_to_ast(lhs.subs(subs), names), sym_to_ast(rhs.subs(subs), names))


def _fragment_view(tile: RegisterTile, o: Operand, names: dict) -> dict:
    counter = names["r"] if o.axis == "y" else names["c"]
    per_thread = tile.tm if o.axis == "y" else tile.tn
    part = "y" if o.axis == "y" else "x"
    if per_thread == GROUP:
        offset = f"threadIdx.{part} * {GROUP} + {counter}"
    else:
        offset = f"({counter} / {GROUP}) * {THREADS * GROUP} + threadIdx.{part} * {GROUP} + {counter} % {GROUP}"
    return {"name": o.fragment, "count": per_thread, "counter": counter, "tile": o.tile, "offset": offset}


def _body(tile: RegisterTile, names: dict, acc_ref: str) -> list[c_ast.Node]:
    """The loop body for output (r, c): operands from the fragments, the accumulator its element."""
    memo: dict = {}
    stmts = [copy.deepcopy(s, memo) for s in g.items(tile.loop.stmt)]
    replacement = {}
    for o in tile.operands:
        counter = names["r"] if o.axis == "y" else names["c"]
        for node in o.nodes:
            replacement[id(memo[id(node)])] = parse_expr(f"{o.fragment}[{counter}]")
    acc = tile.acc.name

    def swap(n: c_ast.Node):
        if id(n) in replacement:
            return replacement[id(n)]
        if isinstance(n, c_ast.ID) and n.name == acc:
            return parse_expr(acc_ref)
        return None

    return [transform(s, swap, skip_member_names=True) for s in stmts]


def describe_launch(tile: RegisterTile) -> str:
    (bx, by), (ox, oy) = tile.block, tile.outputs_per_block
    return (f"blocks of {bx}x{by} threads, each covering {ox}x{oy} outputs ({tile.tn}x{tile.tm} per thread); "
            f"__launch_bounds__({bx * by}, {BLOCKS_PER_SM}) holds ptxas to the registers of {BLOCKS_PER_SM} "
            "blocks per SM")


def describe(tile: RegisterTile) -> str:
    staged = ", ".join(f"{o.array} ({'rows' if o.axis == 'y' else 'columns'})" for o in tile.operands)
    return (f"thread merge in x and y: {tile.why}; "
            f"{staged} staged per {tile.step} iterations of '{tile.var}' and reused from registers")

