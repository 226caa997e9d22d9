"""rewriting/vector.py: which CUDA vector holds N elements (from the one type table), its constructor, and
snippets that name vector types."""
import pytest
from pycparser import c_ast

from gpgpu_opt.rewriting.cbuild import text
from gpgpu_opt.rewriting.vector import constructor, parse_vector_statements, vector_type


@pytest.mark.parametrize("base, n, vector", [
    ("float", 4, "float4"), ("float", 2, "float2"), ("double", 2, "double2"), ("int", 4, "int4"),
    ("unsigned int", 2, "uint2"), ("__half", 2, "__half2"),
    ("double", 4, None),      # 32 bytes: wider than one access
    ("__half", 4, None),      # no such type
    ("float", 3, None),       # float3 is not one access
    ("char", 4, None),        # not a type the passes widen
])
def test_vector_type(base, n, vector):
    assert vector_type(base, n) == vector


def test_constructor_names():
    assert constructor("float4") == "make_float4" and constructor("__half2") == "__halves2half2"


def test_snippets_that_name_vector_types_parse_without_their_declarations():
    stmts = parse_vector_statements("float4 v = ((const float4 *) A)[i / 4];\n__half2 h;", {"float4", "__half2"})
    assert len(stmts) == 2 and all(isinstance(s, c_ast.Decl) for s in stmts)
    assert text(stmts[0]).startswith("float4 v = ((const float4 *) A)[i / 4]")
