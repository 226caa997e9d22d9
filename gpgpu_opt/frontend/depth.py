"""How deeply a function nests, against what gpgpu-opt reads.

The parser, the printer, the analyses and the emulator walk syntax trees by recursion, a few Python frames
per level. nvcc reads any depth (150 nested parentheses, 10 000, a sum of 3000 terms), and so must the
command: a function nested deeper than these bounds passes through as written, with a note, rather than
exhausting the interpreter's stack.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.frontend import scanner

#: Parentheses, brackets and braces open at once in a function's text: the parser spends about eight
#: frames on each, and gave up at about 110.
MAX_NESTING = 64
#: Operators in one statement: a chain of them (`a + b + c ...`) is as deep as it is long, and lowering C++
#: spends a frame on each level. The syntax tree's own bound (below) then decides.
MAX_OPERATORS = 400
#: Levels of the syntax tree (a sum of N terms is N deep): the printer spends four frames on each, and the
#: passes add a dozen levels of their own (loops, guards) to what they are given.
MAX_TREE_DEPTH = 100

_OPENING, _CLOSING = frozenset("([{"), frozenset(")]}")
_STATEMENT_ENDS = frozenset(";{}")


def nesting_and_operators(text: str) -> tuple[int, int]:
    """The most brackets of any kind open at one point of `text`, and the most operators in one statement
    (comments and strings do not count)."""
    deepest = depth = most = operators = 0
    for token in scanner.tokenize(text):
        if token.text in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif token.text in _CLOSING:
            depth -= 1
        if token.text in _STATEMENT_ENDS:
            operators = 0
        elif token.kind == "punct" and token.text not in _OPENING and token.text not in _CLOSING:
            operators += 1
            most = max(most, operators)
    return deepest, most


def tree_depth(node: c_ast.Node) -> int:
    """The levels of the syntax tree under `node`, counted without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for _, child in current.children())
    return deepest


def too_deep_to_read(text: str) -> str | None:
    """Why a function's text is not read (None: it may be)."""
    depth, operators = nesting_and_operators(text)
    if depth > MAX_NESTING:
        return f"it nests {depth} brackets deep, more than the {MAX_NESTING} gpgpu-opt reads"
    if operators > MAX_OPERATORS:
        return f"a statement has {operators} operators, more than the {MAX_OPERATORS} gpgpu-opt reads"
    return None


def too_deep_to_analyse(func: c_ast.Node) -> str | None:
    """Why a parsed function is not analysed (None: it may be)."""
    depth = tree_depth(func)
    if depth > MAX_TREE_DEPTH:
        return f"its syntax tree is {depth} levels deep (a long expression?), more than the {MAX_TREE_DEPTH} " \
               f"gpgpu-opt reads"
    return None
