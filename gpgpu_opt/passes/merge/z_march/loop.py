"""The naive column march a 2-D grid of threads writes, recognized as a whitelist (z_march/__init__ says why):

    int x = ...; int y = ...;                         (integer locals, no loads; no z builtin, no gridDim)
    if (guard on x and y) {                           (optional; merge's early-return form writes it so)
        ...integer locals, no loads...
        for (int z = c; z < N; z++) {                 (c a constant >= 0, N a parameter plus a constant)
            ...locals, each defined once...
            out[own element] = value;                 (the one store, last)
        }
    }

It is read into the same `Shape` as the 3-D-grid form (the loop's iterator is the z, its start the first z,
its bound the bound), so that the same exact translation and the same carry proof apply."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import call_name, ids_in, walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.merge.z_march.shape import PURE_CALLS, Exact, Shape, check_inside, conjuncts, constant
from gpgpu_opt.rewriting.accumulation import NotAccumulation
from gpgpu_opt.rewriting.cbuild import Unsupported, text


class NotColumnMarch(NotAccumulation):
    """No z loop of the naive column march's shape (no note: most kernels)."""


def recognize_loop(kernel: Kernel) -> tuple[Shape, Exact]:
    """The kernel's shape with its one loop as the z (NotColumnMarch: no such loop; Unsupported: a loop of
    that shape the march cannot take)."""
    items = list(kernel.body.block_items or [])
    loops = [n for n in walk(kernel.body) if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile))]
    if len(loops) != 1 or not isinstance(loops[0], c_ast.For):
        raise NotColumnMarch("not one for loop")
    loop = loops[0]
    before = items[:-1]
    clauses: list[c_ast.Node] = []
    inner = items[-1:] if items else []
    if items and isinstance(items[-1], c_ast.If) and items[-1].iffalse is None:
        clauses = conjuncts(items[-1].cond)
        then = items[-1].iftrue
        inner = list(then.block_items or []) if isinstance(then, c_ast.Compound) else [then]
    if not inner or inner[-1] is not loop:
        raise NotColumnMarch("the loop is not the kernel's last statement")
    if not all(isinstance(s, c_ast.Decl) for s in before + inner[:-1]):
        raise Unsupported("statements other than declarations come before the z loop")
    z, first, bound = _loop_header(loop)
    _check_kernel(kernel, loop)
    inside = list(loop.stmt.block_items or []) if isinstance(loop.stmt, c_ast.Compound) else [loop.stmt]
    shape = Shape(z, None, before + inner[:-1], clauses, bound, None, inside, None, first=first)
    translator = Exact(kernel, shape)
    for decl in shape.before:
        translator.define(decl, loads_allowed=False)
    for clause in clauses:
        if ids_in(clause) & {z}:
            raise Unsupported(f"the guard's clause `{text(clause)}` names the loop's '{z}'")
    shape.bound_value = translator.value(bound)
    if shape.bound_value.free_symbols - translator.parameters:
        raise Unsupported(f"the z loop's bound `{text(bound)}` is not made of parameters")
    check_inside(shape, translator)
    return shape, translator


def _loop_header(loop: c_ast.For) -> tuple[str, int, c_ast.Node]:
    """`for (int z = c; z < N; z++ | ++z | z += 1)` with c a constant >= 0: (z, c, N)."""
    init = loop.init.decls if isinstance(loop.init, c_ast.DeclList) else []
    if len(init) != 1 or init[0].init is None or constant(init[0].init) is None or constant(init[0].init) < 0:
        raise Unsupported("the loop does not start `for (int z = c; ...` at a constant c >= 0")
    z = init[0].name
    cond, step = loop.cond, loop.next
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and isinstance(cond.left, c_ast.ID)
            and cond.left.name == z and z not in ids_in(cond.right)):
        raise Unsupported(f"the loop's condition is not `{z} < N`")
    stepped = isinstance(step, c_ast.UnaryOp) and step.op in ("++", "p++") and isinstance(step.expr, c_ast.ID) \
        and step.expr.name == z
    stepped = stepped or isinstance(step, c_ast.Assignment) and step.op == "+=" and isinstance(step.lvalue, c_ast.ID) \
        and step.lvalue.name == z and constant(step.rvalue) == 1
    if not stepped:
        raise Unsupported(f"the loop does not step `{z}` by 1")
    assigned = [n for n in walk(loop.stmt) if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID)
                and n.lvalue.name == z or isinstance(n, c_ast.UnaryOp) and n.op in ("&", "++", "--", "p++", "p--")]
    if assigned:
        raise Unsupported(f"`{text(assigned[0])}` in the loop's body: only locals defined once are followed")
    return z, constant(init[0].init), cond.right


def _check_kernel(kernel: Kernel, loop: c_ast.For) -> None:
    """Naive style: no z builtin or gridDim (the march takes the grid's z), no shared memory, barriers,
    warp intrinsics or atomics (only pure calls), no other control flow in the loop."""
    for n in walk(kernel.body):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and isinstance(n.field, c_ast.ID) \
                and (n.name.name == "gridDim" or n.field.name == "z"):
            raise Unsupported(f"it reads {n.name.name}.{n.field.name}, which the march's grid changes")
        if isinstance(n, c_ast.Decl) and ("__shared__" in (n.storage or []) or "__shared__" in (n.quals or [])
                                          or isinstance(n.type, c_ast.ArrayDecl)):
            raise Unsupported(f"'{n.name}' is a local array or shared memory")
        if isinstance(n, c_ast.FuncCall) and call_name(n) not in PURE_CALLS:
            raise Unsupported(f"it calls '{call_name(n) or text(n.name)}'")
        if isinstance(n, (c_ast.Switch, c_ast.Goto, c_ast.Label, c_ast.Return, c_ast.Break, c_ast.Continue)):
            raise Unsupported(f"it has a {type(n).__name__.lower()}")
    for n in walk(loop.stmt):
        if isinstance(n, c_ast.If):
            raise Unsupported("the z loop's body has an if (only straight-line statements are marched)")


__all__ = ["NotColumnMarch", "recognize_loop"]
