"""CUDA vector types for rewritten accesses: which vector holds N elements of a type, and parsing snippets
that use them (the snippet parser knows only C's types, so the vectors are declared for it and dropped)."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.rewriting.cbuild import parse_statements

#: The element types (as written) whose accesses the passes widen; their vectors: the CUDA type table's.
_VECTORIZABLE = frozenset({"float", "double", "int", "unsigned int", "unsigned", "__half", "half"})
COMPONENTS = "xyzw"
#: The widest access a thread makes in one instruction.
MAX_VECTOR_BYTES = 16


def vector_type(base_type: str, n: int) -> str | None:
    """`float2`, `int4`, `__half2`, ... for n elements of `base_type` (None: no such CUDA vector in the type
    table, e.g. `double4` is 32 bytes and `__half4` does not exist, or wider than 16 B)."""
    vector = cuda_types.vector_of(base_type, n) if base_type in _VECTORIZABLE and n in (2, 4) else None
    return vector.name if vector is not None and vector.size <= MAX_VECTOR_BYTES else None


def constructor(vtype: str) -> str:
    """The function that builds a `vtype` from its components: `make_float4`; `__halves2half2` for `__half2`
    (whose `make_half2` only recent headers declare)."""
    return "__halves2half2" if vtype == "__half2" else f"make_{vtype}"


def parse_vector_statements(source: str, types: set[str]) -> list[c_ast.Node]:
    """Statements of a snippet that may name the vector `types` (e.g. `float2`)."""
    typedefs = []
    for name in sorted(types):
        vector = cuda_types.vector(name)
        base, fields = vector.base, ", ".join(COMPONENTS[:vector.n])
        if base == "__half":    # not a C type: the snippet parser only needs to know it is one
            typedefs.append("typedef struct { unsigned short __x; } __half;")
        typedefs.append(f"typedef struct {{ {base} {fields}; }} {name};")
    stmts = parse_statements("\n".join(typedefs + [source]))
    return stmts[len(typedefs):]
