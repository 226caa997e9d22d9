"""The one table of CUDA's types, as data: sizes, alignments, the emulator's numpy dtypes, vector types.

- `SCALAR_TYPES`: C's arithmetic types and CUDA's half types `__half`/`__nv_bfloat16`, each with its size
  on the device (LP64, as nvcc's host: `long` is 8 bytes), its conversion rank and what the emulator
  computes it as; `TYPE_ALIASES`: the names people write for them (`uint32_t`, `uint`, `size_t`, `half`);
  `SPELLINGS`: C's other spellings of the same types (`unsigned`, `long int`, `signed char`).
- `VECTOR_TYPES`: CUDA's vector types (`char1` ... `double4`, `longlong`, `ulonglong`) and `__half2`/
  `__nv_bfloat162`; `VECTOR_ALIASES`: <cuComplex.h>'s and <cufft.h>'s names for float2 and double2.

Every size and alignment here is nvcc's `sizeof`/`alignof` (tests/test_cuda_types.py asks nvcc). The
analyses, passes, cost model, emulator, harness and the parser's prelude all read this table; it imports
nothing of the project, so any floor may use it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScalarType:
    name: str            # the C/CUDA spelling
    dtype: str           # numpy dtype of the emulator's values (bfloat16: float32 rounded to 8 bits)
    kind: str            # 'b' bool, 'i' signed, 'u' unsigned, 'f' floating
    rank: int            # conversion rank (the usual arithmetic conversions)
    size: int            # bytes on the device (sizeof), also its alignment
    declaration: str = ""  # how the C99 prelude declares it, when C does not know it

    @property
    def align(self) -> int:
        return self.size

    @property
    def is_half(self) -> bool:
        """`__half` or `__nv_bfloat16`: 2-byte floating types that C++ operators only mix with their own."""
        return self.kind == "f" and self.size == 2


@dataclass(frozen=True)
class TypeAlias:
    name: str
    target: str          # a ScalarType name
    header: str          # where C or CUDA declares it ("" built into nvcc's C++)


@dataclass(frozen=True)
class VectorType:
    name: str
    base: str            # a ScalarType name
    n: int
    make: bool = True    # CUDA's `make_<name>(...)` constructor exists

    @property
    def fields(self) -> tuple[str, ...]:
        return component_names(self.n)

    @property
    def size(self) -> int:
        return scalar_type(self.base).size * self.n

    @property
    def align(self) -> int:
        """vector_types.h: a 3-vector is aligned as its component; 1-, 2- and 4-vectors as their size, at
        most 16 bytes (`double4`, `longlong4`: 32 bytes aligned to 16)."""
        if self.n == 3:
            return scalar_type(self.base).size
        return min(16, self.size)


SCALAR_TYPES: tuple[ScalarType, ...] = (
    ScalarType("bool", "bool", "b", 0, 1, "typedef _Bool bool;"),
    ScalarType("char", "int8", "i", 1, 1),
    ScalarType("unsigned char", "uint8", "u", 1, 1),
    ScalarType("short", "int16", "i", 2, 2),
    ScalarType("unsigned short", "uint16", "u", 2, 2),
    ScalarType("int", "int32", "i", 3, 4),
    ScalarType("unsigned int", "uint32", "u", 3, 4),
    ScalarType("long", "int64", "i", 4, 8),
    ScalarType("unsigned long", "uint64", "u", 4, 8),
    ScalarType("long long", "int64", "i", 5, 8),
    ScalarType("unsigned long long", "uint64", "u", 5, 8),
    # C++ operators on these exist only between two of the same type (mixing with float is ambiguous)
    ScalarType("__half", "float16", "f", 8, 2, "typedef struct { unsigned short __x; } __half;"),
    ScalarType("__nv_bfloat16", "bfloat16", "f", 8, 2, "typedef struct { unsigned short __x; } __nv_bfloat16;"),
    ScalarType("float", "float32", "f", 10, 4),
    ScalarType("double", "float64", "f", 11, 8),
)

TYPE_ALIASES: tuple[TypeAlias, ...] = (
    TypeAlias("_Bool", "bool", ""),
    TypeAlias("uint", "unsigned int", ""), TypeAlias("ushort", "unsigned short", ""),
    TypeAlias("ulong", "unsigned long", ""), TypeAlias("uchar", "unsigned char", ""),
    TypeAlias("size_t", "unsigned long", ""), TypeAlias("ptrdiff_t", "long", ""),
    TypeAlias("ssize_t", "long", ""),
    TypeAlias("int8_t", "char", "stdint.h"), TypeAlias("int16_t", "short", "stdint.h"),
    TypeAlias("int32_t", "int", "stdint.h"), TypeAlias("int64_t", "long", "stdint.h"),
    TypeAlias("uint8_t", "unsigned char", "stdint.h"), TypeAlias("uint16_t", "unsigned short", "stdint.h"),
    TypeAlias("uint32_t", "unsigned int", "stdint.h"), TypeAlias("uint64_t", "unsigned long", "stdint.h"),
    TypeAlias("intptr_t", "long", "stdint.h"), TypeAlias("uintptr_t", "unsigned long", "stdint.h"),
    TypeAlias("half", "__half", "cuda_fp16.h"), TypeAlias("nv_bfloat16", "__nv_bfloat16", "cuda_bf16.h"),
    TypeAlias("clock_t", "long", ""), TypeAlias("cufftReal", "float", "cufft.h"),
    TypeAlias("cufftDoubleReal", "double", "cufft.h"),
)

#: C's other ways to write a scalar type (same size, dtype and rank; `signed char` is a type of its own in
#: C but differs from `char` in nothing this table records).
SPELLINGS: dict[str, str] = {
    "unsigned": "unsigned int", "signed": "int", "signed int": "int", "signed char": "char",
    "short int": "short", "signed short": "short", "signed short int": "short",
    "unsigned short int": "unsigned short", "long int": "long", "signed long": "long",
    "signed long int": "long", "unsigned long int": "unsigned long", "long long int": "long long",
    "signed long long": "long long", "signed long long int": "long long",
    "unsigned long long int": "unsigned long long",
}

_VECTOR_BASES = (("char", "char"), ("uchar", "unsigned char"), ("short", "short"), ("ushort", "unsigned short"),
                 ("int", "int"), ("uint", "unsigned int"), ("long", "long"), ("ulong", "unsigned long"),
                 ("longlong", "long long"), ("ulonglong", "unsigned long long"), ("float", "float"),
                 ("double", "double"))

VECTOR_TYPES: tuple[VectorType, ...] = tuple(
    VectorType(f"{prefix}{n}", base, n) for prefix, base in _VECTOR_BASES for n in (1, 2, 3, 4)
) + (VectorType("__half2", "__half", 2, make=False), VectorType("__nv_bfloat162", "__nv_bfloat16", 2, make=False))

#: Other names of vector types: <cuComplex.h>'s and <cufft.h>'s complex numbers are float2 and double2.
VECTOR_ALIASES: dict[str, str] = {"half2": "__half2", "nv_bfloat162": "__nv_bfloat162", "cuFloatComplex": "float2",
                                  "cuComplex": "float2", "cuDoubleComplex": "double2", "cufftComplex": "float2",
                                  "cufftDoubleComplex": "double2"}

#: Vector types gpgpu-opt defines in the output where CUDA has none, and only where it uses them
#: (rewriting/vector.py writes the definition): `half8`, 8 halves in one 16-byte access. Not CUDA's, so not in
#: VECTOR_TYPES (the parser's prelude and the nvcc check of the table).
DEFINED_VECTORS: tuple[VectorType, ...] = (VectorType("half8", "__half", 8),)

_SCALARS = {t.name: t for t in SCALAR_TYPES}
_VECTORS = {v.name: v for v in VECTOR_TYPES}
_BY_BASE_AND_LANES = {(v.base, v.n): v for v in VECTOR_TYPES}


def scalar_type(name: str) -> ScalarType:
    """The table's row of a scalar type by its own name (KeyError for any other name)."""
    return _SCALARS[name]


def alias_target(name: str) -> ScalarType | None:
    """The scalar type an alias (`uint32_t`, `half`) or a scalar's own name stands for."""
    for a in TYPE_ALIASES:
        if a.name == name:
            return scalar_type(a.target)
    return _SCALARS.get(name)


def scalar(spelling: str) -> ScalarType | None:
    """The scalar type however it is written: its name, an alias, a C spelling in any word order
    (`unsigned`, `long int`, `long unsigned int`). None for anything else (a vector, a struct, a pointer)."""
    words = " ".join(spelling.split())
    return alias_target(SPELLINGS.get(words, words)) or _integer_from_words(words.split())


_INTEGER_WORDS = frozenset({"signed", "unsigned", "char", "short", "int", "long"})


def _integer_from_words(words: list[str]) -> ScalarType | None:
    """C's integer type specifiers in any order (C11 6.7.2: `long unsigned`, `int long long`)."""
    if not words or not set(words) <= _INTEGER_WORDS or len(set(words) & {"signed", "unsigned"}) > 1:
        return None
    longs, sizes = words.count("long"), {"char", "short"} & set(words)
    if longs > 2 or (sizes and longs) or len(sizes) > 1 or any(words.count(w) > 1 for w in _INTEGER_WORDS - {"long"}):
        return None
    base = sizes.pop() if sizes else ("long long" if longs == 2 else "long" if longs else "int")
    return _SCALARS[f"unsigned {base}" if "unsigned" in words else base]


def vector(spelling: str) -> VectorType | None:
    """The vector type named `float4`, `half2`, `cuComplex`..., None for any other name."""
    return _VECTORS.get(VECTOR_ALIASES.get(spelling, spelling))


def component_names(n: int) -> tuple[str, ...]:
    """The components of an n-element vector: CUDA's `x`, `y`, `z`, `w`; `h0` ... `h7` for the defined 8-lane
    one (CUDA has no vector wider than 4)."""
    return tuple("xyzw"[:n]) if n <= 4 else tuple(f"h{k}" for k in range(n))


def defined_vector(name: str) -> VectorType | None:
    """The vector type gpgpu-opt defines by that name (`half8`), None for any other name."""
    return next((v for v in DEFINED_VECTORS if v.name == name), None)


def defined_vector_of(base: str, n: int) -> VectorType | None:
    """The defined vector of n components of the scalar type `base` however written (`__half`, 8: half8)."""
    t = scalar(base)
    return next((v for v in DEFINED_VECTORS if t is not None and (v.base, v.n) == (t.name, n)), None)


def vector_of(base: str, n: int) -> VectorType | None:
    """The vector type of n components of the scalar type `base` however written (`unsigned`, 4: uint4),
    None where CUDA has none (`__half4`, `bool2`)."""
    t = scalar(base)
    return _BY_BASE_AND_LANES.get((t.name, n)) if t is not None else None


def is_floating(spelling: str) -> bool:
    """A floating scalar (`float`, `__half`...) or a vector of them (`float4`, `half2`)."""
    t = scalar(spelling)
    if t is None and vector(spelling) is not None:
        t = scalar_type(vector(spelling).base)
    return t is not None and t.kind == "f"


def size_of(spelling: str) -> int | None:
    """nvcc's sizeof of a scalar or vector type however written, None for a name not in the table."""
    t = scalar(spelling) or vector(spelling)
    return t.size if t is not None else None


def align_of(spelling: str) -> int | None:
    """nvcc's alignof of a scalar or vector type however written, None for a name not in the table."""
    t = scalar(spelling) or vector(spelling)
    return t.align if t is not None else None


def type_sizes() -> dict[str, int]:
    """Bytes on the device of every name of the tables: scalars, aliases, vector types and their aliases."""
    sizes = {t.name: t.size for t in SCALAR_TYPES}
    sizes.update({a.name: scalar_type(a.target).size for a in TYPE_ALIASES})
    sizes.update({v.name: v.size for v in VECTOR_TYPES})
    sizes.update({alias: sizes[name] for alias, name in VECTOR_ALIASES.items()})
    return sizes


def element_size(base_type: str) -> int | None:
    """Bytes of one element of a type of the table (`__half`: 2, `double`: 8), None if it is not there."""
    return size_of(base_type)


def integer_aliases(kind: str, min_size: int = 1) -> frozenset[str]:
    """The aliases of integer types of a kind ('i' signed, 'u' unsigned, 'b' bool) and at least min_size
    bytes: `uint32_t`, `size_t`, `uint`..."""
    return frozenset(a.name for a in TYPE_ALIASES
                     if scalar_type(a.target).kind == kind and scalar_type(a.target).size >= min_size)
