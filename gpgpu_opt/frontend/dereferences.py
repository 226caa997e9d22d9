"""Dereferences as subscripts: `*(p + e)` is `p[e]`, `*p` is `p[0]`, `p->f` is `p[0].f`.

The analyses see a kernel's global accesses as subscripts of a pointer (`a[i]`): a store written
`*(b + i) = s;` would otherwise be no access at all, invisible to every "is this array written" check, to
the emulator's comparison of the outputs, and to const-qualification. The front end rewrites every
dereference of a pointer named by the kernel (a pointer parameter or a local declared as a pointer) into
the subscript with the same meaning, before any analysis runs.

What is rewritten, a whitelist:
- `*p` -> `p[0]`, `p->f` -> `p[0].f` and `*(p + e)`, `*(e + p)` -> `p[e]`: C defines `a[b]` as `*(a + b)`,
  so these are the same expression, for every value;
- `*(p + e1 + e2 - e3 ...)` (left to right, p first) -> `p[e1 + e2 - e3 ...]` for a pointer *parameter* p
  only. Pointer arithmetic adds each term at its own width, the subscript sums them in their common C type
  first; the two agree on every offset from 0 to 2^31 - 1, which are the elements of the buffer p points
  at, where a parameter points at the start of its buffer (as the analyses and the emulator take it). A
  local pointer may point into the middle of a buffer (a negative sum is then a valid element), so for a
  local only the exact forms above are rewritten.
Anything else (`*(float4 *)(p + i)`, `*p++`, `*(p + i) ` with p an integer) stays as written.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import transform, walk


def subscript_dereferences(func: c_ast.FuncDef) -> int:
    """Rewrite the dereferences of `func`'s pointers as subscripts (see module doc), in place; how many."""
    params = _pointer_names(_parameters(func))
    locals_ = _pointer_names(n for n in walk(func.body) if isinstance(n, c_ast.Decl))
    # A local that shadows a parameter, or a name declared twice, is skipped: which one is meant is not local.
    shadowed = params & locals_ | _declared_twice(func)
    pointers = (params | locals_) - shadowed
    wide_ok = params - shadowed
    count = 0

    def rewrite(node):
        nonlocal count
        replacement = None
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            replacement = _subscript(node.expr, pointers, wide_ok, node.coord)
        elif isinstance(node, c_ast.StructRef) and node.type == "->" and _is_pointer_id(node.name, pointers):
            element = c_ast.ArrayRef(node.name, c_ast.Constant("int", "0", node.coord), node.coord)
            replacement = c_ast.StructRef(element, ".", node.field, node.coord)
        if replacement is not None:
            count += 1
        return replacement

    func.body = transform(func.body, rewrite)  # (member names are IDs: `rewrite` leaves them)
    return count


def _parameters(func: c_ast.FuncDef) -> list[c_ast.Decl]:
    args = func.decl.type.args
    return [p for p in (args.params if args else []) if isinstance(p, c_ast.Decl) and p.name]


def _pointer_names(decls) -> set[str]:
    """Pointers to data (a pointer to a function is called, not subscripted)."""
    return {d.name for d in decls if d.name and isinstance(d.type, c_ast.PtrDecl)
            and not isinstance(d.type.type, c_ast.FuncDecl)}


def _declared_twice(func: c_ast.FuncDef) -> set[str]:
    seen, twice = set(), set()
    for d in [*_parameters(func), *(n for n in walk(func.body) if isinstance(n, c_ast.Decl))]:
        (twice if d.name in seen else seen).add(d.name)
    return twice


def _is_pointer_id(node, pointers: set[str]) -> bool:
    return isinstance(node, c_ast.ID) and node.name in pointers


def _subscript(expr, pointers: set[str], wide_ok: set[str], coord) -> c_ast.ArrayRef | None:
    """`p[...]` with the meaning of `*expr`, or None where the whitelist does not cover expr."""
    if _is_pointer_id(expr, pointers):
        return c_ast.ArrayRef(expr, c_ast.Constant("int", "0", coord), coord)
    if not isinstance(expr, c_ast.BinaryOp) or expr.op != "+":
        return _chain(expr, wide_ok, coord)
    if _is_pointer_id(expr.left, pointers) and not _names_pointer(expr.right, pointers):
        return c_ast.ArrayRef(expr.left, expr.right, coord)
    if _is_pointer_id(expr.right, pointers) and not _names_pointer(expr.left, pointers):
        return c_ast.ArrayRef(expr.right, expr.left, coord)
    return _chain(expr, wide_ok, coord)


def _chain(expr, wide_ok: set[str], coord) -> c_ast.ArrayRef | None:
    """`((p + e1) + e2) - e3` with p a pointer parameter -> `p[e1 + e2 - e3]`."""
    terms: list[tuple[str, c_ast.Node]] = []
    while isinstance(expr, c_ast.BinaryOp) and expr.op in ("+", "-"):
        terms.append((expr.op, expr.right))
        expr = expr.left
    if not _is_pointer_id(expr, wide_ok) or len(terms) < 2:
        return None
    if any(_names_pointer(term, wide_ok | {expr.name}) for _, term in terms):
        return None
    terms.reverse()
    op, first = terms[0]
    offset = first if op == "+" else c_ast.UnaryOp("-", first, coord)
    for op, term in terms[1:]:
        offset = c_ast.BinaryOp(op, offset, term, coord)
    return c_ast.ArrayRef(expr, offset, coord)


def _names_pointer(expr, pointers: set[str]) -> bool:
    """Does `expr` use a pointer other than as the base of a subscript (`idx[i]` is an integer there)?"""
    bases = {id(n.name) for n in walk(expr) if isinstance(n, c_ast.ArrayRef)}
    members = {id(n.field) for n in walk(expr) if isinstance(n, c_ast.StructRef)}
    return any(isinstance(n, c_ast.ID) and n.name in pointers and id(n) not in bases | members
               for n in walk(expr))
