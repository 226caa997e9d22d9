"""What a call in the host code can do to a device pointer variable, for the alias proof (aliasing.py).

Read from the host code's syntax tree (frontend/host_syntax.py), each answer a whitelist:
- the CUDA allocators, which store a fresh allocation into `&v`, and the calls that only read a pointer;
- a function of the user's files that takes the pointer at that position by value (`T *p`): a call passes
  a copy and cannot change the caller's variable;
- a user allocation helper (`T *alloc(int n) { T *t; check(cudaMalloc(&t, ...)); return t; }`): each call
  returns a new allocation, so `T *v = alloc(n)` (or `v = alloc(n)`) allocates v as cudaMalloc(&v) does;
- the runtime calls that take a kernel's name to set or query its attributes (`cudaFuncSetCacheConfig(k,
  ...)`): naming a kernel there launches nothing.

A user function is only trusted where the call surely reaches it: its name is declared in the user's files
only as free functions (no member, variable, type or macro of that name), it is named nowhere but at
direct calls and its declarations, and the host code has no `using` directive or declaration that could
bring a library function of that name into the overload set. The proof assumes, as it does for kernels,
that the file with its includes is the whole program: no code outside it declares a function of that name.
"""
from __future__ import annotations

import re
from functools import lru_cache

from gpgpu_opt.frontend.host_syntax import HostSyntax, Node, walk

#: Calls that allocate device memory into `&ptr` (their first argument).
ALLOCATORS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocPitch", "cudaMallocAsync", "cudaMallocHost",
              "cudaHostAlloc")
#: Host calls that read a device pointer variable without changing it.
POINTER_READERS = ("cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy2D", "cudaMemset", "cudaMemsetAsync", "cudaFree",
                   "cudaFreeAsync", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemPrefetchAsync",
                   "cudaBindTexture", "cudaBindTexture2D", "printf", "fprintf")
#: Runtime calls that take a kernel (at this argument position) to set or read its attributes, never to
#: launch it. Each leaves the kernel correct whatever a pass does to it or to its launch (a cache preference,
#: a query whose answer the program may use only at run time).
KERNEL_ATTRIBUTE_CALLS = {"cudaFuncSetCacheConfig": 0, "cudaFuncSetAttribute": 0, "cudaFuncGetAttributes": 1,
                          "cudaFuncSetSharedMemConfig": 0, "cudaOccupancyMaxActiveBlocksPerMultiprocessor": 1,
                          "cudaOccupancyMaxPotentialBlockSize": 2}
#: The attributes cudaFuncSetAttribute may set there: the others (a cluster shape the grid must divide, a
#: dynamic shared memory size that a pass's own shared memory may push over the limit) constrain the launch.
HARMLESS_ATTRIBUTES = ("cudaFuncAttributePreferredSharedMemoryCarveout",)


def value_of(node: Node) -> Node | None:
    """The outermost expression whose value is `node`'s own (through parentheses, the right operand of a
    comma, a branch of ?:), or None where the value is only read (a discarded left operand of a comma,
    the condition of ?:)."""
    while True:
        parent, place = node.parent, HostSyntax.field_of(node)
        if parent.type == "parenthesized_expression":
            node = parent
        elif parent.type == "comma_expression":
            if place != "right":
                return None
            node = parent
        elif parent.type == "conditional_expression":
            if place == "condition":
                return None
            node = parent
        else:
            return node


def allocator_target(address: Node, syntax: HostSyntax) -> bool:
    """Is `&v` (possibly cast, `(void **)&v`) the first argument of an allocator call?"""
    node = address
    while node.parent.type in ("parenthesized_expression", "cast_expression"):
        node = node.parent
    arguments = node.parent
    if arguments.type != "argument_list" or not arguments.named_children or arguments.named_children[0] != node:
        return False
    call = arguments.parent
    function = call.child_by_field_name("function")
    return call.type == "call_expression" and function is not None and function.type == "identifier" \
        and syntax.text_of(function) in ALLOCATORS and not is_launch(call)


def is_null(value: Node | None, syntax: HostSyntax) -> bool:
    """NULL, nullptr, 0, possibly parenthesized or cast."""
    while value is not None and value.type in ("parenthesized_expression", "cast_expression"):
        value = value.child_by_field_name("value") if value.type == "cast_expression" else (
            value.named_children[0] if value.named_child_count == 1 else None)
    return value is not None and (value.type == "null" or (value.type == "number_literal"
                                                           and syntax.text_of(value) == "0"))


def has(node: Node | None, kind: str) -> bool:
    return node is not None and any(n.type == kind for n in walk(node))


def is_launch(call: Node) -> bool:
    return any(c.type == "kernel_call_syntax" for c in call.named_children)


def callee_name(call: Node, syntax: HostSyntax) -> str | None:
    """The name a call names directly: `f(...)` or `f<T>(...)`; None for anything else (a member, a
    pointer, a qualified name, a launch)."""
    function = call.child_by_field_name("function")
    if function is not None and function.type == "template_function":
        function = function.child_by_field_name("name")
    if function is None or function.type != "identifier" or is_launch(call):
        return None
    return syntax.text_of(function)


def arguments_of(call: Node) -> list[Node]:
    arguments = call.child_by_field_name("arguments")
    return [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []


def names_kernel_without_launch(identifier: Node, syntax: HostSyntax) -> bool:
    """Is this mention of a kernel the kernel argument of a call that sets or reads its attributes
    (`cudaFuncSetCacheConfig(k, ...)`, `(const void *)k`, `&k`), a runtime function the file does not
    define itself?"""
    node = identifier
    while True:
        parent = node.parent
        if parent.type == "parenthesized_expression" or (
                parent.type == "cast_expression" and HostSyntax.field_of(node) == "value"
                and not has(parent.child_by_field_name("type"), "abstract_reference_declarator")):
            node = parent
        elif parent.type == "pointer_expression" and parent.child_by_field_name("operator").type == "&" \
                and node is identifier:
            node = parent
        else:
            break
    if node.parent.type != "argument_list" or node.parent.parent.type != "call_expression":
        return False
    call = node.parent.parent
    name = callee_name(call, syntax)
    position = KERNEL_ATTRIBUTE_CALLS.get(name or "")
    arguments = arguments_of(call)
    if name == "cudaFuncSetAttribute" and (len(arguments) < 2
                                           or syntax.text_of(arguments[1]) not in HARMLESS_ATTRIBUTES):
        return False
    return position is not None and position < len(arguments) and arguments[position] == node \
        and not user_functions(syntax).declarators(name)


class UserFunctions:
    """The free functions of the user's files as the alias proof may call through them (one per tree)."""

    def __init__(self, syntax: HostSyntax):
        self.syntax = syntax
        self.using = next((n for n in walk(syntax.root) if n.type == "using_declaration"), None)
        self._fresh: dict[str, str] = {}

    def declarators(self, name: str) -> list[Node]:
        """The function_declarators that declare `name` as a free function (definitions and prototypes)."""
        return [ident.parent for ident in self.syntax.identifiers(name)
                if ident.parent.type == "function_declarator" and HostSyntax.field_of(ident) == "declarator"]

    def calls(self, name: str) -> list[Node]:
        """The direct calls `name(...)` and `name<...>(...)`."""
        found = []
        for ident in self.syntax.identifiers(name):
            node = ident.parent if ident.parent.type == "template_function" \
                and HostSyntax.field_of(ident) == "name" else ident
            if node.parent.type == "call_expression" and HostSyntax.field_of(node) == "function" \
                    and not is_launch(node.parent):
                found.append(node.parent)
        return found

    def why_not_only_called(self, name: str) -> str:
        """Why a call of `name` may not reach the function the file defines, or may not be every call of
        it ('' when every mention of the name is a declaration of a free function or a direct call)."""
        syntax = self.syntax
        if self.using is not None:
            return f"the file has a using declaration at {syntax.where(self.using)}, which may bring in " \
                   f"another function named '{name}'"
        if not self.declarators(name):
            return f"'{name}' is not a function of the user's files"
        known = {d.child_by_field_name("declarator").start_byte for d in self.declarators(name)}
        known |= {call.child_by_field_name("function").start_byte for call in self.calls(name)}
        for ident in syntax.identifiers(name):
            if ident.start_byte not in known and not (ident.parent.type == "template_function"
                                                      and ident.parent.start_byte in known):
                return f"'{name}' is also named at {syntax.where(ident)} (not as a call)"
        unparsed = syntax.unparsed_mentions(name)
        if unparsed:
            return f"'{name}' is also named at line {unparsed[0]} (as a member, a type, in a macro, or where " \
                   "the parser could not read it)"
        return ""

    def takes_pointer_by_value(self, name: str, position: int) -> bool:
        """Does every declaration of `name` take its argument at `position` as a pointer by value (`T *p`), so
        that a call cannot change the variable passed there?"""
        if self.why_not_only_called(name):
            return False
        for declarator in self.declarators(name):
            params = declarator.child_by_field_name("parameters")
            params = [p for p in params.named_children if p.type != "comment"] if params is not None else []
            if position >= len(params) or any(p.type not in ("parameter_declaration",
                                                             "optional_parameter_declaration") for p in params):
                return False  # variadic, a parameter pack, or fewer parameters
            declarator_of_param = params[position].child_by_field_name("declarator")
            if declarator_of_param is None or declarator_of_param.type not in (
                    "pointer_declarator", "abstract_pointer_declarator") \
                    or has(declarator_of_param, "reference_declarator") \
                    or has(declarator_of_param, "abstract_reference_declarator"):
                return False
        return True

    def is_fresh_allocation(self, value: Node | None) -> bool:
        """Is `value` (through parentheses and casts to a non-reference) a call of an allocation helper?"""
        while value is not None and value.type in ("parenthesized_expression", "cast_expression"):
            if value.type == "cast_expression":
                if has(value.child_by_field_name("type"), "abstract_reference_declarator"):
                    return False
                value = value.child_by_field_name("value")
            else:
                value = value.named_children[0] if value.named_child_count == 1 else None
        if value is None or value.type != "call_expression":
            return False
        name = callee_name(value, self.syntax)
        return name is not None and not self.why_not_fresh_allocator(name)

    def why_not_fresh_allocator(self, name: str) -> str:
        """'' when `name` is an allocation helper: one definition, returning a pointer, whose body only
        declares a local pointer, allocates it (any call around the allocator, `check(cudaMalloc(&t, n))`)
        and returns it; otherwise why not."""
        if name not in self._fresh:
            self._fresh[name] = self._why_not_fresh_allocator(name)
        return self._fresh[name]

    def _why_not_fresh_allocator(self, name: str) -> str:
        why = self.why_not_only_called(name)
        if why:
            return why
        declarators = self.declarators(name)
        if len(declarators) != 1:
            return f"'{name}' is declared more than once"
        declarator = declarators[0]
        returned = declarator.parent
        if returned.type != "pointer_declarator" or returned.parent.type != "function_definition":
            return f"'{name}' is not defined as a function returning a pointer"
        body = returned.parent.child_by_field_name("body")
        statements = [s for s in body.named_children if s.type != "comment"] if body is not None else []
        if len(statements) < 2 or statements[-1].type != "return_statement":
            return f"'{name}' does not end with a return"
        local = _declared_pointer(statements[0], self.syntax)
        if local is None:
            return f"'{name}' does not start by declaring one local pointer"
        if any(s.type != "expression_statement" for s in statements[1:-1]):
            return f"'{name}' does more than allocate its local pointer"
        returned_value = statements[-1].named_children[0] if statements[-1].named_child_count else None
        allocated = False
        for use in self.syntax.identifiers(self.syntax.text_of(local), body):
            if use == local:
                continue
            root = value_of(use)
            if root is not None and root == returned_value:
                continue
            if root is not None and root.parent.type == "pointer_expression" \
                    and root.parent.child_by_field_name("operator").type == "&" \
                    and allocator_target(root.parent, self.syntax):
                allocated = True
                continue
            return f"'{name}' uses its local pointer at {self.syntax.where(use)} other than to allocate or " \
                   "return it"
        returned_name = value_of_identifier(returned_value) if returned_value is not None else None
        if not allocated or returned_name is None or returned_name.start_byte == local.start_byte \
                or self.syntax.text_of(returned_name) != self.syntax.text_of(local):
            return f"'{name}' does not return the local pointer it allocates"
        return ""


def value_of_identifier(node: Node) -> Node | None:
    """The identifier `node` is, through parentheses."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node if node.type == "identifier" else None


def _declared_pointer(statement: Node, syntax: HostSyntax) -> Node | None:
    """The name `statement` declares when it is `T *t;` or `T *t = NULL;` (one declarator, no storage class)."""
    if statement.type != "declaration" or any(c.type == "storage_class_specifier" for c in statement.children):
        return None
    declarators = statement.children_by_field_name("declarator")
    if len(declarators) != 1:
        return None
    declarator = declarators[0]
    if declarator.type == "init_declarator":
        if not is_null(declarator.child_by_field_name("value"), syntax):
            return None
        declarator = declarator.child_by_field_name("declarator")
    name = declarator.child_by_field_name("declarator") if declarator.type == "pointer_declarator" else None
    return name if name is not None and name.type == "identifier" else None


@lru_cache(maxsize=16)
def user_functions(syntax: HostSyntax) -> UserFunctions:
    return UserFunctions(syntax)


def plain_pointer_parameter(syntax: HostSyntax, function: Node, name: str) -> Node | None:
    """The identifier of parameter `name` of `function` when it is declared `T *name` (a copy of a pointer)."""
    for param in parameters_of(function):
        declarator = param.child_by_field_name("declarator")
        if param.type == "parameter_declaration" and declarator is not None \
                and declarator.type == "pointer_declarator":
            ident = declarator.child_by_field_name("declarator")
            if ident is not None and ident.type == "identifier" and syntax.text_of(ident) == name:
                return ident
    return None


def parameter_index(syntax: HostSyntax, function: Node, name: str) -> int:
    """The position of plain pointer parameter `name` (checked by _why_not_passed) of `function`."""
    ident = plain_pointer_parameter(syntax, function, name)
    return next(k for k, param in enumerate(parameters_of(function))
                if param.start_byte <= ident.start_byte < param.end_byte)


def parameters_of(function: Node) -> list[Node]:
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    params = declarator.child_by_field_name("parameters") if declarator is not None else None
    return [p for p in params.named_children if p.type != "comment"] if params is not None else []


def signature(declarator: Node, syntax: HostSyntax) -> tuple[str, ...]:
    """A function declaration's parameter types, names left out (to tell a prototype from an overload)."""
    params = declarator.child_by_field_name("parameters")
    shapes = []
    for param in (p for p in params.named_children if p.type != "comment"):
        kind = param.child_by_field_name("type")
        shape = param.child_by_field_name("declarator")
        shapes.append(" ".join([syntax.text_of(kind) if kind is not None else param.type,
                                re.sub(r"\w+", "", syntax.text_of(shape)) if shape is not None else ""]))
    return tuple(" ".join(shape.split()) for shape in shapes)
