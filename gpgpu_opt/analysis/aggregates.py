"""Parameters the passes do not model element by element: structs (`const Particle *p` read as
`p[i].x`, a struct of pointers `Params s` read as `s.a[i]`) and pointers to pointers (`float **rows`).
Their accesses are not the flat element accesses the passes rewrite, so a kernel with one is left as
written, with a note naming the parameter. Arrays of arrays (`double c[][Y][X]`) are analysed, each access
at its flattened subscript `(z * Y + y) * X + x` (see accesses), and emulated; but the passes find and
rewrite element accesses as `a[subscript]` of a flat array (`c[z]` would be taken for an element), so such
a kernel is left as written too.

An array of structs whose layout is certain is analysed too: a struct of m fields of one scalar type T
(`struct LatLong { float lat, lng; }`) has no padding (each field is aligned as T is), so field k of element
e is element `m * e + k` of T; a field read `p[e].lat` is analysed at that subscript (coalescing, reuse)
and left as written, like an element of an array of arrays. A layout is a whitelist: fields of float,
double, int or unsigned int alone, no bit-fields, arrays, nested structs or unions."""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.emulator.errors import UnsupportedConstruct
from gpgpu_opt.emulator.values import type_from_names

#: The field types of a layout taken as certain (their sizes: the CUDA type table's).
_FIELD_TYPES = frozenset({"float", "int", "unsigned int", "double"})


@dataclass(frozen=True)
class StructLayout:
    """A struct of `len(fields)` fields of one scalar type: field k of element e is `len(fields) * e + k`."""
    name: str
    field_type: str
    fields: tuple[str, ...]

    @property
    def stride(self) -> int:
        return len(self.fields)

    @property
    def field_bytes(self) -> int:
        return cuda_types.size_of(self.field_type)

    def describe(self) -> str:
        return f"{self.stride} {self.field_type} field{'s' if self.stride > 1 else ''}"


def is_element_type(base_type: str) -> bool:
    """A scalar or CUDA vector type (the types the emulator holds in memory); not a struct or union."""
    if base_type == "struct":
        return False
    try:
        return type_from_names(base_type.split()) is not None
    except UnsupportedConstruct:
        return False


def uniform_layouts(ast: c_ast.FileAST) -> dict[str, StructLayout]:
    """The structs of `ast` (the file's type declarations) whose layout is certain (module doc), by the
    name a kernel gives their type: the typedef name, or `struct TAG`. The environment's own types (the
    prelude's vector types, which have alignments of their own) are not the file's."""
    from gpgpu_opt.frontend.cuda_c import PRELUDE_FILE  # (the front end imports the analyses)

    exts = [e for e in ast.ext if e.coord is None or e.coord.file != PRELUDE_FILE]
    definitions: dict[str, c_ast.Struct] = {}
    for ext in exts:
        struct = _struct_of(ext)
        if struct is not None and struct.name and struct.decls is not None:
            definitions[struct.name] = struct
    layouts: dict[str, StructLayout] = {}
    for ext in exts:
        struct = _struct_of(ext)
        if struct is None:
            continue
        if struct.decls is None:  # `typedef struct Node Node;`: the definition may come later
            struct = definitions.get(struct.name)
        name = ext.name if isinstance(ext, c_ast.Typedef) else f"struct {struct.name}" if struct else None
        layout = _layout(name, struct) if name and struct is not None else None
        if layout is not None:
            layouts[name] = layout
    return layouts


def _struct_of(ext) -> c_ast.Struct | None:
    """The struct a file-scope `typedef struct ... NAME;` or `struct TAG {...};` declares."""
    if isinstance(ext, c_ast.Typedef) and isinstance(ext.type, c_ast.TypeDecl) \
            and isinstance(ext.type.type, c_ast.Struct):
        return ext.type.type
    if isinstance(ext, c_ast.Decl) and ext.name is None and isinstance(ext.type, c_ast.Struct):
        return ext.type
    return None


def _layout(name: str, struct: c_ast.Struct) -> StructLayout | None:
    types, fields = set(), []
    for decl in struct.decls or []:
        if not isinstance(decl, c_ast.Decl) or decl.bitsize is not None or not decl.name \
                or not isinstance(decl.type, c_ast.TypeDecl) \
                or not isinstance(decl.type.type, c_ast.IdentifierType):
            return None
        types.add(" ".join(decl.type.type.names))
        fields.append(decl.name)
    if len(types) != 1 or not fields or next(iter(types)) not in _FIELD_TYPES:
        return None
    return StructLayout(name, types.pop(), tuple(fields))


def param_layout(kernel, name: str) -> StructLayout | None:
    """The certain layout of the struct that the pointer parameter `name` points to, if it has one."""
    param = next((p for p in kernel.params if p.name == name), None)
    if param is None or not param.is_pointer or param.inner_dims or param.indirect:
        return None
    return kernel.struct_layouts.get(param.base_type)


def unmodelled_parameter(kernel) -> str | None:
    """Why a parameter of the kernel keeps it as written (None: every parameter is modelled)."""
    for p in kernel.params:
        if p.indirect:
            return f"the parameter '{p.name}' is a pointer to pointers (or an array of arrays of unknown size)"
        if p.inner_dims:
            return (f"the parameter '{p.name}' is an array of arrays (analysed as its flattened subscripts; the "
                    "passes rewrite flat arrays only)")
        if not is_element_type(p.base_type):
            if param_layout(kernel, p.name) is not None:  # its fields: flat elements (emulator/structs.py)
                continue
            what = "a pointer to a struct" if p.is_pointer else "a struct passed by value"
            spelled = "" if p.base_type == "struct" else f" ('{p.base_type}')"
            return f"the parameter '{p.name}' is {what}{spelled}, whose members the analyses do not model"
    return None
