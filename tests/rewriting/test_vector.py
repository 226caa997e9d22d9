"""rewriting/vector.py: which CUDA vector holds N elements (from the one type table), its constructor, and
snippets that name vector types."""
import shutil
import subprocess

import pytest
from pycparser import c_ast

from gpgpu_opt.rewriting.cbuild import text
from gpgpu_opt.rewriting.vector import constructor, definition, lane_field, parse_vector_statements, vector_type


@pytest.mark.parametrize("base, n, vector", [
    ("float", 4, "float4"), ("float", 2, "float2"), ("double", 2, "double2"), ("int", 4, "int4"),
    ("unsigned int", 2, "uint2"), ("__half", 2, "__half2"),
    ("double", 4, None),      # 32 bytes: wider than one access
    ("__half", 4, None),      # no such type
    ("__half", 8, "half8"),   # 16 bytes: a vector the output defines (definition)
    ("float", 8, None),
    ("float", 3, None),       # float3 is not one access
    ("char", 4, None),        # not a type the passes widen
])
def test_vector_type(base, n, vector):
    assert vector_type(base, n) == vector


def test_constructor_names():
    assert constructor("float4") == "make_float4" and constructor("__half2") == "__halves2half2"
    assert constructor("half8") == "make_half8"


def test_lanes_of_eight_are_named_h0_to_h7():
    assert [lane_field(4, c) for c in range(4)] == ["x", "y", "z", "w"]
    assert lane_field(8, 0) == "h0" and lane_field(8, 7) == "h7"


def test_only_the_vectors_cuda_lacks_are_defined():
    assert definition("float4") is None and definition("__half2") is None
    assert "struct __align__(16) half8 {" in definition("half8")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_half8_is_one_16_byte_access_as_nvcc_builds_it(tmp_path):
    """sizeof and alignof 16 (one load or store moves it), make_half8 keeps each lane, and the definition
    may be seen twice (a file included where another defines it)."""
    source = tmp_path / "half8.cu"
    source.write_text("#include <cuda_fp16.h>\n" + definition("half8") * 2 + """
static_assert(sizeof(half8) == 16 && alignof(half8) == 16, "half8 is one 16-byte access");
__global__ void copy(const half8 *a, half8 *b, __half s) {
    half8 v = a[threadIdx.x];
    b[threadIdx.x] = make_half8(v.h0, v.h1, v.h2, v.h3, v.h4, v.h5, v.h6, __hmul(v.h7, s));
}
""")
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "half8.ptx"), str(source)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ptx = (tmp_path / "half8.ptx").read_text()
    assert "ld.global.v4.u32" in ptx or "ld.global.nc.v4.u32" in ptx
    assert "st.global.v4.u32" in ptx


def test_snippets_that_name_vector_types_parse_without_their_declarations():
    stmts = parse_vector_statements("float4 v = ((const float4 *) A)[i / 4];\n__half2 h;", {"float4", "__half2"})
    assert len(stmts) == 2 and all(isinstance(s, c_ast.Decl) for s in stmts)
    assert text(stmts[0]).startswith("float4 v = ((const float4 *) A)[i / 4]")
