"""Which pointers a function may store through: a conservative over-approximation (stores, atomics,
pointer values flowing into stored-through names, callees' stores through their parameters)."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import call_args, call_name, ids_in
from gpgpu_opt.frontend.math_api import written_arguments


def param_decls(funcdef: c_ast.FuncDef) -> list[c_ast.Decl]:
    args = funcdef.decl.type.args
    out = []
    for p in (args.params if args else []):
        if isinstance(p, c_ast.Typename):
            continue                                    # (void)
        if not isinstance(p, c_ast.Decl):
            continue  # an unnamed or K&R parameter: the emulator reports it when it binds
        out.append(p)
    return out


def _ids(node) -> set[str]:
    return ids_in(node) if node is not None else set()


def written_names(func: c_ast.FuncDef, device_functions: dict, _stack=()) -> set[str]:
    """Names (parameters, pointer locals) through which `func` may store or do atomics: a conservative
    over-approximation used to decide which global arrays need read tracking for race detection."""
    stores: set[str] = set()
    flows: list[tuple[str, c_ast.Node]] = []     # name = expr: pointer values flow from expr into name

    def walk(n):
        if isinstance(n, c_ast.Assignment):
            stores.update(_ids(n.lvalue) if not isinstance(n.lvalue, c_ast.ID) else ())
            if isinstance(n.lvalue, c_ast.ID):
                flows.append((n.lvalue.name, n.rvalue))
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
            if not isinstance(n.expr, c_ast.ID):
                stores.update(_ids(n.expr))
        elif isinstance(n, c_ast.Decl) and n.init is not None and n.name:
            flows.append((n.name, n.init))
        elif call_name(n) is not None:
            name, args = call_name(n), call_args(n)
            if name.startswith("atomic") and args:
                stores.update(_ids(args[0]))
            elif written_arguments(name) and name not in device_functions:  # __stcs(&a[i], v), sincosf
                for k in written_arguments(name) & set(range(len(args))):
                    stores.update(_ids(args[k]))
            elif name in device_functions and name not in _stack:
                callee = device_functions[name]
                inner = written_names(callee, device_functions, _stack + (name,))
                for p, a in zip(param_decls(callee), args):
                    if p.name in inner:
                        stores.update(_ids(a))
        for _, child in n.children():
            walk(child)

    walk(func.body)
    changed = True
    while changed:
        changed = False
        for name, expr in flows:
            if name in stores:
                new = _ids(expr) - stores
                if new:
                    stores |= new
                    changed = True
    return stores
