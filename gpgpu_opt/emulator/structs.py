"""A flat view of arrays of structs whose layout is certain (frontend/struct_layouts.StructLayout): the emulator
runs a copy of the kernel in which a pointer to such a struct is a pointer to its field type, so that its
memory is the flat numpy array of the fields (field k of element e is element `m * e + k`).

The rewrite is a whitelist of the uses of a struct pointer `p` (a parameter or a local):
- `p[e].f` (the front end's spelling of `p->f` and `(p + e)->f` too) becomes `p[m * (e) + k]`;
- `p + e`, `e + p`, `p - e`, `p += e`, `p -= e` step m elements per struct;
- `p` alone as a pointer value: an initializer or the right side of `=` of another struct pointer, or the
  operand of a cast to a pointer (a vector view of the fields, `(const float2 *)p`), which sees the words;
Anything else (`p[e]` as a whole struct, `*p`, a struct passed to a function, a comparison) is a construct
the emulator does not model: UnsupportedConstruct, never an approximation."""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.emulator.errors import UnsupportedConstruct, where


def flatten_struct_pointers(funcdef: c_ast.FuncDef, layouts: dict) -> c_ast.FuncDef:
    """A copy of `funcdef` whose pointers to the structs of `layouts` (StructLayout by type name) are
    pointers to the field type (module doc); `funcdef` itself when it has none."""
    if not layouts or not _mentions(funcdef, layouts):
        return funcdef
    work = copy.deepcopy(funcdef)
    pointers: dict[str, object] = {}
    for decl in _decls(work):
        layout = _pointer_layout(decl, layouts)
        if layout is not None:
            pointers[decl.name] = layout
            _retype(decl, layout)
    if not pointers:
        return funcdef
    work.body = _Flattener(pointers).visit(work.body)
    return work


def _mentions(funcdef, layouts) -> bool:
    return any(isinstance(n, c_ast.IdentifierType) and " ".join(_plain(n.names)) in layouts
               for n in _walk(funcdef))


def _plain(names):
    return [n for n in names if n not in ("const", "volatile", "restrict", "__restrict__")]


def _walk(node):
    yield node
    for _, child in node.children():
        yield from _walk(child)


def _decls(funcdef):
    params = funcdef.decl.type.args.params if funcdef.decl.type.args else []
    yield from (p for p in params if isinstance(p, c_ast.Decl))
    yield from (n for n in _walk(funcdef.body) if isinstance(n, c_ast.Decl))


def _pointer_layout(decl: c_ast.Decl, layouts):
    t = decl.type
    if isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)) and isinstance(t.type, c_ast.TypeDecl) \
            and isinstance(t.type.type, c_ast.IdentifierType):
        return layouts.get(" ".join(_plain(t.type.type.names)))
    return None


def _retype(decl: c_ast.Decl, layout) -> None:
    ident = decl.type.type.type
    kept = [n for n in ident.names if n in ("const", "volatile")]
    ident.names = kept + layout.field_type.split()


def _scaled(layout, e):
    return c_ast.BinaryOp("*", c_ast.Constant("int", str(layout.stride)), e)


class _Flattener:
    def __init__(self, pointers: dict):
        self.pointers = pointers

    def _pointer(self, node):
        return self.pointers.get(node.name) if isinstance(node, c_ast.ID) else None

    def visit(self, node):
        if node is None:
            return None
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            out = method(node)
            if out is not None:
                return out
        if isinstance(node, c_ast.ID) and self._pointer(node) is not None:
            raise UnsupportedConstruct(f"a pointer to a struct ('{node.name}') used other than through its "
                                       f"fields at {where(node)}")
        for slot in node.__slots__:
            if slot in ("coord", "__weakref__"):
                continue
            value = getattr(node, slot, None)
            if isinstance(value, c_ast.Node):
                setattr(node, slot, self.visit(value))
            elif isinstance(value, list):
                setattr(node, slot, [self.visit(v) if isinstance(v, c_ast.Node) else v for v in value])
        return node

    def visit_StructRef(self, node):
        base = node.name
        if node.type == "." and isinstance(base, c_ast.ArrayRef):
            layout = self._pointer(base.name)
            if layout is not None:
                if node.field.name not in layout.fields:
                    raise UnsupportedConstruct(f"field '{node.field.name}' of '{layout.name}' at {where(node)}")
                index = c_ast.BinaryOp("+", _scaled(layout, self.visit(base.subscript)),
                                       c_ast.Constant("int", str(layout.fields.index(node.field.name))))
                return c_ast.ArrayRef(base.name, index, coord=node.coord)
        return None

    def visit_BinaryOp(self, node):
        if node.op not in ("+", "-"):
            return None
        left, right = self._pointer(node.left), self._pointer(node.right) if node.op == "+" else None
        if left is not None and self._pointer(node.right) is None:
            return c_ast.BinaryOp(node.op, node.left, _scaled(left, self.visit(node.right)), coord=node.coord)
        if right is not None and left is None:
            return c_ast.BinaryOp("+", _scaled(right, self.visit(node.left)), node.right, coord=node.coord)
        return None

    def visit_Assignment(self, node):
        layout = self._pointer(node.lvalue)
        if layout is None:
            return None
        if node.op in ("+=", "-="):
            return c_ast.Assignment(node.op, node.lvalue, _scaled(layout, self.visit(node.rvalue)),
                                    coord=node.coord)
        if node.op == "=" and self._pointer(node.rvalue) is not None:
            return node
        if node.op == "=":
            return c_ast.Assignment("=", node.lvalue, self.visit(node.rvalue), coord=node.coord)
        return None

    def visit_Decl(self, node):
        if node.name in self.pointers and self._pointer(node.init) is not None:
            return node
        return None

    def visit_Cast(self, node):
        if isinstance(node.to_type.type, c_ast.PtrDecl) and self._pointer(node.expr) is not None:
            return node
        return None
