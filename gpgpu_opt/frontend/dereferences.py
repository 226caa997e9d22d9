"""Dereferences as subscripts: `*(p + e)` is `p[e]`, `*p` is `p[0]`, `p->f` is `p[0].f`.

The analyses see a kernel's global accesses as subscripts of a pointer (`a[i]`): a store written
`*(b + i) = s;` would otherwise be no access at all, invisible to every "is this array written" check, to
the emulator's comparison of the outputs, and to const-qualification. The front end rewrites every
dereference of a pointer named by the kernel (a pointer parameter or a local declared as a pointer) into
the subscript with the same meaning, before any analysis runs.

What is rewritten, a whitelist:
- `*p` -> `p[0]`, `p->f` -> `p[0].f` and `*(p + e)`, `*(e + p)` -> `p[e]`: C defines `a[b]` as `*(a + b)`,
  so these are the same expression, for every value;
- `*(p + e1 + e2 - e3 ...)` (left to right, p first) -> `p[e1 + e2 - e3 ...]` where the sum in C's
  types is the offset pointer arithmetic adds term by term: every term a signed int (`int`, `short`,
  `char`, a decimal literal), or every term unsigned (`threadIdx.x`, `unsigned int`) and every operator
  `+`. A mix is left as written: `(p + threadIdx.x) - 1` is p's element -1 at thread 0 (valid where p
  points into a buffer), while `threadIdx.x - 1` wraps to 2^32 - 1. (Sums past 2^31 elements are outside
  the 32-bit index model of the analyses.)
Anything else (`*(float4 *)(p + i)`, `*p++`, `*(p + i) ` with p an integer) stays as written.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import transform, walk


def subscript_dereferences(func: c_ast.FuncDef) -> int:
    """Rewrite the dereferences of `func`'s pointers as subscripts (see module doc), in place; how many."""
    decls = [*_parameters(func), *(n for n in walk(func.body) if isinstance(n, c_ast.Decl))]
    twice = _declared_twice(decls)  # which declaration a use means is not local: skipped
    pointers = _pointer_names(decls) - twice
    types = {d.name: _declared_class(d) for d in decls if d.name and d.name not in twice}
    count = 0

    def rewrite(node):
        nonlocal count
        replacement = None
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            replacement = _subscript(node.expr, pointers, types, node.coord)
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


def _declared_twice(decls) -> set[str]:
    seen, twice = set(), set()
    for d in decls:
        (twice if d.name in seen else seen).add(d.name)
    return twice


def _is_pointer_id(node, pointers: set[str]) -> bool:
    return isinstance(node, c_ast.ID) and node.name in pointers


def _subscript(expr, pointers: set[str], types: dict, coord) -> c_ast.ArrayRef | None:
    """`p[...]` with the meaning of `*expr`, or None where the whitelist does not cover expr."""
    if _is_pointer_id(expr, pointers):
        return c_ast.ArrayRef(expr, c_ast.Constant("int", "0", coord), coord)
    if not isinstance(expr, c_ast.BinaryOp) or expr.op != "+":
        return _chain(expr, pointers, types, coord)
    if _is_pointer_id(expr.left, pointers) and not _names_pointer(expr.right, pointers):
        return c_ast.ArrayRef(expr.left, expr.right, coord)
    if _is_pointer_id(expr.right, pointers) and not _names_pointer(expr.left, pointers):
        return c_ast.ArrayRef(expr.right, expr.left, coord)
    return _chain(expr, pointers, types, coord)


def _chain(expr, pointers: set[str], types: dict, coord) -> c_ast.ArrayRef | None:
    """`((p + e1) + e2) - e3` -> `p[e1 + e2 - e3]` where C sums the terms as pointer arithmetic does."""
    terms: list[tuple[str, c_ast.Node]] = []
    while isinstance(expr, c_ast.BinaryOp) and expr.op in ("+", "-"):
        terms.append((expr.op, expr.right))
        expr = expr.left
    if not _is_pointer_id(expr, pointers) or len(terms) < 2:
        return None
    if any(_names_pointer(term, pointers) for _, term in terms):
        return None
    classes = {_integer_class(term, types) for _, term in terms}
    if not (classes == {"signed"} or classes == {"unsigned"} and all(op == "+" for op, _ in terms)):
        return None
    terms.reverse()
    op, first = terms[0]
    offset = first if op == "+" else c_ast.UnaryOp("-", first, coord)
    for op, term in terms[1:]:
        offset = c_ast.BinaryOp(op, offset, term, coord)
    return c_ast.ArrayRef(expr, offset, coord)


_SIGNED_WORDS = {"int", "short", "char", "signed"}
_BUILTIN_INDICES = {"threadIdx", "blockIdx", "blockDim", "gridDim"}


def _declared_class(decl: c_ast.Decl) -> str | None:
    """'signed' (an int no wider than int), 'unsigned' (unsigned int or narrower), or None."""
    t = decl.type
    if not isinstance(t, c_ast.TypeDecl) or not isinstance(t.type, c_ast.IdentifierType):
        return None
    words = set(t.type.names)
    if "long" in words or not words <= _SIGNED_WORDS | {"unsigned"}:
        return None
    return "unsigned" if "unsigned" in words else "signed"


def _integer_class(expr, types: dict) -> str | None:
    """The class (as _declared_class) of an integer expression's C type, None where not certain."""
    if isinstance(expr, c_ast.Constant) and expr.type == "int":
        text = expr.value.lower()
        if text.isdigit() and int(text) < 2 ** 31:
            return "signed"
        return "unsigned" if text[:-1].isdigit() and text.endswith("u") and int(text[:-1]) < 2 ** 32 else None
    if isinstance(expr, c_ast.ID):
        return types.get(expr.name)
    if isinstance(expr, c_ast.StructRef) and expr.type == "." and isinstance(expr.name, c_ast.ID) \
            and expr.name.name in _BUILTIN_INDICES and expr.name.name not in types:
        return "unsigned"
    if isinstance(expr, c_ast.UnaryOp) and expr.op in ("-", "+"):
        return _integer_class(expr.expr, types)
    if isinstance(expr, c_ast.BinaryOp) and expr.op in ("+", "-", "*", "/", "%"):
        left, right = _integer_class(expr.left, types), _integer_class(expr.right, types)
        if left is None or right is None:
            return None
        return "signed" if left == right == "signed" else "unsigned"  # int op unsigned int is unsigned int
    return None


def _names_pointer(expr, pointers: set[str]) -> bool:
    """Does `expr` use a pointer other than as the base of a subscript (`idx[i]` is an integer there)?"""
    bases = {id(n.name) for n in walk(expr) if isinstance(n, c_ast.ArrayRef)}
    members = {id(n.field) for n in walk(expr) if isinstance(n, c_ast.StructRef)}
    return any(isinstance(n, c_ast.ID) and n.name in pointers and id(n) not in bases | members
               for n in walk(expr))
