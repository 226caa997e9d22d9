"""The C-building kit every rewriting shares: `Unsupported` (why a transformation is not made), small c_ast
constructors (`const`, `add`, `mul`, `conj`, the index builtins), printing a node back as CUDA (`text`), and
parsing the generated CUDA snippets that templates render (`parse_statements`, `parse_expr`, placeholders).
"""
from __future__ import annotations

import copy
import functools

from pycparser import c_ast, c_parser

from gpgpu_opt.ast_util import is_call_to, member_of
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.frontend.cuda_c import cuda_to_c, restore_cuda_storage


class Unsupported(Exception):
    """The access (or kernel) is outside what the pass can stage safely; the message says why."""


def builtin(name: str, axis: str) -> c_ast.StructRef:
    return c_ast.StructRef(c_ast.ID(name), ".", c_ast.ID(axis))


def is_builtin(n: c_ast.Node, name: str, axis: str) -> bool:
    return member_of(n) == (name, axis)


def const(value: int) -> c_ast.Constant:
    return c_ast.Constant("int", str(int(value)))


def add(a: c_ast.Node | None, b: c_ast.Node | None) -> c_ast.Node:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(b, c_ast.Constant) and b.value == "0":
        return a
    if isinstance(a, c_ast.Constant) and a.value == "0":
        return b
    return c_ast.BinaryOp("+", a, b)


def mul(a: c_ast.Node, k: int) -> c_ast.Node:
    if k == 1:
        return a
    if isinstance(a, c_ast.Constant) and a.value == "0":
        return a
    return c_ast.BinaryOp("*", a, const(k))


def conj(clauses: list[c_ast.Node]) -> c_ast.Node | None:
    out = None
    for c in clauses:
        out = c if out is None else c_ast.BinaryOp("&&", out, c)
    return out


def text(node: c_ast.Node) -> str:
    return CudaGenerator().visit(node)


# -- parsing generated snippets -------------------------------------------------------------------------
def parse_statements(source: str) -> list[c_ast.Node]:
    """Statements of a generated CUDA snippet, parsed as the body of a dummy function (without the CUDA
    prelude: snippets only use the builtin scalar types and the index builtins). New nodes each call (the
    callers insert and edit them), deep copies of the snippet's one parse: the rewritings render the same
    loader and guard snippets for each candidate block and each compile of a kernel."""
    return copy.deepcopy(list(_parsed_snippet(source)))


@functools.lru_cache(maxsize=1024)
def _parsed_snippet(source: str) -> tuple[c_ast.Node, ...]:
    """The parse `parse_statements` copies; nothing may change these nodes (a failure is not cached)."""
    c_text, _, _ = cuda_to_c("void __coalesce_snippet(void)\n{\n" + source + "\n}\n")
    try:
        func = c_parser.CParser().parse(_SNIPPET_PRELUDE + c_text, "<coalesce>").ext[-1]
    except c_parser.ParseError as err:
        raise Unsupported(f"internal: generated code does not parse ({err})") from None
    restore_cuda_storage(func)
    return tuple(func.body.block_items or [])


# Vector types name CUDA builtins; the parser only needs to know they are types.
_SNIPPET_PRELUDE = ("typedef unsigned long size_t;\ntypedef struct __vector2 float2;\n"
                    "typedef struct __vector4 float4;\ntypedef struct __half16 __half;\n"
                    "typedef struct __bfloat16 __nv_bfloat16;\n")


def parse_expr(source: str) -> c_ast.Node:
    stmt = parse_statements(f"__e({source});")[0]
    return stmt.args.exprs[0]


def is_placeholder(node, name: str) -> bool:
    """Whether `node` is the call `name(...)` that a snippet template leaves where statements go."""
    return is_call_to(node, name)
