"""The type of an expression where it is certain, for lowering `auto x = init;` to C.

Only arithmetic scalar types, and only where C++ leaves no doubt: a literal, a cast, a scalar parameter
or local (the declaration the name refers to there: declared before it, in a block around it; a name no
such declaration has may be a global's), an element of a pointer parameter or local, CUDA's index
variables (`threadIdx.x`... are unsigned int), and +, -, *, /, %, &, |, ^, <<, >>, unary -, +, ~ and ?: over
those, with C's usual arithmetic conversions (LP64, as nvcc's
host). Anything else (a call, a comparison, which is `bool` in C++, a pointer) is not certain: None.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import tree_sitter

from gpgpu_opt import cuda_types

Node = tree_sitter.Node

#: Integer types by rank, each with its width in bits and signedness (LP64), from the CUDA type table;
#: `signed char` is a type of its own in C++.
_INTEGERS = {t.name: (t.rank, 8 * t.size, t.kind == "i") for t in cuda_types.SCALAR_TYPES if t.kind in "iu"}
_INTEGERS["signed char"] = _INTEGERS["char"]
_FLOATING = ("float", "double")
INTEGER_TYPES = frozenset(_INTEGERS)
_INDEX_VARIABLES = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
_ARITHMETIC = {"+", "-", "*", "/", "%", "&", "|", "^"}


def canonical(spelling: str) -> str | None:
    """The canonical name of an arithmetic type written `spelling` (`const` dropped), or None."""
    words = " ".join(w for w in spelling.split() if w not in ("const", "volatile", "register"))
    if words in _INTEGERS or words in _FLOATING:
        return words
    t = cuda_types.scalar(words)        # `unsigned`, `long int`, `size_t`, `uint32_t`...
    return t.name if t is not None and (t.name in _INTEGERS or t.name in _FLOATING) else None


def usual_conversion(a: str, b: str) -> str:
    """C's usual arithmetic conversions of two canonical types."""
    for floating in ("double", "float"):
        if floating in (a, b):
            return floating
    a, b = promoted(a), promoted(b)
    if a == b:
        return a
    (ra, _, sa), (rb, _, sb) = _INTEGERS[a], _INTEGERS[b]
    if sa == sb:
        return a if ra > rb else b
    signed, unsigned = (a, b) if sa else (b, a)
    if _INTEGERS[unsigned][0] >= _INTEGERS[signed][0]:
        return unsigned
    if _INTEGERS[signed][1] > _INTEGERS[unsigned][1]:
        return signed
    return "unsigned " + signed


def promoted(t: str) -> str:
    return "int" if t in _INTEGERS and _INTEGERS[t][0] < 3 else t


def literal_type(text: str) -> str | None:
    """The type of a number literal, or None where it is not one of the simple cases."""
    text = text.replace("'", "").lower()
    if re.fullmatch(r"(\d+\.\d*|\.\d+|\d+)(e[+-]?\d+)?f", text) and not text.startswith("0x"):
        return "float"
    if re.fullmatch(r"(\d+\.\d*|\.\d+|\d+e[+-]?\d+|\d+\.\d*e[+-]?\d+|\.\d+e[+-]?\d+)", text):
        return "double"
    m = re.fullmatch(r"(0x[0-9a-f]+|0[0-7]*|[1-9]\d*)(u|ul|lu|l|ll|ull|llu)?", text)
    if m is None:
        return None
    value = int(m.group(1), 0) if not re.fullmatch(r"0[0-7]+", m.group(1)) else int(m.group(1), 8)
    suffix = m.group(2) or ""
    if suffix == "" and value < 2 ** 31:
        return "int"
    if suffix == "u" and value < 2 ** 32:
        return "unsigned int"
    if suffix in ("l", "ll") and value < 2 ** 63:
        return "long" if suffix == "l" else "long long"
    if suffix in ("ul", "lu", "ull", "llu") and value < 2 ** 64:
        return "unsigned long" if suffix in ("ul", "lu") else "unsigned long long"
    return None


@dataclass(frozen=True)
class _Declaration:
    start: int                 # where the name is declared (a use before it names something else)
    scope: tuple[int, int]     # the block (or for statement, or function) it is visible in
    type: str | None
    pointer: bool


class ExpressionTypes:
    """What the function declares, where each name is visible, and the types of expressions over it."""

    def __init__(self, text_of: Callable[[Node], str]):
        self.text_of = text_of
        self.declarations: dict[str, list[_Declaration]] = {}

    def declare(self, name: str, type_: str | None, at: Node, pointer: bool = False) -> None:
        """`name` declared by the node `at` (its scope: the nearest enclosing block, for statement or
        function)."""
        scope = at.parent
        while scope is not None and scope.type not in ("compound_statement", "for_statement", "function_definition"):
            scope = scope.parent
        span = (scope.start_byte, scope.end_byte) if scope is not None else (0, 1 << 62)
        self.declarations.setdefault(name, []).append(_Declaration(at.start_byte, span, type_, pointer))

    def _visible(self, name: Node) -> _Declaration | None:
        """The declaration `name` (an identifier) refers to: the innermost visible one declared before it;
        None where none is (a global, a macro's name: not certain)."""
        at = name.start_byte
        visible = [d for d in self.declarations.get(self.text_of(name), [])
                   if d.start < at and d.scope[0] <= at < d.scope[1]]
        return max(visible, key=lambda d: (d.scope[0], d.start)) if visible else None

    def declare_function(self, root: Node) -> None:
        """Every parameter and declared local of the function (all of them, before any `auto`)."""
        stack = [root]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if node.type in ("parameter_declaration", "declaration"):
                self._declare_from(node)

    def _declare_from(self, node: Node) -> None:
        type_node = node.child_by_field_name("type")
        if type_node is None or type_node.type == "placeholder_type_specifier":
            return
        base = canonical(self.text_of(type_node))
        for declarator in node.children_by_field_name("declarator"):
            if declarator.type == "init_declarator":
                declarator = declarator.child_by_field_name("declarator")
            depth = 0
            while declarator is not None and declarator.type == "pointer_declarator":
                depth += 1
                declarator = declarator.child_by_field_name("declarator")
            if declarator is None:
                continue
            if declarator.type == "identifier":
                name = self.text_of(declarator)
                if depth == 0:
                    self.declare(name, base, node)
                else:
                    self.declare(name, base if depth == 1 else None, node, pointer=True)
            else:  # an array, a function pointer...: its name's type is not a scalar's
                for n in _identifiers(declarator)[:1]:
                    self.declare(self.text_of(n), None, node)

    def of(self, node: Node) -> str | None:
        """The canonical type of the expression `node`, or None when it is not certain."""
        kind = node.type
        if kind == "number_literal":
            return literal_type(self.text_of(node))
        if kind == "char_literal":
            return "char"
        if kind == "identifier":
            found = self._visible(node)
            return found.type if found is not None and not found.pointer else None
        if kind == "parenthesized_expression":
            inner = [c for c in node.named_children if c.type != "comment"]
            return self.of(inner[0]) if len(inner) == 1 else None
        if kind == "field_expression":
            return self._index_variable(node)
        if kind == "subscript_expression":
            array = node.child_by_field_name("argument")
            found = self._visible(array) if array is not None and array.type == "identifier" else None
            return found.type if found is not None and found.pointer else None
        if kind == "cast_expression":
            type_node = node.child_by_field_name("type")
            return canonical(self.text_of(type_node)) if type_node is not None else None
        if kind == "call_expression":
            return self._cast_call(node)
        if kind == "unary_expression":
            return self._unary(node)
        if kind == "binary_expression":
            return self._binary(node)
        if kind == "conditional_expression":
            a, b = self.of(node.child_by_field_name("consequence")), self.of(node.child_by_field_name("alternative"))
            return usual_conversion(a, b) if a and b else None
        return None

    def _index_variable(self, node: Node) -> str | None:
        base, field = node.child_by_field_name("argument"), node.child_by_field_name("field")
        if base is not None and base.type == "identifier" and self.text_of(base) in _INDEX_VARIABLES \
                and field is not None and self.text_of(field) in ("x", "y", "z") \
                and self.text_of(node.child_by_field_name("operator")) == ".":
            return "unsigned int"
        return None

    def _cast_call(self, call: Node) -> str | None:
        """`static_cast<T>(e)` and friends, and `float(e)`: T."""
        function = call.child_by_field_name("function")
        if function is None:
            return None
        if function.type in ("primitive_type", "sized_type_specifier"):
            return canonical(self.text_of(function))
        if function.type == "template_function":
            name = function.child_by_field_name("name")
            args = function.child_by_field_name("arguments")
            if name is not None and self.text_of(name) in ("static_cast", "const_cast") and args is not None \
                    and len(args.named_children) == 1:
                return canonical(self.text_of(args.named_children[0]))
        return None

    def _unary(self, node: Node) -> str | None:
        operator = self.text_of(node.child_by_field_name("operator"))
        operand = self.of(node.child_by_field_name("argument"))
        if operand is None or operator not in ("-", "+", "~"):
            return None
        if operator == "~" and operand in _FLOATING:
            return None
        return promoted(operand)

    def _binary(self, node: Node) -> str | None:
        operator = self.text_of(node.child_by_field_name("operator"))
        left, right = self.of(node.child_by_field_name("left")), self.of(node.child_by_field_name("right"))
        if left is None or right is None:
            return None
        integral = left in _INTEGERS and right in _INTEGERS
        if operator in ("<<", ">>"):
            return promoted(left) if integral else None
        if operator in _ARITHMETIC:
            if operator in ("%", "&", "|", "^") and not integral:
                return None
            return usual_conversion(left, right)
        return None  # comparisons and logical operators are bool in C++


def _identifiers(node: Node) -> list[Node]:
    found, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            found.append(n)
        stack.extend(reversed(n.children))
    return found
