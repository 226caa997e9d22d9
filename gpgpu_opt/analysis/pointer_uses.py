"""How a use of a pointer variable in the host code may change what the variable holds, for the alias proof
(buffer_variables.py for a function's own variables, file_scope_buffers.py for file-scope ones).

Each verdict is a whitelist: 'read' (the use yields the value and leaves the variable as it is),
'allocated' (the first argument of an allocator, `&v`, or `v = alloc(n);` with a user allocation helper),
'swapped with NAME' (half of `T *t = a; a = b; b = t;`), or why the use may change the variable.
"""
from __future__ import annotations

from gpgpu_opt.analysis.host_calls import (POINTER_READERS, allocator_target, arguments_of, callee_name, has,
                                           is_launch, is_null, user_functions, value_of)
from gpgpu_opt.frontend.host_syntax import HostSyntax, Node


class PointerUse:
    """One use of a variable: 'read', 'allocated' (the first argument of an allocator, `&v`), or why it may
    change what the variable holds."""

    def __init__(self, syntax: HostSyntax, identifier: Node):
        self.syntax = syntax
        self.identifier = identifier
        self.at = syntax.where(identifier)

    def verdict(self) -> str:
        root = value_of(self.identifier)
        if root is None:
            return "read"  # a discarded comma operand, a condition of ?:
        parent, place = root.parent, HostSyntax.field_of(root)
        kind = parent.type
        if kind in READING_PARENTS or (kind in ("for_statement", "do_statement") and place == "condition"):
            return "read"
        if kind == "cast_expression":
            return "read" if not has(parent.child_by_field_name("type"), "abstract_reference_declarator") \
                else f"is cast to a reference at {self.at}"
        if kind == "assignment_expression":
            return self._assignment(parent, place)
        if kind == "update_expression":
            return f"is assigned at {self.at} ({self.syntax.text_of(parent)})"
        if kind == "pointer_expression":
            return self._address_or_dereference(parent)
        if kind == "subscript_expression" and place == "argument":
            return self._element(parent)
        if kind == "argument_list":
            return self._argument(parent)
        if kind == "init_declarator" and place == "value":
            return f"has a reference bound to it at {self.at}" if binds_reference(parent) else "read"
        if kind == "lambda_capture_specifier":
            return f"is captured by name in a lambda at {self.at}"
        return f"is used at {self.at} in a way the proof does not know ('{shortened(self.syntax.text_of(parent))}')"

    def _assignment(self, assignment: Node, place: str | None) -> str:
        if place == "right":
            return "read"
        operator = assignment.child_by_field_name("operator")
        if operator is not None and operator.type == "=" and is_null(assignment.child_by_field_name("right"),
                                                                      self.syntax):
            return "read"  # a null pointer is no other buffer
        if operator is not None and operator.type == "=" and assignment.parent.type == "expression_statement" \
                and user_functions(self.syntax).is_fresh_allocation(assignment.child_by_field_name("right")):
            return "allocated"  # `v = alloc<float>(n);`: a new allocation, as cudaMalloc(&v, ...) stores
        partner = _swap_partner(assignment, self.syntax) if place == "left" else None
        if partner is not None:
            return SWAPPED + partner
        return f"is assigned at {self.at}"

    def _address_or_dereference(self, expression: Node) -> str:
        operator = expression.child_by_field_name("operator")
        if operator is not None and operator.type == "&":
            return "allocated" if allocator_target(expression, self.syntax) \
                else f"has its address taken at {self.at}"
        return f"is dereferenced on the host at {self.at}"

    def _element(self, element: Node) -> str:
        """`v[e]`: `&v[e]` is a pointer into v's allocation; reading an element leaves v as it is; writing
        one (or anything else) is not understood."""
        root = value_of(element)
        if root is None:
            return "read"
        parent, place = root.parent, HostSyntax.field_of(root)
        if parent.type == "pointer_expression" and parent.child_by_field_name("operator").type == "&":
            return "read"
        if parent.type in READING_PARENTS or (parent.type == "assignment_expression" and place == "right"):
            return "read"
        if parent.type == "argument_list" and self._argument(parent) == "read":
            return "read"
        return f"has an element used at {self.at} in a way the proof does not know " \
               f"('{shortened(self.syntax.text_of(parent))}')"

    def _argument(self, arguments: Node) -> str:
        call = arguments.parent
        function = call.child_by_field_name("function") if call.type == "call_expression" else None
        if function is None:
            return f"is used at {self.at} in a way the proof does not know ('{shortened(self.syntax.text_of(call))}')"
        if is_launch(call):
            return "read"  # a kernel takes its arguments by value
        callee = self.syntax.text_of(function)
        if function.type == "identifier" and callee in POINTER_READERS:
            return "read"
        name = callee_name(call, self.syntax)
        position = next(k for k, a in enumerate(arguments_of(call)) if a.start_byte <= self.identifier.start_byte
                        and self.identifier.end_byte <= a.end_byte) if name is not None else None
        if name is not None and user_functions(self.syntax).takes_pointer_by_value(name, position):
            return "read"  # the file's own function gets a copy of the pointer
        return f"is passed to {shortened(callee)} at {self.at}, which may change it"


#: The verdict of an assignment that is half of a swap, followed by the other variable's name.
SWAPPED = "swapped with "


def _swap_partner(assignment: Node, syntax: HostSyntax) -> str | None:
    """The variable `v` is exchanged with when `v = ...` is the second or third statement of a swap,
    `T *t = a; a = b; b = t;` (three statements in a row of one block; t a pointer used nowhere else)."""
    statement = assignment.parent
    block = statement.parent
    if statement.type != "expression_statement" or block is None or block.type != "compound_statement":
        return None
    siblings = [c for c in block.named_children if c.type != "comment"]
    k = next(i for i, c in enumerate(siblings) if c == statement)
    for first in (k - 1, k - 2):
        swapped = _swap(siblings[first:first + 3], syntax) if first >= 0 else None
        if swapped is not None:
            return swapped[1] if first == k - 1 else swapped[0]
    return None


def _swap(statements: list[Node], syntax: HostSyntax) -> tuple[str, str] | None:
    """(a, b) when the statements are `T *t = a; a = b; b = t;`."""
    if len(statements) != 3 or statements[0].type != "declaration":
        return None
    declarators = statements[0].children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator" \
            or any(c.type == "storage_class_specifier" for c in statements[0].children):
        return None
    pointer, value = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("value")
    temporary = pointer.child_by_field_name("declarator") if pointer.type == "pointer_declarator" else None
    if temporary is None or temporary.type != "identifier" or value is None or value.type != "identifier":
        return None
    pairs = [_plain_assignment(s, syntax) for s in statements[1:]]
    t, a = syntax.text_of(temporary), syntax.text_of(value)
    if None in pairs or pairs[0][0] != a or pairs[1][1] != t:
        return None
    b = pairs[0][1]
    if b != pairs[1][0] or len({t, a, b}) != 3:
        return None
    if len(syntax.identifiers(t, statements[0].parent)) != 2:
        return None  # the temporary is used elsewhere
    return a, b


def _plain_assignment(statement: Node, syntax: HostSyntax) -> tuple[str, str] | None:
    """(x, y) when the statement is `x = y;` with two plain names."""
    expression = statement.named_children[0] if statement.type == "expression_statement" \
        and statement.named_child_count == 1 else None
    if expression is None or expression.type != "assignment_expression" \
            or expression.child_by_field_name("operator").type != "=":
        return None
    left, right = expression.child_by_field_name("left"), expression.child_by_field_name("right")
    if left.type != "identifier" or right.type != "identifier":
        return None
    return syntax.text_of(left), syntax.text_of(right)


#: Parents for which a (parenthesized) value is only read.
READING_PARENTS = {"binary_expression", "unary_expression", "condition_clause", "sizeof_expression",
                    "expression_statement"}


def binds_reference(init: Node) -> bool:
    """Does `T d = v` bind a reference to v? Certainly with `&` in the declarator or decltype in the type;
    possibly when the declared name (not a pointer) has a type the proof cannot see through (a typedef)."""
    declaration = init.parent
    type_node = declaration.child_by_field_name("type") if declaration is not None else None
    declarator = init.child_by_field_name("declarator")
    if declarator is None or type_node is None or has(declarator, "reference_declarator") or has(type_node, "decltype"):
        return True
    if declarator.type in ("pointer_declarator", "array_declarator"):
        return False  # a pointer (or array) is a copy, whatever T is
    return type_node.type not in ("primitive_type", "sized_type_specifier", "placeholder_type_specifier")


def initialised(name: Node, syntax: HostSyntax) -> bool:
    """Is the declared pointer `name` initialised with a new allocation (`T *v = alloc<T>(n)`)?"""
    holder = name.parent.parent
    return holder.type == "init_declarator" and user_functions(syntax).is_fresh_allocation(
        holder.child_by_field_name("value"))


def scope_of(name: Node) -> Node:
    """The block (or for statement, condition) a declared name is visible in, to its end."""
    node = name.parent
    while node.type != "declaration":
        node = node.parent
    return node.parent


def declares(identifier: Node) -> bool:
    """Is this identifier the name a declarator introduces?"""
    parent = identifier.parent
    return HostSyntax.field_of(identifier) == "declarator" or parent.type in (
        "reference_declarator", "structured_binding_declarator")


def shortened(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def why_not_plain_pointer(name: Node, syntax: HostSyntax) -> str:
    """Why the declaration of `name` is not `T *name;` or `T *name = NULL;` ('' when it is)."""
    declarator = name.parent
    if declarator.type != "pointer_declarator" or HostSyntax.field_of(name) != "declarator":
        return f"is not declared a plain pointer (at {syntax.where(name)})"
    holder = declarator.parent
    if holder.type == "init_declarator" and HostSyntax.field_of(declarator) == "declarator":
        value = holder.child_by_field_name("value")
        if not is_null(value, syntax) and not user_functions(syntax).is_fresh_allocation(value):
            return f"is initialised with another pointer than NULL or a new allocation at {syntax.where(name)}"
        holder = holder.parent
    elif HostSyntax.field_of(declarator) != "declarator":
        holder = None
    if holder is None or holder.type != "declaration":
        return f"is not declared a plain pointer (at {syntax.where(name)})"
    if any(c.type == "storage_class_specifier" and c.text == b"extern" for c in holder.children):
        return f"is declared extern at {syntax.where(name)}: other functions may change it"
    return ""
