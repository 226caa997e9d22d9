"""The one CUDA type table (gpgpu_opt.cuda_types) against nvcc's sizeof/alignof, and every former user of an
element-size table agreeing with it."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from pycparser import c_parser

from gpgpu_opt import cuda_types
from gpgpu_opt.analysis.accesses import element_bytes
from gpgpu_opt.analysis.aggregates import is_element_type
from gpgpu_opt.emulator.errors import UnsupportedConstruct
from gpgpu_opt.emulator.values import type_from_names
from gpgpu_opt.frontend.struct_layouts import StructLayout
from gpgpu_opt.frontend import cxx_types
from gpgpu_opt.frontend.cuda_c import PRELUDE
from gpgpu_opt.harness import _fill
from gpgpu_opt.host_expr import HostScope
from gpgpu_opt.model.syntax import vector_view
from gpgpu_opt.rewriting.vector import vector_type
from gpgpu_opt.targets import TARGETS, Target
from gpgpu_opt.check.inputs import _dtype, _words

_HEADERS = ("cstdint", "cstddef", "cuda_fp16.h", "cuda_bf16.h", "cuComplex.h", "sys/types.h", "ctime")
#: Names of the table nvcc's C++ does not declare: C's `_Bool`, and `uchar` (glibc declares `ushort`, `uint`,
#: `ulong`, not it). The prelude declares them so that a kernel using them parses; nvcc rejects it.
_NOT_IN_NVCC = frozenset({"_Bool", "uchar"})
#: cuFFT is a library of its own, not always installed beside nvcc: its names are checked where it is.
_CUFFT = "__has_include(<cufft.h>)"


def _all_names() -> list[str]:
    return ([t.name for t in cuda_types.SCALAR_TYPES] + [a.name for a in cuda_types.TYPE_ALIASES]
            + list(cuda_types.SPELLINGS) + [v.name for v in cuda_types.VECTOR_TYPES]
            + list(cuda_types.VECTOR_ALIASES))


def _static_asserts() -> str:
    """A .cu file that compiles only if every size and alignment in the table is nvcc's."""
    lines = [f"#include <{h}>" for h in _HEADERS] + [f"#if {_CUFFT}", "#include <cufft.h>", "#endif"]
    for k, name in enumerate(n for n in _all_names() if n not in _NOT_IN_NVCC):
        size, align = cuda_types.size_of(name), cuda_types.align_of(name)
        lines += [f"#if {_CUFFT}"] if name.startswith("cufft") else []
        lines.append(f"typedef {name} t{k};")
        lines.append(f'static_assert(sizeof(t{k}) == {size}, "sizeof({name}) is not {size}");')
        lines.append(f'static_assert(alignof(t{k}) == {align}, "alignof({name}) is not {align}");')
        lines += ["#endif"] if name.startswith("cufft") else []
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_table_is_nvccs_sizeof_and_alignof(tmp_path):
    source = tmp_path / "sizes.cu"
    source.write_text(_static_asserts())
    # double4, long4... are deprecated (not wrong) in CUDA 13: their warnings are not failures
    run = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Wno-deprecated-declarations", "-o",
                          str(tmp_path / "sizes.cubin"), str(source)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]


def test_static_asserts_cover_every_type():
    text = _static_asserts()
    for name in ("__half", "__nv_bfloat16", "double4", "half2", "cuDoubleComplex", "uint3", "size_t", "unsigned"):
        assert f"typedef {name} " in text
    assert "sizeof(t" in text and "alignof(t" in text


@pytest.mark.parametrize("spelling, name", [
    ("unsigned", "unsigned int"), ("long unsigned int", "unsigned long"), ("int long long", "long long"),
    ("signed char", "char"), ("uint32_t", "unsigned int"), ("half", "__half"), ("size_t", "unsigned long"),
])
def test_spellings_in_any_order(spelling, name):
    assert cuda_types.scalar(spelling).name == name


@pytest.mark.parametrize("spelling", ["long double", "char short", "unsigned signed", "long long long", "float4",
                                      "struct_t", "int int"])
def test_not_scalars(spelling):
    assert cuda_types.scalar(spelling) is None


def test_vectors():
    assert cuda_types.vector_of("unsigned", 4).name == "uint4"
    assert cuda_types.vector_of("half", 2).name == "__half2"
    assert cuda_types.vector_of("__half", 4) is None
    assert (cuda_types.size_of("double4"), cuda_types.align_of("double4")) == (32, 16)
    assert (cuda_types.size_of("float3"), cuda_types.align_of("float3")) == (12, 4)
    assert cuda_types.size_of("cuDoubleComplex") == 16


def test_numpy_dtypes_have_the_size():
    for t in cuda_types.SCALAR_TYPES:
        if t.dtype != "bfloat16":   # numpy has none: the emulator holds it in float32
            assert np.dtype(t.dtype).itemsize == t.size, t.name


# ---------------------------------------------------------------- every former user agrees with the table

def test_accesses_element_bytes():
    for name in _all_names():
        assert element_bytes(name) == cuda_types.size_of(name), name
    assert element_bytes("long int") == 8       # was 4: the old table did not know the spelling
    assert element_bytes("struct_t") == 4       # a word for what the table does not know


def test_emulator_types():
    for name in _all_names():
        t = type_from_names(name.split())
        assert t.size == cuda_types.size_of(name), name
        assert getattr(t, "align", t.size) == cuda_types.align_of(name), name
    assert type_from_names(["long", "unsigned", "int"]).name == "unsigned long"


def test_verify_fills_arrays_of_the_tables_dtype():
    for t in cuda_types.SCALAR_TYPES:
        expected = np.float32 if t.dtype == "bfloat16" else np.dtype(t.dtype).type
        assert _dtype(t.name) == expected and _words(t.name) == 1, t.name
    assert _dtype("unsigned") == np.uint32 and _dtype("long int") == np.int64
    assert (_dtype("half2"), _words("half2")) == (np.float16, 2)


def test_cxx_types_ranks_and_widths():
    for t in cuda_types.SCALAR_TYPES:
        if t.kind in "iu":
            assert cxx_types._INTEGERS[t.name] == (t.rank, 8 * t.size, t.kind == "i")
    assert cxx_types.canonical("long unsigned int") == "unsigned long"
    assert cxx_types.canonical("signed char") == "signed char"
    assert cxx_types.canonical("__half") is None


def test_host_sizeof():
    scope = HostScope()
    assert scope.evaluate("sizeof(long int)") == 8      # was 4: the old table read only its last word
    assert scope.evaluate("sizeof(unsigned long long)") == 8
    assert scope.evaluate("sizeof(long unsigned)") == 8
    assert scope.evaluate("sizeof(uint32_t) + sizeof(size_t)") == 12


def test_harness_fills_by_the_table():
    assert _fill("float") == (4, "fill_real") and _fill("unsigned") == (4, "fill_int")
    assert _fill("uint64_t") == (8, "fill_int")
    assert _fill("__half") == (2, "fill_real") and _fill("bool") is None and _fill("float4") is None


def test_model_vector_casts_and_floating():
    ref = c_parser.CParser().parse("typedef struct {short x, y, z, w;} short4; "
                                   "void f(short *a) { ((short4 *)a)[0]; }").ext[-1].body.block_items[0]
    assert vector_view(ref)[1] == 8
    assert all(map(cuda_types.is_floating, ("__half", "half2", "double", "float4", "cuComplex")))
    assert not cuda_types.is_floating("int4") and not cuda_types.is_floating("int")


def test_vector_types_and_struct_fields():
    assert vector_type("unsigned", 4) == "uint4" and vector_type("double", 4) is None
    assert vector_type("char", 4) is None           # not a type the passes widen
    assert StructLayout("p", "double", ("x", "y")).field_bytes == 8


def test_the_analyses_element_types_are_the_types_the_emulator_holds():
    """analysis.aggregates reads the table itself (no import of the emulator): the two agree on every name."""
    def held(spelling: str) -> bool:
        try:
            return type_from_names(spelling.split()) is not None
        except UnsupportedConstruct:
            return False
    spellings = set(cuda_types.type_sizes()) | {"void", "dim3", "Particle", "const float", "volatile int",
                                                "long unsigned int", "int long long", "float const", "const"}
    assert {s for s in spellings if is_element_type(s) != held(s)} == set()
    assert is_element_type("half2") and not is_element_type("void") and not is_element_type("struct")


def test_prelude_declares_every_vector():
    for v in cuda_types.VECTOR_TYPES:
        assert f"}} {v.name};" in PRELUDE


# ---------------------------------------------------------------- targets

def test_targets_only_by_keyword():
    with pytest.raises(TypeError):
        Target("x", "y", "sm_90")      # noqa: a positional row is refused
    sm90 = TARGETS["sm_90"]
    assert (sm90.warp_size, sm90.sm_count, sm90.shared_per_sm, sm90.cuda_arch) == (32, 132, 228 * 1024, 900)
