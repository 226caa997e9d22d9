"""The structs of a file whose layout is certain: a struct of m fields of one scalar type T (`struct LatLong {
float lat, lng; }`) has no padding (each field is aligned as T is), so field k of element e is element
`m * e + k` of T. A layout is a whitelist: fields of float, double, int or unsigned int alone, no bit-fields,
arrays, nested structs or unions. The front end reads them from the file's type declarations; the analyses
(analysis/aggregates.py), the emulator and vectorize's struct loads use them."""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.frontend.cuda_c import PRELUDE_FILE

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


def uniform_layouts(ast: c_ast.FileAST) -> dict[str, StructLayout]:
    """The structs of `ast` (the file's type declarations) whose layout is certain (module doc), by the
    name a kernel gives their type: the typedef name, or `struct TAG`. The environment's own types (the
    prelude's vector types, which have alignments of their own) are not the file's."""
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


@dataclass(frozen=True)
class Member:
    """One field of a struct of pointers: `const float *vx` is Member('vx', 'float', True, True)."""
    name: str
    base_type: str
    is_pointer: bool
    is_const: bool


def pointer_structs(ast: c_ast.FileAST) -> dict[str, tuple[Member, ...]]:
    """The structs of `ast` whose fields are each a pointer to a scalar (`float *x`, `const int *idx`) or a
    scalar (`int n`), with at least one pointer, by the name a kernel gives their type: a struct of arrays
    passed by value (`ParticlesSoA s`, read as `s.x[i]`). A whitelist like the layouts': no arrays,
    pointers to pointers, nested structs, bit-fields or unions."""
    exts = [e for e in ast.ext if e.coord is None or e.coord.file != PRELUDE_FILE]
    definitions = {st.name: st for st in map(_struct_of, exts) if st is not None and st.name and st.decls}
    found: dict[str, tuple[Member, ...]] = {}
    for ext in exts:
        struct = _struct_of(ext)
        if struct is not None and struct.decls is None:
            struct = definitions.get(struct.name)
        if struct is None:
            continue
        name = ext.name if isinstance(ext, c_ast.Typedef) else f"struct {struct.name}"
        members = _members(struct)
        if members is not None and any(m.is_pointer for m in members):
            found[name] = members
    return found


def _members(struct: c_ast.Struct) -> tuple[Member, ...] | None:
    members = []
    for decl in struct.decls or []:
        if not isinstance(decl, c_ast.Decl) or decl.bitsize is not None or not decl.name:
            return None
        t, pointer = decl.type, False
        if isinstance(t, c_ast.PtrDecl):
            t, pointer = t.type, True
        if not isinstance(t, c_ast.TypeDecl) or not isinstance(t.type, c_ast.IdentifierType):
            return None
        base = " ".join(n for n in t.type.names)
        if cuda_types.scalar(base) is None:
            return None
        members.append(Member(decl.name, base, pointer, "const" in (t.quals or [])))
    return tuple(members) or None


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


__all__ = ["Member", "StructLayout", "pointer_structs", "uniform_layouts"]
