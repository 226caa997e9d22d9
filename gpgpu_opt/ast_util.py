"""Small helpers for working with pycparser's c_ast."""
from __future__ import annotations

import copy
from typing import Callable

from pycparser import c_ast, c_parser

#: Values a syntax tree holds that are never changed in place, so that a copy may share them: C spellings
#: and constants, and source positions (a node gets a new Coord, no Coord is edited).
_SHARED_IN_COPIES = (str, int, float, bool, type(None), c_parser.Coord)


def _deepcopy_node(node: c_ast.Node, memo: dict) -> c_ast.Node:
    """`copy.deepcopy` of a syntax tree, about 10x faster than the generic one (which goes through
    `__reduce_ex__` for every node): the same result, objects shared within the tree (a node, a list of
    qualifiers that several declarations hold) still shared once in the copy, through the same `memo`."""
    copied = object.__new__(type(node))
    memo[id(node)] = copied
    for slot in type(node).__slots__:
        if slot == "__weakref__" or not hasattr(node, slot):
            continue
        value = getattr(node, slot)
        if not isinstance(value, _SHARED_IN_COPIES):
            value = memo[id(value)] if id(value) in memo else _deepcopy_value(value, memo)
        setattr(copied, slot, value)
    return copied


def _deepcopy_value(value, memo: dict):
    if isinstance(value, c_ast.Node):
        return _deepcopy_node(value, memo)
    if isinstance(value, list):
        copied = memo[id(value)] = []
        copied.extend(item if isinstance(item, _SHARED_IN_COPIES) else
                      memo[id(item)] if id(item) in memo else _deepcopy_value(item, memo) for item in value)
        return copied
    return copy.deepcopy(value, memo)


c_ast.Node.__deepcopy__ = _deepcopy_node


def transform(node: c_ast.Node, fn: Callable[[c_ast.Node], c_ast.Node | None], *,
              skip_member_names: bool = False) -> c_ast.Node:
    """Rebuild `node` bottom-up: every child is transformed first, then `fn` may return a replacement
    (or None to keep the node). Works in place on the children lists and attributes. With
    `skip_member_names`, the field of `v.x` is not visited (it names a member, not a variable)."""
    if skip_member_names and isinstance(node, c_ast.StructRef):
        node.name = transform(node.name, fn, skip_member_names=True)
        return node
    _rebuild_children(node, lambda child: transform(child, fn, skip_member_names=skip_member_names))
    replacement = fn(node)
    return node if replacement is None else replacement


def transform_top_down(node: c_ast.Node, fn: Callable[[c_ast.Node], c_ast.Node | None]) -> c_ast.Node:
    """Rebuild `node` top-down: where `fn(n)` returns a node, that node replaces n and n's children are not
    visited (fn may visit them itself); else n's children are. Works in place on the children."""
    replacement = fn(node)
    if replacement is not None:
        return replacement
    _rebuild_children(node, lambda child: transform_top_down(child, fn))
    return node


def _rebuild_children(node: c_ast.Node, rebuild: Callable[[c_ast.Node], c_ast.Node]) -> None:
    for attr in node.__slots__:
        if attr in ("coord", "__weakref__"):
            continue
        value = getattr(node, attr, None)
        if isinstance(value, c_ast.Node):
            setattr(node, attr, rebuild(value))
        elif isinstance(value, list) and value and isinstance(value[0], c_ast.Node):
            setattr(node, attr, [rebuild(v) for v in value])


def substitute(node: c_ast.Node, mapping: dict[str, c_ast.Node]) -> c_ast.Node:
    """A deep copy of `node` with every ID in `mapping` replaced by (a copy of) its expression."""
    def replace(n: c_ast.Node):
        if isinstance(n, c_ast.ID) and n.name in mapping:
            return copy.deepcopy(mapping[n.name])
        return None

    return transform(copy.deepcopy(node), replace, skip_member_names=True)


def type_names(node: c_ast.Node) -> set[str]:
    """The words of every type a subtree names (`float`, `half8`, `unsigned`, `int`)."""
    return {name for n in walk(node) if isinstance(n, c_ast.IdentifierType) for name in n.names}


def ids_in(node: c_ast.Node) -> set[str]:
    """Names of the variables an expression reads (member names excluded)."""
    found: set[str] = set()

    def walk(n):
        if isinstance(n, c_ast.StructRef):
            walk(n.name)
            return
        if isinstance(n, c_ast.ID):
            found.add(n.name)
        for _, child in n.children():
            walk(child)

    walk(node)
    return found


def walk(node: c_ast.Node):
    """Pre-order iteration over a subtree."""
    yield node
    for _, child in node.children():
        yield from walk(child)


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, or `base2`, `base3`... whichever is not taken yet; the name is then taken."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


def replace_child(parent: c_ast.Node, name: str, new: c_ast.Node) -> None:
    """Set the child `name` (as Node.children() names it: 'left', 'exprs[0]') of `parent`."""
    if "[" in name:
        field, position = name[:-1].split("[")
        getattr(parent, field)[int(position)] = new
    else:
        setattr(parent, name, new)


# ---------------------------------------------------------------- recognizers: "is this a call to X", "threadIdx.x"

def call_name(node: c_ast.Node) -> str | None:
    """The function a direct call `f(...)` calls; None for anything else (a call through a pointer too)."""
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
        return node.name.name
    return None


def is_call_to(node: c_ast.Node, *names: str) -> bool:
    """Whether `node` is a direct call to one of `names`."""
    return call_name(node) in names


def call_args(node: c_ast.FuncCall) -> list[c_ast.Node]:
    """The argument expressions of a call (none for `f()`)."""
    return list(node.args.exprs) if node.args is not None else []


def member_of(node: c_ast.Node) -> tuple[str, str] | None:
    """(variable, member) of `v.m` on a plain variable (`threadIdx.x`: ('threadIdx', 'x')), else None."""
    if isinstance(node, c_ast.StructRef) and node.type == "." and isinstance(node.name, c_ast.ID) \
            and isinstance(node.field, c_ast.ID):
        return node.name.name, node.field.name
    return None


def is_member_of(node: c_ast.Node, *variables: str) -> bool:
    """Whether `node` is a member of one of `variables`: `is_member_of(n, 'threadIdx', 'blockIdx')`."""
    member = member_of(node)
    return member is not None and member[0] in variables
def constant_value(node) -> int | None:
    """The value of an integer constant expression of literals (`64 * 34`, `(16 + 1)`), else None."""
    if isinstance(node, c_ast.Constant) and node.type in ("int", "unsigned int", "long int", "unsigned long int",
                                                          "long long int", "unsigned long long int"):
        try:
            return int(node.value.rstrip("uUlL"), 0)
        except ValueError:
            return None
    if isinstance(node, c_ast.BinaryOp):
        a, b = constant_value(node.left), constant_value(node.right)
        if a is None or b is None:
            return None
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: int(a / b) if b else None, "%": lambda: a % b if b > 0 and a >= 0 else None,
               "<<": lambda: a << b if 0 <= b < 63 else None, ">>": lambda: a >> b if 0 <= b < 63 else None}
        return ops[node.op]() if node.op in ops else None
    if isinstance(node, c_ast.UnaryOp) and node.op == "-":
        v = constant_value(node.expr)
        return -v if v is not None else None
    if isinstance(node, c_ast.Cast):
        return constant_value(node.expr)
    return None


