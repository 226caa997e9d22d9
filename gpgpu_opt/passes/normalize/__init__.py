"""normalize: integer constant folding, global loads hoisted out of larger expressions into temporaries
(the paper's one-access-per-statement form), and promotion of a global accumulator in a loop to a register.

`sum += A[i] * B[i];` becomes `const float A_val = A[i]; const float B_val = B[i]; sum += A_val * B_val;`.
Loads under `&&`, `||` or `?:` stay where they are (they may not execute), and so do loads in statements
with other side effects (calls, increments) whose order relative to the load could matter.

`__ldg(&a[i])` of const data is read as `a[i]` (gpgpu_opt.passes.normalize.ldg).
Thread indices are made canonical (gpgpu_opt.passes.normalize.index: `int bx = blockIdx.x; ... bx *
NUMBER_THREADS + tx` is `blockIdx.x * blockDim.x + threadIdx.x` where every launch has blocks of
NUMBER_THREADS), and a final `return;` is dropped (gpgpu_opt.passes.normalize.returns). Induction variables
(`int c = ...; ... c += xy;` once per iteration of a z loop) are read in closed form, `c + k * xy`
(gpgpu_opt.analysis.induction).

`for (k...) C[e] += f;` becomes `float C_acc = C[e]; for (k...) C_acc += f; C[e] = C_acc;` where that is
safe (gpgpu_opt.passes.normalize.accumulators says when).
"""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.analysis.aggregates import is_element_type
from gpgpu_opt.analysis.calls import pure_calls
from gpgpu_opt.ast_util import fresh_name as _fresh, transform, walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.normalize.accumulators import promote_accumulators
from gpgpu_opt.passes.normalize.chains import split_chained_assignments
from gpgpu_opt.passes.normalize.definitions import merge_single_definitions
from gpgpu_opt.passes.normalize.index import canonical_indices
from gpgpu_opt.passes.normalize.ldg import plain_read_only_loads
from gpgpu_opt.analysis.induction import closed_form_inductions
from gpgpu_opt.passes.normalize.returns import drop_trailing_returns
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.record import PassRecord

_FOLDABLE = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    merge_single_definitions(kernel)
    transform(kernel.body, _fold)
    drop_trailing_returns(kernel.body)
    closed_form_inductions(kernel, ctx.log)
    split_chained_assignments(kernel.body, {n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl)
                                            and "volatile" in (n.quals or [])})
    canonical_indices(kernel, ctx)
    promote_accumulators(kernel, ctx)
    plain_read_only_loads(kernel)
    _hoist_loads(kernel, ctx)
    return kernel


def _hoist_loads(kernel: Kernel, ctx: PassContext) -> None:
    # A volatile load stays where it is: `a[i] + a[i]` is two loads, not one temporary read twice. An element
    # of an array of structs is read by field (`p[i].x`), never copied whole.
    arrays = {p.name: p for p in kernel.arrays if not p.is_volatile and is_element_type(p.base_type)}
    taken = {n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name} | \
        {p.name for p in kernel.params}
    printer = CudaGenerator()
    pure = pure_calls(ctx.facts.device_functions)

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


__all__ = ["run"]


PASS = PassRecord(
    "normalize", "constant folding, global loads hoisted into temporaries, canonical thread indices, induction "
    "variables in closed form, global accumulators promoted to registers", run, foundation=True, form=True)
