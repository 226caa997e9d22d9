"""ast_util's recognizers: "is this a call to X" and "is this threadIdx.x", for the analyses and builders."""
from __future__ import annotations

from pycparser import c_parser

from gpgpu_opt.ast_util import call_args, call_name, is_call_to, is_member_of, member_of


def _expr(text: str):
    """The expression statement of `void f() { text; }` (names need no declarations in an expression)."""
    return c_parser.CParser().parse(f"void f() {{ {text}; }}").ext[0].body.block_items[0]


def test_call_name_of_direct_calls_only():
    assert call_name(_expr("__syncthreads()")) == "__syncthreads"
    assert call_name(_expr("(*fp)(x)")) is None          # through a function pointer
    assert call_name(_expr("a[i]")) is None
    assert call_name(_expr("s.f(x)")) is None


def test_is_call_to_any_of_names():
    call = _expr("atomicAdd(&c[i], v)")
    assert is_call_to(call, "atomicAdd") and is_call_to(call, "atomicMax", "atomicAdd")
    assert not is_call_to(call, "atomicSub") and not is_call_to(_expr("atomicAdd"), "atomicAdd")


def test_call_args():
    assert len(call_args(_expr("fmaf(a, b, c)"))) == 3
    assert call_args(_expr("__syncthreads()")) == []


def test_members_of_plain_variables():
    assert member_of(_expr("threadIdx.x")) == ("threadIdx", "x")
    assert member_of(_expr("p->x")) is None              # through a pointer: not a builtin's member
    assert member_of(_expr("a[i].x")) is None
    assert member_of(_expr("x")) is None
    assert is_member_of(_expr("blockDim.y"), "threadIdx", "blockDim")
    assert not is_member_of(_expr("gridDim.y"), "threadIdx", "blockDim")
