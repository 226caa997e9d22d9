"""Reading loops and accesses off the source the way nvcc does: trip counts of loops that are not in canonical
form (by running them), `#pragma unroll`, a loop over a counter and a second variable, shared arrays'
shapes, accesses through a pointer cast to a vector type."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.analysis.accesses import element_bytes
from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import NotAffine, to_sympy
from gpgpu_opt.ast_util import walk


def simulate(node: c_ast.For, env, subs) -> float | None:
    """Trip count of a loop with a numeric start and bound, stepping by any constant operation (halving
    loops: `for (s = 16; s > 0; s /= 2)`), by running it (at most 2^20 iterations)."""
    init, cond, nxt = node.init, node.cond, node.next
    try:
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1:
            var, start = init.decls[0].name, to_sympy(init.decls[0].init, env)
        elif isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
            var, start = init.lvalue.name, to_sympy(init.rvalue, env)
        else:
            return None
        if not (isinstance(cond, c_ast.BinaryOp) and isinstance(cond.left, c_ast.ID) and cond.left.name == var):
            return None
        bound = to_sympy(cond.right, env).subs(subs)
        start = start.subs(subs)
    except NotAffine:
        return None
    if not (start.is_number and bound.is_number and isinstance(nxt, c_ast.Assignment)
            and isinstance(nxt.lvalue, c_ast.ID) and nxt.lvalue.name == var
            and isinstance(nxt.rvalue, c_ast.Constant) and nxt.rvalue.type == "int"):
        return None
    step = int(nxt.rvalue.value.rstrip("uUlL"), 0)
    ops = {"/=": lambda v: v // step, ">>=": lambda v: v >> step, "*=": lambda v: v * step,
           "<<=": lambda v: v << step, "+=": lambda v: v + step, "-=": lambda v: v - step}
    tests = {"<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__, "!=": int.__ne__}
    if nxt.op not in ops or cond.op not in tests:
        return None
    value, bound, count = int(start), int(bound), 0
    while tests[cond.op](value, bound) and count < 1 << 20:
        value, count = ops[nxt.op](value), count + 1
    return float(count)


def unroll_pragmas(body: c_ast.Node) -> dict[int, int]:
    """For each loop under `#pragma unroll`: -1 (fully) or the factor asked for."""
    found = {}
    for node in walk(body):
        items = getattr(node, "block_items", None) or []
        for pragma, loop in zip(items, items[1:]):
            if isinstance(pragma, c_ast.Pragma) and isinstance(loop, c_ast.For) \
                    and pragma.string.strip().startswith("unroll"):
                factor = pragma.string.strip()[len("unroll"):].strip()
                found[id(loop)] = int(factor) if factor.isdigit() else -1
    return found


def counter_only(node: c_ast.For) -> c_ast.For:
    """`for (k0 = 0, stage = 0; k0 < n; k0 += 16, stage ^= 1)` as the loop over its compared counter alone."""
    cond = node.cond
    var = cond.left.name if isinstance(cond, c_ast.BinaryOp) and isinstance(cond.left, c_ast.ID) else None
    init = node.init
    if isinstance(init, c_ast.DeclList):
        init = next((d for d in init.decls if d.name == var), None)
        init = c_ast.DeclList([init]) if init is not None else None
    nxt = node.next
    if isinstance(nxt, c_ast.ExprList):
        nxt = next((e for e in nxt.exprs if var in assigned_names(e)), None)
    return c_ast.For(init, cond, nxt, node.stmt, node.coord)


def shape(t) -> tuple[list[int], int]:
    """(dimensions, element bytes) of a declared array."""
    dims = []
    while isinstance(t, c_ast.ArrayDecl):
        dim = t.dim
        dims.append(int(dim.value.rstrip("uUlL"), 0) if isinstance(dim, c_ast.Constant) else 1)
        t = t.type
    names = getattr(getattr(t, "type", None), "names", ["float"])
    return dims, element_bytes(" ".join(names))


def subscripts(node: c_ast.ArrayRef) -> list[c_ast.Node]:
    found = []
    while isinstance(node, c_ast.ArrayRef):
        found.append(node.subscript)
        node = node.name
    return found[::-1]


def vector_view(node: c_ast.ArrayRef) -> tuple[c_ast.ID, int] | None:
    """(the array, the vector's bytes) of an access through a pointer cast to a vector type."""
    cast = node.name
    if not (isinstance(cast, c_ast.Cast) and isinstance(cast.expr, c_ast.ID)
            and isinstance(cast.to_type.type, c_ast.PtrDecl)):
        return None
    names = getattr(getattr(cast.to_type.type.type, "type", None), "names", [])
    vector = cuda_types.vector(names[0]) if len(names) == 1 else None
    return (cast.expr, vector.size) if vector else None
