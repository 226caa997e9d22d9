"""Tensor-core tiles: a matrix-product loop nest (product.py) on the GPU's matrix units, `mma.sync`.

The kernel of the register tile's shape whose loop body is exactly one product accumulated,

    sum += A[row * n + k] * B[k * n + col];        (after normalize: two loads and `sum += A_val * B_val;`)

becomes blocks of warps that each compute a tile of outputs as 16 x 8 fragments with `mma.sync`. Per
TILE_K iterations of the loop the block copies its operands' tiles into a ring of STAGES shared-memory
stages with asynchronous copies (cp.async, zero-filled outside the operands, so ragged sizes need no other
code), STAGES - 1 steps ahead of the computation; each warp then reads its fragments from the tiles, in
the PTX ISA's fragment layouts (emulator/ptx.py), and issues one `mma.sync` per fragment pair.

The instruction follows the operands' type and the user's precision (CompileOptions.matmul_precision, named
like cuBLAS's compute types), where the target has it (Target.tensor_cores):
- `double`: FP64 (DMMA), by default: IEEE products, summed in another order than the loop's;
- `float` with `tf32`: one TF32 product (each operand rounded to 10 mantissa bits);
- `float` with `tf32x3`: each operand split into a TF32 high part and a TF32 remainder, three products
  (lo*hi + hi*lo + hi*hi), each step's products summed apart and added to the sum in FP32 (the tensor
  core's own accumulation truncates: over a long loop that costs FP32 accuracy);
- `float` with `ieee` (the default) keeps the CUDA-core register tile;
- `__half` and `__nv_bfloat16` operands widened to a `float` sum (`sum += __half2float(a) * __half2float(b)`),
  by default: HMMA, `mma.sync.m16n8k16` with an FP32 accumulator. The products are exact (a product of two
  halves is exact in FP32, as the widened loop computes it); only the order of the summation changes. Two
  16-bit elements share a register, so each operand's tile is laid out in shared memory as the operand is
  in memory (16-byte copies along its contiguous dimension, either layout), and a fragment register is two
  elements of the tile packed; where an operand cannot be copied in 16-byte vectors (not aligned, rows
  not whole vectors) its elements are loaded and stored (cp.async moves no fewer than 4 bytes).

Each output keeps its own code before and after the loop (its start value, its store, under its guard),
as the register tile does. Requires restrict-qualified operands not written by the kernel (product.py).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import iterator_symbol
from gpgpu_opt.ast_util import walk
from gpgpu_opt.cuda_nodes import AsmOperand, InlineAsm
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.mma_ops import OPS, PACKED_OPS, MmaOp, choose_op
from gpgpu_opt.passes.merge.output_tile import AXIS_SYMBOL, per_output_code
from gpgpu_opt.passes.merge.product import Operand, Product, recognize_product
from gpgpu_opt.rewriting.cbuild import Unsupported, conj, is_placeholder, parse_expr, parse_statements, text
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.per_output import filled
from gpgpu_opt.rewriting.witness import sym_to_ast
from gpgpu_opt.templating import render

_LOAD_POS = sympy.Symbol("_mma_load_pos", integer=True)
_LOAD_K = sympy.Symbol("_mma_load_k", integer=True)


@dataclass
class MmaTile:
    product: Product
    op: MmaOp
    a: Operand                  # the operand along the output's rows (y)
    b: Operand                  # along its columns (x)

    @property
    def block(self) -> tuple[int, int]:
        return (self.op.threads, 1)

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return (self.op.tile_n, self.op.tile_m)

    def k_major(self, o: Operand) -> bool:
        """Whether the operand's tile holds rows of the step's iterations: A always, B never, but packed
        operands, whose tiles are laid out as the operand is in memory (16-byte copies either way)."""
        if self.op.packed:
            return o.along_loop
        return o is self.a

    def stage_elements(self, o: Operand) -> int:
        is_a = o is self.a
        return self.op.stage_elements(self.op.tile_m if is_a else self.op.tile_n,
                                      self.op.pad_a if is_a else self.op.pad_b, self.k_major(o))

    @property
    def shared_bytes(self) -> int:
        return self.op.stages * (self.stage_elements(self.a) + self.stage_elements(self.b)) * self.op.element_bytes


def plan_mma_tile(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> MmaTile:
    product = recognize_product(kernel, ctx, info, frozenset({"float", "double"}) | set(PACKED_OPS))
    op = choose_op(product.element, ctx)
    if len(product.operands) != 2:
        raise Unsupported(f"the loop reads {len(product.operands)} operand arrays; a tensor-core tile takes "
                          "one per axis")
    a = next(o for o in product.operands if o.axis == "y")
    b = next(o for o in product.operands if o.axis == "x")
    if len(a.nodes) != 1 or len(b.nodes) != 1:
        raise Unsupported("an operand is read more than once per iteration")
    _check_body(product, a, b, op)
    acc_type = " ".join(product.acc.type.type.names) if isinstance(product.acc.type, c_ast.TypeDecl) else "?"
    if acc_type != op.accumulator:
        raise Unsupported(f"the sum is {acc_type}, the {op.describe} accumulator {op.accumulator}")
    tile = MmaTile(product, op, a, b)
    problem = info.coverage_problem(ctx.facts.naive_block, tile.outputs_per_block)
    if problem:
        raise Unsupported(problem)
    return tile


def _check_body(product: Product, a: Operand, b: Operand, op: MmaOp) -> None:
    """The loop body is the sum of one product of the two operands: locals that each hold one operand read
    (`const float A_val = A[...]`), then `sum += x * y` (or `sum = sum + x * y`), x and y those reads or
    locals, in either order; each widened by one of the op's exact conversions (`__half2float(x)`) where it
    has them, and then only so."""
    items = product.loop.stmt.block_items if isinstance(product.loop.stmt, c_ast.Compound) else [product.loop.stmt]
    items = list(items or [])
    held = {}
    for s in items[:-1]:
        if not (isinstance(s, c_ast.Decl) and s.init is not None and isinstance(s.type, c_ast.TypeDecl)):
            raise Unsupported(f"the loop body does more than sum one product ('{text(s)}')")
        which = _operand_of(s.init, a, b)
        if which is None:
            raise Unsupported(f"the loop body does more than sum one product ('{text(s)}')")
        held[s.name] = which
    last = items[-1] if items else None
    acc = product.acc.name
    rhs = None
    if isinstance(last, c_ast.Assignment) and isinstance(last.lvalue, c_ast.ID) and last.lvalue.name == acc:
        if last.op == "+=":
            rhs = last.rvalue
        elif last.op == "=" and isinstance(last.rvalue, c_ast.BinaryOp) and last.rvalue.op == "+" \
                and isinstance(last.rvalue.left, c_ast.ID) and last.rvalue.left.name == acc:
            rhs = last.rvalue.right
    if not (isinstance(rhs, c_ast.BinaryOp) and rhs.op == "*"):
        raise Unsupported(f"the loop body's last statement is not '{acc} += x * y'")
    factors = []
    for f in (rhs.left, rhs.right):
        if op.widen:
            f = _widened(f, op)
        factors.append(held.get(f.name) if isinstance(f, c_ast.ID) else _operand_of(f, a, b))
    if sorted(map(str, factors)) != ["a", "b"]:
        raise Unsupported(f"'{text(rhs)}' is not the product of one element of {a.array} and one of {b.array}")
    used = {n.name for n in walk(rhs) if isinstance(n, c_ast.ID)}
    if len(held) != len(set(held)) or not set(held) <= used:
        raise Unsupported("the loop body keeps a local it does not use in the product")


def _widened(node: c_ast.Node, op: MmaOp) -> c_ast.Node | None:
    """x of `__half2float(x)` (a conversion in `op.widen`), or of `(float) x`; None for anything else."""
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and node.name.name in op.widen \
            and node.args is not None and len(node.args.exprs) == 1:
        return node.args.exprs[0]
    if isinstance(node, c_ast.Cast) and text(node.to_type) == op.accumulator:
        return node.expr
    return None


def _operand_of(node: c_ast.Node | None, a: Operand, b: Operand) -> str | None:
    """'a' or 'b' where `node` is that operand's read, else None."""
    if any(node is n for n in a.nodes):
        return "a"
    if any(node is n for n in b.nodes):
        return "b"
    return None


# -- the rewrite ----------------------------------------------------------------------------------------
def apply_mma_tile(kernel: Kernel, info: KernelInfo, tile: MmaTile) -> None:
    op, product = tile.op, tile.product
    names = {base: info.fresh(base) for base in (
        "i", "j", "r", "v", "kt", "kk", "e", "l", "warp", "group", "quad", "warp_row", "warp_col", "stage",
        "next_tile", "k_tiles", "tiles", "x", "part", "in_range", "valid", "vectors_a", "vectors_b", "tile_row",
        "tile_col", "linear", "band", "band_rows", "at")}
    names["tile_a"], names["tile_b"] = tile.a.tile, tile.b.tile
    names["frag_a"], names["frag_b"] = tile.a.fragment, tile.b.fragment
    names["frag_a_lo"], names["frag_b_lo"] = info.fresh(f"{tile.a.fragment}_lo"), info.fresh(f"{tile.b.fragment}_lo")
    acc = product.acc.name
    position = {"y": parse_expr(f"{names['tile_row']} * {op.tile_m} + {names['warp_row']} + {names['i']} * 16 + "
                                f"{names['group']} + {names['r']} / 2 * 8"),
                "x": parse_expr(f"{names['tile_col']} * {op.tile_n} + {names['warp_col']} + {names['j']} * 8 + "
                                f"{names['quad']} * 2 + {names['r']} % 2")}
    acc_ref = f"{acc}[{names['i']}][{names['j']}][{names['r']}]"
    init, finish = per_output_code(kernel, info, product.loop, product.acc, position, acc_ref)
    views = [_with_vectors(tile, o, names) for o in (tile.a, tile.b)]
    source = render("merge_mma_tile.cu.j2", op=op, n=names, acc=acc, var=product.var,
                    mi=op.warp_m // 16, nj=op.warp_n // 8, warps_n=op.tile_n // op.warp_n,
                    k_count=text(_trip(product)), k_start=text(product.start),
                    mma_text=f"{op.opcode} {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};",
                    loads=views, b_offset=op.stages * tile.stage_elements(tile.a),
                    pairs=_fragment_pairs(tile, names) if op.packed else None)
    items = parse_statements(source)
    kernel.body.block_items = _with_asm(filled(items, {"__init__": init, "__finish__": finish}))
    kernel.launch = LaunchConfig(block=tile.block, outputs_per_block=tile.outputs_per_block, bounded=True,
                                 blocks_per_sm=op.blocks_per_sm, dynamic_shared_bytes=tile.shared_bytes)
    kernel.includes = sorted(set(kernel.includes) | {"cuda_pipeline.h"})
    if op.name == "tf32":
        kernel.tolerance = TF32_TOLERANCE
    kernel.aligned_path = any(v["vector"] for v in views)


#: Relative tolerance of compile's check for a TF32 product (operands rounded to 10 mantissa bits: about
#: 5e-4 of the largest output at the check's sizes); an element on the wrong output is off by far more.
TF32_TOLERANCE = 5e-3


def _fragment_pairs(tile: MmaTile, names: dict) -> dict:
    """Where the two 16-bit elements of each fragment register are in the tiles (m16n8k16's layout, ptx.py):
    A's register v of the warp's row tile i holds (row g + v % 2 * 8, iterations 2t + v / 2 * 8 and the next),
    B's register v of column tile j (iterations 2t + v * 8 and the next, column g)."""
    n = names
    out = {}
    for o, pos, k in ((tile.a, f"{n['warp_row']} + {n['i']} * 16 + {n['group']} + {n['v']} % 2 * 8",
                       f"{n['kk']} + {n['quad']} * 2 + {n['v']} / 2 * 8"),
                      (tile.b, f"{n['warp_col']} + {n['j']} * 8 + {n['group']}",
                       f"{n['kk']} + {n['quad']} * 2 + {n['v']} * 8")):
        step = 1 if tile.k_major(o) else (tile.op.tile_m + tile.op.pad_a if o is tile.a else
                                          tile.op.tile_n + tile.op.pad_b)
        out["a" if o is tile.a else "b"] = (_tile_offset(tile, o, n, k, pos), step)
    return out


def _trip(product: Product) -> c_ast.Node:
    """The loop's iteration count, `end - start` (`+ 1` for `<=`)."""
    count = c_ast.BinaryOp("-", copy.deepcopy(product.loop.cond.right), copy.deepcopy(product.start))
    if product.loop.cond.op == "<=":
        count = c_ast.BinaryOp("+", count, c_ast.Constant("int", "1"))
    return count


def _with_vectors(tile: MmaTile, o: Operand, names: dict) -> dict:
    """One operand's copies: the element copies, and the vector copies where they apply."""
    scalar = _load_view(tile, o, names)
    return {**scalar, "vector": _vector_view(tile, o, names, scalar)}


def _load_view(tile: MmaTile, o: Operand, names: dict) -> dict:
    """How the block copies one operand's tile for a step: element e of the copy is (tile row, tile column)
    of the stage, the contiguous dimension of the operand in memory varying fastest."""
    op, product = tile.op, tile.product
    is_a = o is tile.a
    width = op.tile_m if is_a else op.tile_n            # the operand's extent along its axis
    e, tk = names["e"], op.tile_k
    if o.along_loop:
        k_of, pos_of = f"{e} % {tk}", f"{e} / {tk}"
    else:
        k_of, pos_of = f"{e} / {width}", f"{e} % {width}"
    pos_name, k_name = ("load_row" if is_a else "load_col"), "load_k"
    first = f"{names['tile_row' if is_a else 'tile_col']} * {width}"
    k = iterator_symbol(product.var)
    load = c_ast.ArrayRef(c_ast.ID(o.array), sym_to_ast(o.index.subs({AXIS_SYMBOL[o.axis]: _LOAD_POS, k: _LOAD_K}),
                                                        {_LOAD_POS: c_ast.ID(pos_name), _LOAD_K: c_ast.ID(k_name)}))
    other = "x" if o.axis == "y" else "y"
    predicate = [_clause_at(c, o.axis, c_ast.ID(pos_name)) for c in product.clauses[o.axis]]
    predicate += [_clause_at(c, other, c_ast.Constant("int", "0")) for c in product.clauses[other]]
    predicate += [_clause_at(c, "", None) for c in product.clauses[""]]
    cond = copy.deepcopy(product.loop.cond)
    cond.left = c_ast.ID(k_name)
    predicate.append(cond)
    at = _tile_offset(tile, o, names, k_of, pos_of)
    return {"tile": names["tile_a" if is_a else "tile_b"], "count": width * tk // op.threads,
            "pos_name": pos_name, "pos": f"{first} + {pos_of}", "k_name": k_name, "k_of": k_of, "at": at,
            "subscript": text(load.subscript), "predicate": text(conj(predicate)), "array": o.array,
            "index_text": text(o.nodes[0].subscript), "what": "rows" if is_a else "columns", "width": width}


def _vector_view(tile: MmaTile, o: Operand, names: dict, scalar: dict) -> dict | None:
    """How the block copies one operand's tile in 16-byte vectors, where its contiguous dimension in memory is
    the tile's (A along the loop, B along its columns), or None. Element e of the copy is then one vector;
    the copy takes the run-time test `flag` (the base 16-byte aligned, the other dimension's stride and the
    offset whole vectors), else the element copies. Where the operand ends inside a vector only its first
    `valid` elements are copied, the rest zero-filled."""
    op, product = tile.op, tile.product
    is_a, k_major = o is tile.a, tile.k_major(o)
    if o.along_loop != k_major:
        return None
    vec = 16 // op.element_bytes
    pos, k = AXIS_SYMBOL[o.axis], iterator_symbol(product.var)
    contiguous, other = (k, pos) if k_major else (pos, k)
    if sympy.diff(o.index, contiguous) != 1:
        return None
    stride = sympy.diff(o.index, other)
    offset = sympy.expand(o.index - stride * other - contiguous)
    if offset.free_symbols & {pos, k} or stride.free_symbols & {pos, k}:
        return None
    width = op.tile_m if is_a else op.tile_n
    tk, e = op.tile_k, names["e"]
    per_row = (tk if k_major else width) // vec
    if k_major:
        k_of, pos_of = f"{e} % {per_row} * {vec}", f"{e} / {per_row}"
    else:
        k_of, pos_of = f"{e} / {per_row}", f"{e} % {per_row} * {vec}"
    bounds = _upper_bounds(product, o, k_major)
    if bounds is None:
        return None
    checks = [f"((size_t) {o.array} & 15) == 0"]
    checks += [f"{text(sym_to_ast(v, {}))} % {vec} == 0" for v in (stride, offset) if not _whole(v, vec)]
    if k_major and not _whole_node(product.start, vec):
        checks.append(f"({text(product.start)}) % {vec} == 0")
    at_name = scalar["k_name"] if k_major else scalar["pos_name"]
    valid = f"{vec}"
    for bound in bounds:
        valid = f"min({valid}, {text(bound)} - {at_name})"
    uniform = _constant_clauses(product, o, k_major, scalar)
    return {**scalar, "count": width * tk // (op.threads * vec), "k_of": k_of, "pos_of": pos_of,
            "pos": f"{names['tile_row' if is_a else 'tile_col']} * {width} + {pos_of}",
            "at": _tile_offset(tile, o, names, k_of, pos_of), "vec": vec, "bytes": 16,
            "valid": f"{text(conj(uniform))} ? max(0, {valid}) : 0" if uniform else f"max(0, {valid})",
            "flag": names["vectors_a" if is_a else "vectors_b"], "checks": " && ".join(dict.fromkeys(checks))}


def _whole(value: sympy.Expr, vec: int) -> bool:
    return value.is_Integer and int(value) % vec == 0


def _whole_node(node: c_ast.Node, vec: int) -> bool:
    return isinstance(node, c_ast.Constant) and node.value.isdigit() and int(node.value) % vec == 0


def _upper_bounds(product: Product, o: Operand, along_loop: bool) -> list[c_ast.Node] | None:
    """The exclusive upper bounds on the contiguous dimension (`x < E`, `x <= E` as E + 1), or None where a
    clause on it is another kind (the valid elements of a vector would not be its first ones)."""
    if along_loop:
        cond = product.loop.cond
        end = copy.deepcopy(cond.right)
        return [end if cond.op == "<" else c_ast.BinaryOp("+", end, c_ast.Constant("int", "1"))]
    sym, bounds = AXIS_SYMBOL[o.axis], []
    for lhs, cmp, rhs in product.clauses[o.axis]:
        if sympy.expand(lhs - sym) != 0 or rhs.has(sym) or cmp not in ("<", "<="):
            return None
        bound = sym_to_ast(rhs if cmp == "<" else rhs + 1, {})
        bounds.append(bound)
    return bounds


def _constant_clauses(product: Product, o: Operand, along_loop: bool, scalar: dict) -> list[c_ast.Node]:
    """The clauses of the element predicate that are the same for every element of a vector: all but the
    contiguous dimension's bounds."""
    other = "x" if o.axis == "y" else "y"
    out = [_clause_at(c, other, c_ast.Constant("int", "0")) for c in product.clauses[other]]
    out += [_clause_at(c, "", None) for c in product.clauses[""]]
    if along_loop:    # the operand's own axis' clauses
        out = [_clause_at(c, o.axis, c_ast.ID(scalar["pos_name"])) for c in product.clauses[o.axis]] + out
    else:       # the loop's bound, at the vector's k
        cond = copy.deepcopy(product.loop.cond)
        cond.left = c_ast.ID(scalar["k_name"])
        out.append(cond)
    return out


def _tile_offset(tile: MmaTile, o: Operand, names: dict, k_of: str, pos_of: str) -> str:
    op = tile.op
    width, pad = (op.tile_m, op.pad_a) if o is tile.a else (op.tile_n, op.pad_b)
    if tile.k_major(o):
        return f"({names['stage']} * {width} + {pos_of}) * {op.tile_k + pad} + {k_of}"
    return f"({names['stage']} * {op.tile_k} + {k_of}) * {width + pad} + {pos_of}"


def _clause_at(clause: tuple, axis: str, value: c_ast.Node | None) -> c_ast.Node:
    lhs, cmp, rhs = clause
    subs = {AXIS_SYMBOL[axis]: _LOAD_POS} if axis else {}
    names = {_LOAD_POS: value} if axis else {}
    return c_ast.BinaryOp(cmp, sym_to_ast(lhs.subs(subs), names), sym_to_ast(rhs.subs(subs), names))


def _with_asm(items: list[c_ast.Node]) -> list[c_ast.Node]:
    """The template's `__asm_statement("instruction", "constraints", operands...)` calls as inline PTX."""
    def convert(node):
        if isinstance(node, c_ast.Compound):
            node.block_items = [convert(s) for s in node.block_items or []]
            return node
        if is_placeholder(node, "__asm_statement"):
            template, constraints, *operands = node.args.exprs
            kinds = constraints.value.strip('"').split(",")
            pairs = list(zip(kinds, operands))
            return InlineAsm(template.value.strip('"'), [AsmOperand(c, e) for c, e in pairs if c[0] in "=+"],
                             [AsmOperand(c, e) for c, e in pairs if c[0] not in "=+"], (), True)
        for name, child in node.children():
            converted = convert(child)
            if converted is not child:
                _set_child(node, name, converted)
        return node
    return [convert(s) for s in items]


def _set_child(node: c_ast.Node, name: str, value: c_ast.Node) -> None:
    if "[" in name:
        field, index = name[:-1].split("[")
        getattr(node, field)[int(index)] = value
    else:
        setattr(node, name, value)


def describe(tile: MmaTile) -> str:
    op = tile.op
    return (f"tensor cores: {op.describe}; blocks of {op.warps} warps compute {op.tile_m}x{op.tile_n} outputs, each "
            f"warp {op.warp_m}x{op.warp_n} of them; {tile.a.array} and {tile.b.array} copied per {op.tile_k} "
            f"iterations of '{tile.product.var}' into {op.stages} stages of shared tiles (cp.async); the sum is "
            f"taken in another order than the loop's")


def describe_launch(tile: MmaTile) -> str:
    op = tile.op
    return (f"blocks of {op.threads} threads, each covering {op.tile_n}x{op.tile_m} outputs, "
            f"{op.shared_bytes} bytes of dynamic shared memory; __launch_bounds__({op.threads}, "
            f"{op.blocks_per_sm})")


__all__ = ["MmaOp", "MmaTile", "OPS", "apply_mma_tile", "choose_op", "describe", "describe_launch",
           "plan_mma_tile"]
