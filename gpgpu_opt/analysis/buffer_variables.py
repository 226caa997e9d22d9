"""Which variables of the host code hold a device buffer of their own, for the alias proof (aliasing.py).

A variable of a function is a buffer when it is declared a plain pointer there, allocated there (by an
allocator, or from a user allocation helper: host_calls.py), and every use of it in that function is one the
proof understands (_Use). A parameter of a helper function that launches a kernel is followed back through
every direct call of the helper (CallChain) to the buffer each call passes. Two buffers named differently
(with their function) hold different allocations.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gpgpu_opt.analysis.host_calls import (ALLOCATORS, POINTER_READERS, allocator_target, arguments_of, callee_name,
                                           has, is_launch, is_null, parameter_index, plain_pointer_parameter,
                                           signature, user_functions, value_of)
from gpgpu_opt.frontend import scanner
from gpgpu_opt.frontend.host_syntax import HostSyntax, Node


def directive_names(tok, name: str) -> bool:
    """A directive naming the kernel, other than an #include (a file named like it launches nothing)."""
    return tok.kind == "pp" and not re.match(r"\s*#\s*include\b", tok.text) \
        and re.search(rf"\b{re.escape(name)}\b", tok.text) is not None


def included_directive(program, name: str) -> str | None:
    """A directive of a file the program includes that names the kernel (a macro that may launch it)."""
    for file in program.source_files()[1:]:
        for tok in scanner.tokenize(file.text):
            if directive_names(tok, name):
                return f"{file.path}:{tok.line}"
    return None


#: How many calls a launch argument is followed back through, and how many chains of calls one launch may have.
DEEPEST_CALLS = 3
MOST_CHAINS = 64


@dataclass(frozen=True)
class CallChain:
    """The calls through which a launch in a helper function is reached, innermost first, and why the chain
    goes no further (for an argument that is a parameter of its outermost function)."""
    calls: tuple = ()
    stop: str = ""


class Buffers:
    """Which variables of a function are device buffers of their own (cached per function and name), and
    which buffer a parameter of a helper function receives at each chain of calls that reaches it."""

    def __init__(self, syntax: HostSyntax, program):
        self.syntax = syntax
        self.program = program
        self._verdicts: dict[tuple[int, str], tuple[str | None, str]] = {}
        self._passed: dict[tuple[int, str], str] = {}
        self._followed: dict[int, str] = {}

    def chains(self, function: Node, seen: tuple[int, ...] = ()) -> list[CallChain]:
        """Every chain of calls that reaches `function`, followed while its functions are only called
        directly, at most DEEPEST_CALLS deep, without recursion."""
        syntax = self.syntax
        name = syntax.function_name(function)
        why = self._why_not_followed(function, name)
        if why:
            return [CallChain((), why)]
        calls = user_functions(syntax).calls(name)
        if not calls:
            return [CallChain((), f"'{name}' is never called")]
        if len(seen) >= DEEPEST_CALLS:
            return [CallChain((), f"'{name}' is reached through more than {DEEPEST_CALLS} calls")]
        chains = []
        for call in calls:
            caller = syntax.enclosing_function(call)
            if caller is None or syntax.broken(call) is not None:
                return [CallChain((), f"'{name}' is called at {syntax.where(call)}, where the proof cannot read "
                                      "the call")]
            if caller.start_byte in seen + (function.start_byte,):
                return [CallChain((), f"'{name}' is called recursively at {syntax.where(call)}")]
            chains += [CallChain((call,) + c.calls, c.stop)
                       for c in self.chains(caller, seen + (function.start_byte,))]
            if len(chains) > MOST_CHAINS:
                break
        return chains

    def owner(self, arg: Node, function: Node, chain: CallChain, depth: int) -> tuple[str | None, str]:
        """The buffer argument `arg` of a call or launch in `function` points into, `depth` calls up
        `chain`: a variable of the function named by itself (depth 0) or with its function's name, followed
        through the calls of the chain where it is a parameter; or None and why not."""
        syntax = self.syntax
        variable = named_variable(arg, syntax)
        if variable is None:
            return None, "is not a device buffer variable"
        name = syntax.text_of(variable)
        if name not in syntax.parameter_names(function):
            buffer, why = self.named_by(arg, function)
            if buffer is None or depth == 0:
                return buffer, why
            return f"{buffer} of {syntax.function_name(function)}", ""
        where = "the function that launches the kernel" if depth == 0 else f"'{syntax.function_name(function)}'"
        why = self._why_not_passed(name, function)
        if why:
            return None, f"is a parameter of {where} {why}"
        if depth >= len(chain.calls):
            return None, f"is a parameter of {where}, and {chain.stop}"
        call = chain.calls[depth]
        args = arguments_of(call)
        index = parameter_index(syntax, function, name)
        if index >= len(args):
            return None, f"is a parameter of {where}, which its call at {syntax.where(call)} does not pass"
        owner, why = self.owner(args[index], syntax.enclosing_function(call), chain, depth + 1)
        if owner is None:
            return None, f"is a parameter of {where}, and at its call at {syntax.where(call)} " \
                         f"'{_short(syntax.text_of(args[index]))}' {why}"
        return owner, ""

    def _why_not_followed(self, function: Node, name: str | None) -> str:
        """Why the calls of `function` may not be all its calls, or may reach another function of that name
        ('' when they are every call of it)."""
        if function.start_byte not in self._followed:
            self._followed[function.start_byte] = self._why_not_followed_now(function, name)
        return self._followed[function.start_byte]

    def _why_not_followed_now(self, function: Node, name: str | None) -> str:
        syntax = self.syntax
        if name is None or not re.fullmatch(r"[A-Za-z_]\w*", name):
            return "which is not a free function of the file"
        why = user_functions(syntax).why_not_only_called(name)
        if why:
            return why
        directive = included_directive(self.program, name) or next(
            (f"line {tok.line}" for tok in scanner.tokenize(self.program.text) if directive_names(tok, name)), None)
        if directive:
            return f"'{name}' is named in a directive at {directive}"
        signatures = {signature(d, syntax) for d in user_functions(syntax).declarators(name)}
        if len(signatures) > 1:
            return f"'{name}' is overloaded"
        return ""

    def _why_not_passed(self, name: str, function: Node) -> str:
        """Why parameter `name` of `function` may not hold, at a launch, what its caller passed: it is not a
        plain pointer parameter, or a use in the function may change it ('' when every use only reads it)."""
        key = (function.start_byte, name)
        if key not in self._passed:
            self._passed[key] = self._why_not_passed_now(name, function)
        return self._passed[key]

    def _why_not_passed_now(self, name: str, function: Node) -> str:
        syntax = self.syntax
        parameter = plain_pointer_parameter(syntax, function, name)
        if parameter is None:
            return f"not declared a plain pointer (`T *{name}`)"
        broken = syntax.broken(function)
        if broken is not None:
            return f"that the parser could not read (at {syntax.where(broken)})"
        unread = syntax.unparsed_mentions(name, function)
        if unread:
            return f"named at line {unread[0]} where the parser does not read it as a variable"
        for use in syntax.identifiers(name, function):
            if use == parameter:
                continue
            if _declares(use):
                return f"declared again at {syntax.where(use)}"
            how = _Use(syntax, use).verdict()
            if how == "allocated":
                return f"allocated again at {syntax.where(use)}"
            if how.startswith(_SWAPPED):
                return f"that is {how} at {syntax.where(use)}"
            if how != "read":
                return f"that {how}"
        return ""

    def named_by(self, arg: Node, function: Node) -> tuple[str | None, str]:
        """The variable whose allocation launch argument `arg` points into; or None and why not."""
        variable = named_variable(arg, self.syntax)
        if variable is None:
            return None, "is not a device buffer variable"
        name = self.syntax.text_of(variable)
        key = (function.start_byte, name)
        if key not in self._verdicts:
            self._verdicts[key] = self._group_verdict(name, function)
        return self._verdicts[key]

    def _group_verdict(self, name: str, function: Node) -> tuple[str | None, str]:
        """A variable swapped with others (`T *t = a; a = b; b = t;`) is a buffer when every variable of its
        group is: a swap only exchanges their distinct allocations."""
        group, pending = {name}, [name]
        while pending:
            member = pending.pop()
            buffer, why, partners = self._verdict(member, function)
            if buffer is None:
                return (None, why) if member == name else (None, f"is swapped with '{member}', which {why}")
            pending += sorted(partners - group)
            group |= partners
        return name, ""

    def _verdict(self, name: str, function: Node) -> tuple[str | None, str, set[str]]:
        """The buffer `name` names, judged by its own uses (why not, when it does not), and the variables it
        is swapped with."""
        partners: set[str] = set()
        buffer, why = self._uses_verdict(name, function, partners)
        return buffer, why, partners

    def _uses_verdict(self, name: str, function: Node, partners: set[str]) -> tuple[str | None, str]:
        syntax = self.syntax
        if name in syntax.parameter_names(function):
            return None, "is a parameter of the function that launches the kernel"
        broken = syntax.broken(function)
        if broken is not None:
            return None, f"is used in a function the parser could not read (at {syntax.where(broken)})"
        unread = syntax.unparsed_mentions(name, function)
        if unread:
            return None, f"is named at line {unread[0]} where the parser does not read it as a variable"
        uses = syntax.identifiers(name, function)
        declarations = [u for u in uses if _declares(u)]
        if not declarations:
            return None, f"is not allocated with {ALLOCATORS[0]} in the function that launches the kernel " \
                         "(it is not declared there)"
        if len(declarations) > 1:
            return None, f"is declared again at {syntax.where(declarations[1])}"
        why = self._plain_pointer(declarations[0])
        if why:
            return None, why
        scope = _scope_of(declarations[0])
        allocated = _initialised(declarations[0], syntax)
        for use in uses:
            if use == declarations[0]:
                continue
            if not (declarations[0].end_byte <= use.start_byte and use.end_byte <= scope.end_byte):
                # before its declaration, or past the end of its block: another variable of that name
                return None, f"names another variable at {syntax.where(use)} (outside the scope of the " \
                             f"declaration at {syntax.where(declarations[0])})"
            how = _Use(syntax, use).verdict()
            if how == "allocated":
                allocated = True
            elif how.startswith(_SWAPPED):
                partners.add(how[len(_SWAPPED):])
            elif how != "read":
                return None, how
        if not allocated:
            return None, f"is not allocated with {ALLOCATORS[0]} in the function that launches the kernel"
        return name, ""

    def _plain_pointer(self, name: Node) -> str:
        """Why the declaration of `name` is not `T *name;` or `T *name = NULL;` ('' when it is)."""
        syntax = self.syntax
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


class _Use:
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
        if kind in _READING_PARENTS or (kind in ("for_statement", "do_statement") and place == "condition"):
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
            return f"has a reference bound to it at {self.at}" if _binds_reference(parent) else "read"
        if kind == "lambda_capture_specifier":
            return f"is captured by name in a lambda at {self.at}"
        return f"is used at {self.at} in a way the proof does not know ('{_short(self.syntax.text_of(parent))}')"

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
            return _SWAPPED + partner
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
        if parent.type in _READING_PARENTS or (parent.type == "assignment_expression" and place == "right"):
            return "read"
        if parent.type == "argument_list" and self._argument(parent) == "read":
            return "read"
        return f"has an element used at {self.at} in a way the proof does not know " \
               f"('{_short(self.syntax.text_of(parent))}')"

    def _argument(self, arguments: Node) -> str:
        call = arguments.parent
        function = call.child_by_field_name("function") if call.type == "call_expression" else None
        if function is None:
            return f"is used at {self.at} in a way the proof does not know ('{_short(self.syntax.text_of(call))}')"
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
        return f"is passed to {_short(callee)} at {self.at}, which may change it"


#: The verdict of an assignment that is half of a swap, followed by the other variable's name.
_SWAPPED = "swapped with "


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
_READING_PARENTS = {"binary_expression", "unary_expression", "condition_clause", "sizeof_expression",
                    "expression_statement"}


def named_variable(arg: Node, syntax: HostSyntax) -> Node | None:
    """The variable a launch argument points into: `v`, `(v)`, `(T *)v`, `v + e`, `v - e`, `k + v` (k a
    literal), `&v[e]`; any of these nested. (A pointer plus an integer stays inside its allocation.)"""
    node = arg
    while True:
        kind = node.type
        if kind == "identifier":
            return node
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif kind == "cast_expression" and not has(node.child_by_field_name("type"), "abstract_reference_declarator"):
            node = node.child_by_field_name("value")
        elif kind == "binary_expression" and node.child_by_field_name("operator").type in ("+", "-"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            literal_first = node.child_by_field_name("operator").type == "+" and left.type == "number_literal"
            node = right if literal_first else left
        elif kind == "pointer_expression" and node.child_by_field_name("operator").type == "&" \
                and node.child_by_field_name("argument").type == "subscript_expression":
            node = node.child_by_field_name("argument").child_by_field_name("argument")
        else:
            return None
        if node is None:
            return None


def _binds_reference(init: Node) -> bool:
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


def _initialised(name: Node, syntax: HostSyntax) -> bool:
    """Is the declared pointer `name` initialised with a new allocation (`T *v = alloc<T>(n)`)?"""
    holder = name.parent.parent
    return holder.type == "init_declarator" and user_functions(syntax).is_fresh_allocation(
        holder.child_by_field_name("value"))


def _scope_of(name: Node) -> Node:
    """The block (or for statement, condition) a declared name is visible in, to its end."""
    node = name.parent
    while node.type != "declaration":
        node = node.parent
    return node.parent


def _declares(identifier: Node) -> bool:
    """Is this identifier the name a declarator introduces?"""
    parent = identifier.parent
    return HostSyntax.field_of(identifier) == "declarator" or parent.type in (
        "reference_declarator", "structured_binding_declarator")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."
