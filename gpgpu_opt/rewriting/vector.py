"""CUDA vector types for rewritten accesses: which vector holds N elements of a type, and parsing snippets
that use them (the snippet parser knows only C's types, so the vectors are declared for it and dropped)."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.ast_util import type_names
from gpgpu_opt.rewriting.cbuild import parse_statements

#: The element types whose accesses the passes widen (by the type table's name: `uint`, `uint32_t` and `unsigned`
#: are `unsigned int`, `half` is `__half`); their vectors: the CUDA type table's.
_VECTORIZABLE = frozenset({"float", "double", "int", "unsigned int", "__half"})
COMPONENTS = "xyzw"
#: The widest access a thread makes in one instruction.
MAX_VECTOR_BYTES = 16


def vector_type(base_type: str, n: int) -> str | None:
    """`float2`, `int4`, `__half2`, ... for n elements of `base_type` (None: no such CUDA vector in the type
    table, e.g. `double4` is 32 bytes and `__half4` does not exist, or wider than 16 B); `half8` for 8 halves,
    a vector the output defines (`definition`)."""
    scalar = cuda_types.scalar(base_type)
    if scalar is None or scalar.name not in _VECTORIZABLE:
        return None
    base_type = scalar.name
    vector = cuda_types.vector_of(base_type, n) if n in (2, 4) else cuda_types.defined_vector_of(base_type, n)
    return vector.name if vector is not None and vector.size <= MAX_VECTOR_BYTES else None


def constructor(vtype: str) -> str:
    """The function that builds a `vtype` from its components: `make_float4`; `__halves2half2` for `__half2`
    (whose `make_half2` only recent headers declare); `make_half8`, which `definition` writes."""
    return "__halves2half2" if vtype == "__half2" else f"make_{vtype}"


def lane_field(width: int, lane: int) -> str:
    """The component of a `width`-element vector that holds `lane`: `x` ... `w`, `h0` ... `h7` for 8."""
    return cuda_types.component_names(width)[lane]


def definitions(funcdef: c_ast.FuncDef) -> list[str]:
    """The definitions (`definition`) of the vectors CUDA lacks that a kernel names."""
    names = type_names(funcdef)
    return [definition(v.name) for v in cuda_types.DEFINED_VECTORS if v.name in names]


def definition(vtype: str) -> str | None:
    """The C text that defines a vector the output uses and CUDA lacks (`half8`: its struct, 16-byte aligned so
    that one load or store moves it, and `make_half8`), under an include guard: a file may be included where
    another defines it; None for CUDA's own vectors."""
    vector = cuda_types.defined_vector(vtype)
    if vector is None:
        return None
    fields, guard = vector.fields, f"GPGPU_OPT_{vtype.upper()}"
    head = f"static __device__ __forceinline__ {vtype} make_{vtype}("
    half = len(fields) // 2      # the parameters on two lines
    params = (", ".join(f"{vector.base} {f}" for f in fields[:half]) + ",\n" + " " * len(head)
              + ", ".join(f"{vector.base} {f}" for f in fields[half:]))
    return (f"#ifndef {guard}\n#define {guard}\n"
            f"// gpgpu-opt: {vector.n} {vector.base} in one {vector.size}-byte access (CUDA has no {vtype})\n"
            f"struct __align__({vector.size}) {vtype} {{\n    {vector.base} {', '.join(fields)};\n}};\n"
            f"{head}{params})\n{{\n"
            f"    {vtype} v;\n" + "".join(f"    v.{f} = {f};\n" for f in fields) +
            f"    return v;\n}}\n#endif\n")


def parse_vector_statements(source: str, types: set[str]) -> list[c_ast.Node]:
    """Statements of a snippet that may name the vector `types` (e.g. `float2`)."""
    typedefs = []
    for name in sorted(types):
        vector = cuda_types.vector(name) or cuda_types.defined_vector(name)
        base, fields = vector.base, ", ".join(vector.fields)
        if base == "__half":    # not a C type: the snippet parser only needs to know it is one
            typedefs.append("typedef struct { unsigned short __x; } __half;")
        typedefs.append(f"typedef struct {{ {base} {fields}; }} {name};")
    stmts = parse_statements("\n".join(typedefs + [source]))
    return stmts[len(typedefs):]
