"""normalize: integer constant folding, global loads hoisted out of larger expressions into temporaries
(the paper's one-access-per-statement form), and promotion of a global accumulator in a loop to a register.

`sum += A[i] * B[i];` becomes `const float A_val = A[i]; const float B_val = B[i]; sum += A_val * B_val;`.
Loads under `&&`, `||` or `?:` stay where they are (they may not execute), and so do loads in statements
with other side effects (calls, increments) whose order relative to the load could matter.

`for (k...) C[e] += f;` becomes `float C_acc = C[e]; for (k...) C_acc += f; C[e] = C_acc;` when that is
safe: `e` does not change in the loop, C is not otherwise touched there, nothing C might alias is read or
written in the loop (C is `__restrict__`, or no other array is accessed), the update is unconditional, and
the loop runs at least once (so no access is added that the naive kernel would not make).
"""
from __future__ import annotations

import copy

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.calls import pure_calls
from gpgpu_opt.analysis.loops import assigned_names, canonical_loop
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.ast_util import ids_in, transform, walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.context import PassContext

_FOLDABLE = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    transform(kernel.body, _fold)
    _promote_accumulators(kernel, ctx)
    _hoist_loads(kernel, ctx)
    return kernel


def _hoist_loads(kernel: Kernel, ctx: PassContext) -> None:
    arrays = {p.name: p for p in kernel.arrays}
    taken = {n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name} | \
        {p.name for p in kernel.params}
    printer = CudaGenerator()
    pure = pure_calls(ctx.device_functions)

    def loads_of(expr) -> list[c_ast.ArrayRef]:
        found = []

        def visit(n):
            if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name in arrays:
                found.append(n)
                return  # a load inside a subscript is part of this one (an indirect access)
            if isinstance(n, c_ast.BinaryOp) and n.op in ("&&", "||"):
                visit(n.left)  # only the left operand always runs
                return
            if isinstance(n, c_ast.TernaryOp):
                visit(n.cond)
                return
            if isinstance(n, c_ast.UnaryOp) and n.op in ("&", "sizeof"):
                return
            for _, child in n.children():
                visit(child)
        visit(expr)
        return found

    def has_side_effects(expr) -> bool:
        for n in walk(expr):
            if isinstance(n, c_ast.Assignment) or (isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--")):
                return True
            # A call to a pure builtin or helper is arithmetic; any other may touch memory.
            if isinstance(n, c_ast.FuncCall) and not (isinstance(n.name, c_ast.ID) and n.name.name in pure):
                return True
        return False

    def hoist(stmt) -> list:
        if isinstance(stmt, c_ast.Assignment):
            expr = stmt.rvalue
        elif isinstance(stmt, c_ast.Decl) and stmt.init is not None and isinstance(stmt.type, c_ast.TypeDecl):
            expr = stmt.init
        else:
            return [stmt]
        if has_side_effects(expr) or (isinstance(stmt, c_ast.Assignment) and has_side_effects(stmt.lvalue)):
            return [stmt]
        loads = [l for l in loads_of(expr) if l is not expr]
        if not loads:
            return [stmt]
        temporaries: dict[str, str] = {}
        decls = []
        for load in loads:
            text = printer.visit(load)
            if text not in temporaries:
                name = _fresh(f"{load.name.name}_val", taken)
                temporaries[text] = name
                elem = arrays[load.name.name].base_type
                decls.append(c_ast.Decl(name, ["const"], [], [], [],
                                        c_ast.TypeDecl(name, ["const"], None, c_ast.IdentifierType(elem.split())),
                                        copy.deepcopy(load), None, load.coord))

        def replace(n):
            if isinstance(n, c_ast.ArrayRef) and any(n is l for l in loads):
                return c_ast.ID(temporaries[printer.visit(n)], n.coord)
            return None
        if isinstance(stmt, c_ast.Assignment):
            stmt.rvalue = transform(stmt.rvalue, replace)
        else:
            stmt.init = transform(stmt.init, replace)
        return decls + [stmt]

    def visit(node):
        if isinstance(node, c_ast.Compound):
            items = []
            for item in node.block_items or []:
                visit(item)
                items.extend(hoist(item))
            node.block_items = items
            return
        for attr in ("iftrue", "iffalse", "stmt"):
            child = getattr(node, attr, None)
            if child is None:
                continue
            visit(child)
            replaced = hoist(child)
            if len(replaced) > 1:
                setattr(node, attr, c_ast.Compound(replaced, child.coord))

    visit(kernel.body)


def _int(node) -> int | None:
    if isinstance(node, c_ast.Constant) and node.type == "int" and node.value.isdigit():
        return int(node.value)
    return None


def _fold(node):
    if isinstance(node, c_ast.BinaryOp) and node.op in _FOLDABLE:
        a, b = _int(node.left), _int(node.right)
        if a is not None and b is not None:
            value = _FOLDABLE[node.op](a, b)
            if 0 <= value < 2 ** 31:
                return c_ast.Constant("int", str(value), node.coord)
    return None


def _promote_accumulators(kernel: Kernel, ctx: PassContext) -> None:
    params = {p.name: p for p in kernel.arrays}
    env = {p.name: param_symbol(p.name) for p in kernel.scalars}
    taken = {n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name} | set(params) | \
        {p.name for p in kernel.scalars}
    printer = CudaGenerator()
    for compound in [n for n in walk(kernel.body) if isinstance(n, c_ast.Compound)]:
        items = compound.block_items or []
        new_items = []
        for stmt in items:
            if not isinstance(stmt, c_ast.For) or not isinstance(stmt.stmt, c_ast.Compound):
                new_items.append(stmt)
                continue
            promoted = _try_promote(stmt, params, env, taken, printer, ctx)
            new_items.extend(promoted if promoted else [stmt])
        compound.block_items = new_items


def _try_promote(loop: c_ast.For, params, env, taken, printer, ctx) -> list | None:
    for stmt in loop.stmt.block_items or []:
        if not (isinstance(stmt, c_ast.Assignment) and stmt.op in ("+=", "-=", "*=")
                and isinstance(stmt.lvalue, c_ast.ArrayRef) and isinstance(stmt.lvalue.name, c_ast.ID)
                and stmt.lvalue.name.name in params):
            continue
        array = stmt.lvalue.name.name
        subject = f"{array}[{printer.visit(stmt.lvalue.subscript)}]"
        where = Location.of(stmt)
        changed = assigned_names(loop.stmt) | {_iterator(loop)}
        if ids_in(stmt.lvalue.subscript) & changed:
            continue  # the element changes with the loop: not an accumulator
        others = [n for n in walk(loop.stmt) if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID)
                  and n.name.name in params and n is not stmt.lvalue]
        if any(n.name.name == array for n in others):
            ctx.skip(subject, "not promoted to a register: the array is accessed again in the loop", where)
            return None
        if others and not params[array].is_restrict:
            ctx.skip(subject, "not promoted to a register: it may alias the other arrays the loop reads "
                              "(declare it __restrict__)", where)
            return None
        info = canonical_loop(loop, env)
        trips = info.trip_count() if info else None
        if trips is None or not (trips.is_number and trips > 0):
            ctx.skip(subject, "not promoted to a register: the loop may run zero times", where)
            return None
        name = _fresh(f"{array}_acc", taken)
        elem_type = params[array].base_type
        acc_decl = c_ast.Decl(name, [], [], [], [], c_ast.TypeDecl(name, [], None, c_ast.IdentifierType(elem_type.split())),
                              copy.deepcopy(stmt.lvalue), None)
        stmt.lvalue = c_ast.ID(name)
        store = c_ast.Assignment("=", copy.deepcopy(acc_decl.init), c_ast.ID(name))
        ctx.applied(subject, "global accumulator promoted to a register for the loop", where)
        return [acc_decl, loop, store]
    return None


def _iterator(loop: c_ast.For) -> str:
    init = loop.init
    if isinstance(init, c_ast.DeclList):
        return init.decls[0].name
    if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name
    return ""


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


__all__ = ["run", "sympy"]
