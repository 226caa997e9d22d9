"""The accumulation loop several merges start from (partition's rotation reads its added term too): one output
per thread, computed by

    <local definitions>
    if (guard) { float acc = init; <updates of acc>; for (k = s; k < e; k++) acc += f(k); <use acc> }

`canonical_header` and `accumulation` recognize the loop, `check_path` what surrounds it, `accumulator` the
accumulator's declaration, `trip_count` the loop's length when the sizes are known.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import NotAffine, param_symbol, to_sympy
from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, text

if TYPE_CHECKING:
    from gpgpu_opt.pass_api.context import PassContext     # the type only


class NotAccumulation(Unsupported):
    """The kernel is not of the accumulation shape (no note: most kernels are not)."""


def canonical_header(loop: c_ast.For, body: c_ast.Node) -> tuple[str, c_ast.Node]:
    var, start, declared = g.loop_var(loop)
    if var is None:
        raise Unsupported("the loop's start is not a plain assignment to its iterator")
    if not declared and not g.used_only_within(body, loop, var):
        raise Unsupported(f"'{var}' is used outside the loop (each thread's last value would differ)")
    cond, nxt = loop.cond, loop.next
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=") and isinstance(cond.left, c_ast.ID)
            and cond.left.name == var and var not in ids_in(cond.right)):
        raise Unsupported(f"the loop's condition is not '{var} < end'")
    if not is_unit_step(nxt, var):
        raise Unsupported(f"the loop does not count up by 1 ('{text(nxt) if nxt else ''}')")
    bounds = ids_in(start) | ids_in(cond.right) | {var}
    changed = assigned_names(loop.stmt) & bounds
    if changed:
        raise Unsupported(f"the loop body changes {', '.join(sorted(changed))}, which its bounds use")
    if not (g.is_pure(start, allow_memory=True) and g.is_pure(cond.right, allow_memory=True)):
        raise Unsupported("the loop's bounds have side effects")
    return var, start


def is_unit_step(nxt: c_ast.Node | None, var: str) -> bool:
    if isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("++", "p++"):
        return isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == var
    if not (isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) and nxt.lvalue.name == var):
        return False
    if nxt.op == "+=":
        return text(nxt.rvalue) == "1"
    r = nxt.rvalue
    return nxt.op == "=" and isinstance(r, c_ast.BinaryOp) and r.op == "+" \
        and {text(r.left), text(r.right)} == {var, "1"}


def accumulation(loop: c_ast.For, calls: frozenset[str] = frozenset()) -> str:
    """The accumulator of the loop body's one side effect, `acc += f` (or `-=`, `acc = acc + f`,
    `acc = acc - f`); `f` and the loop's locals may call the pure functions `calls`."""
    updates = []
    for stmt in g.items(loop.stmt):
        if isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ID):
            updates.append(stmt)
        elif not isinstance(stmt, c_ast.Decl):
            raise NotAccumulation(f"the loop body does more than accumulate (a {type(stmt).__name__})")
    if len(updates) != 1 or added_term(updates[0]) is None:
        raise NotAccumulation("the loop body does not add into one scalar")
    update = updates[0]
    acc = update.lvalue.name
    for stmt in g.items(loop.stmt):
        if isinstance(stmt, c_ast.Decl) and stmt.init is not None and not g.is_pure(stmt.init, True, calls):
            raise Unsupported(f"the initializer of '{stmt.name}' in the loop has side effects")
    if not g.is_pure(added_term(update), True, calls):
        raise Unsupported(f"the term added in '{text(update)}' has side effects")
    uses = sum(1 for n in walk(loop) if isinstance(n, c_ast.ID) and n.name == acc)
    if uses != (1 if update.op in ("+=", "-=") else 2):
        raise Unsupported(f"the loop reads the accumulator '{acc}' other than to add to it")
    return acc


def added_term(update: c_ast.Assignment) -> c_ast.Node | None:
    acc = update.lvalue.name
    if update.op in ("+=", "-="):
        return update.rvalue
    r = update.rvalue
    if update.op != "=" or not (isinstance(r, c_ast.BinaryOp) and r.op in ("+", "-")):
        return None
    if isinstance(r.left, c_ast.ID) and r.left.name == acc:
        return r.right
    if r.op == "+" and isinstance(r.right, c_ast.ID) and r.right.name == acc:
        return r.left
    return None


def check_path(path: list[c_ast.Node], loop: c_ast.For) -> list[c_ast.Node]:
    """Between the body and the loop only blocks and ifs without else; before the loop only local
    definitions, after it nothing but the statements that follow the loop in its own block (returned)."""
    after: list[c_ast.Node] = []
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, c_ast.If):
            if child is not parent.iftrue or parent.iffalse is not None:
                raise Unsupported("the loop is under an if with an else branch")
            continue
        if not isinstance(parent, c_ast.Compound):
            raise Unsupported(f"the loop is inside a {type(parent).__name__.lower()} statement")
        stmts = g.items(parent)
        k = next(j for j, s in enumerate(stmts) if s is child)
        for stmt in stmts[:k]:
            check_local(stmt)
        if child is loop:
            after = stmts[k + 1:]
        elif stmts[k + 1:]:
            raise Unsupported("statements follow the if around the loop")
    if not after:
        raise Unsupported("nothing after the loop uses its sum")
    return after


def check_local(stmt: c_ast.Node) -> None:
    for n in walk(stmt):
        target = n.lvalue if isinstance(n, c_ast.Assignment) else \
            n.expr if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") else None
        if target is not None and not isinstance(target, c_ast.ID):
            raise Unsupported("a statement before the loop writes memory (every thread of an output would)")


def accumulator(body, loop, name: str, path, info: KernelInfo, updates_before: bool = False) -> c_ast.Decl:
    """The accumulator's declaration. `updates_before`: it may also be updated between its declaration and
    the loop (`c_acc *= beta;`), where a merge keeps those statements with the start value."""
    if info.decl_counts.get(name) != 1:
        raise Unsupported(f"the accumulator '{name}' is not one local variable")
    decl = next((s for p in path if isinstance(p, c_ast.Compound) for s in g.items(p)
                 if isinstance(s, c_ast.Decl) and s.name == name), None)
    if decl is None or decl.init is None:
        raise Unsupported(f"the accumulator '{name}' is not declared with a start value before the loop")
    t = decl.type
    if not (isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType)
            and t.type.names in (["float"], ["double"])):
        raise Unsupported(f"the accumulator '{name}' is not a float or double scalar")
    allowed = {id(n) for n in walk(loop)}
    holder = info.parents[id(loop)]
    if updates_before and any(s is decl for s in g.items(holder)):
        items = g.items(holder)
        between = items[next(i for i, s in enumerate(items) if s is decl) + 1:
                        next(i for i, s in enumerate(items) if s is loop)]
        allowed |= {id(n) for s in between for n in walk(s)}
    for n in walk(body):
        if id(n) in allowed:
            continue
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name == name \
                or isinstance(n, c_ast.UnaryOp) and n.op in ("&", "++", "--", "p++", "p--") \
                and isinstance(n.expr, c_ast.ID) and n.expr.name == name:
            raise Unsupported(f"the accumulator '{name}' is changed outside the loop")
    return decl


def known(expr: sympy.Expr, ctx: PassContext) -> sympy.Expr:
    return sympy.expand(expr.subs({param_symbol(k): v for k, v in ctx.facts.bindings.items()}))


def trip_count(loop: c_ast.For, start: c_ast.Node, info: KernelInfo, ctx: PassContext) -> int | None:
    env = info.flat_env()
    try:
        trip = known(to_sympy(loop.cond.right, env) - to_sympy(start, env), ctx)
    except NotAffine:
        return None
    return int(trip) + (1 if loop.cond.op == "<=" else 0) if trip.is_Integer else None
