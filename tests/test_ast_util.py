"""ast_util's recognizers ("is this a call to X", "is this threadIdx.x") and rewriters, for the analyses and
builders."""
from __future__ import annotations

from pycparser import c_ast, c_parser

from gpgpu_opt.ast_util import call_args, call_name, is_call_to, is_member_of, member_of, transform_top_down
from gpgpu_opt.codegen import CudaGenerator


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


def _nodes(node):
    yield node
    for _, child in node.children():
        yield from _nodes(child)


def test_a_deep_copy_prints_the_same_and_shares_no_node_with_the_original():
    import copy

    from pycparser import c_generator

    tree = c_parser.CParser().parse("void f(const float *a, int n) { int i, j; for (i = 0; i < n; i++) "
                                    "{ j = i * 2; if (j < n) { float v = a[j]; (void)v; } } }")
    copied = copy.deepcopy(tree)
    printer = c_generator.CGenerator()
    assert printer.visit(copied) == printer.visit(tree)
    originals = {id(n) for n in _nodes(tree)}
    assert not originals & {id(n) for n in _nodes(copied)}
    # `int i, j;`: the parser gives both declarations one qualifier list; the copies share their own copy
    first, second = copied.ext[0].body.block_items[0:2]
    was_first, was_second = tree.ext[0].body.block_items[0:2]
    assert (first.quals is second.quals) == (was_first.quals is was_second.quals)
    assert first.quals is not was_first.quals


def test_a_node_held_twice_is_copied_once():
    import copy

    from pycparser import c_ast

    shared = c_ast.ID("x")
    pair = c_ast.BinaryOp("+", shared, shared)
    copied = copy.deepcopy(pair)
    assert copied.left is copied.right and copied.left is not shared


def test_transform_top_down_replaces_the_outermost_match_and_leaves_its_inside_to_fn():
    expr = _expr("a[b[i]][j] + b[k]")
    seen = []

    def outer(node):
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ArrayRef):
            seen.append(CudaGenerator().visit(node))
            return c_ast.ID("whole")
        if isinstance(node, c_ast.ArrayRef):
            return c_ast.ID("single")
        return None

    assert CudaGenerator().visit(transform_top_down(expr, outer)) == "whole + single"
    assert seen == ["a[b[i]][j]"]       # b[i] inside it was not visited
