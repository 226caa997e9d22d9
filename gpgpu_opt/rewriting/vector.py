"""CUDA vector types for rewritten accesses: which vector holds N elements of a type, and parsing snippets
that use them (the snippet parser knows only C's types, so the vectors are declared for it and dropped)."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.rewriting.staging import parse_statements

_PREFIX = {"float": "float", "double": "double", "int": "int", "unsigned int": "uint", "unsigned": "uint"}
COMPONENTS = "xyzw"


def vector_type(base_type: str, n: int) -> str | None:
    """`float2`, `int4`, ... for n elements of `base_type` (None: no such CUDA vector, or wider than 16 B)."""
    prefix = _PREFIX.get(base_type)
    if prefix is None or n not in (2, 4) or (prefix == "double" and n > 2):
        return None
    return f"{prefix}{n}"


def parse_vector_statements(source: str, types: set[str]) -> list[c_ast.Node]:
    """Statements of a snippet that may name the vector `types` (e.g. `float2`)."""
    typedefs = []
    for name in sorted(types):
        base = next(b for b, p in _PREFIX.items() if name.startswith(p) and name[len(p):].isdigit())
        fields = ", ".join(COMPONENTS[:int(name[-1])])
        typedefs.append(f"typedef struct {{ {base} {fields}; }} {name};")
    stmts = parse_statements("\n".join(typedefs + [source]))
    return stmts[len(typedefs):]
