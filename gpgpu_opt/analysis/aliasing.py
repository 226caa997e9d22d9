"""Do a kernel's pointer parameters alias? Known when they are declared `__restrict__`, when the user says
so (`--restrict`, nvcc's flag: every kernel pointer parameter is a restrict pointer), or when the program
proves it: every launch site passes each pointer parameter a device buffer of its own.

The whole-program proof reads the host code preprocessed as nvcc's host compilation does (no __CUDA_ARCH__;
a macro's effect is in the text) as a C++ syntax tree (frontend/host_syntax.py), and is a whitelist. An argument names a buffer when it is a variable
(possibly parenthesized, cast, offset: `A_gpu + n`, `&A_gpu[n]`) declared a plain pointer in the function
that makes the launch (not a parameter, not a reference, with no initialiser but a null one), allocated
there by `cudaMalloc(&A_gpu, ...)` or a friend, and every use of which in that function is one the proof
understands: its declaration, the allocation, a read that yields its value (as a launch argument, to
cudaMemcpy and the other pointer readers, in arithmetic, a comparison, a condition, a copy into another
pointer), or `= NULL`. Anything else defeats it: an assignment, `++`, `&v` outside an allocation, a
reference bound to it, a call the proof does not know, a lambda capturing it by name, an element written on
the host, a use the parser could not read. Only such uses can change what a local variable holds (the
preprocessor has expanded every macro; no other function can reach it without its address or a reference),
so two arguments that name different accepted variables point into different allocations (C forbids
pointer arithmetic that leaves one).

A parameter the kernel writes through must get a buffer that no other pointer argument of that launch
gets; read-only parameters may share one (C's `restrict` only forbids aliasing where the object is
modified). Every launch of the kernel must be read: a kernel also named elsewhere (a function pointer, a
macro, a template argument) is refused.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from gpgpu_opt.analysis.writes import written_names
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend import scanner
from gpgpu_opt.frontend.host_syntax import HostSyntax, Node, host_syntax, walk
from gpgpu_opt.frontend.preprocess import preprocess
from gpgpu_opt.host_view import view_of
from gpgpu_opt.kernel import Kernel

#: Calls that allocate device memory into `&ptr` (their first argument).
_ALLOCATORS = ("cudaMalloc", "cudaMallocManaged", "cudaMallocPitch", "cudaMallocAsync", "cudaMallocHost",
               "cudaHostAlloc")
#: Host calls that read a device pointer variable without changing it.
_POINTER_READERS = ("cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy2D", "cudaMemset", "cudaMemsetAsync", "cudaFree",
                    "cudaFreeAsync", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemPrefetchAsync",
                    "printf", "fprintf")


@dataclass
class AliasFacts:
    """What is known about a kernel's pointer parameters."""
    restrict: bool                      # no pointer parameter aliases another that is written
    how: str                            # 'declared', '--restrict', 'launch sites', or '' when unknown
    sites: list[int] = field(default_factory=list)      # launch-site lines that proved it
    why_not: str = ""                   # what is missing, when not known
    written: set[str] = field(default_factory=set)      # pointer parameters the kernel may store through

    def as_dict(self) -> dict:
        d = {"restrict": self.restrict, "how": self.how or None}
        if self.sites:
            d["launch_sites"] = self.sites
        if self.why_not:
            d["why_not"] = self.why_not
        return d


@dataclass
class SiteBuffers:
    """One launch: its arguments as written (after preprocessing), and for each pointer parameter the
    variable whose own allocation its argument points into, or why that is not known."""
    line: int
    args: list[str]
    buffers: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


@dataclass
class LaunchReading:
    """Every launch of a kernel, or (why_not) why not all of them could be read."""
    sites: list[SiteBuffers]
    why_not: str = ""


def alias_facts(kernel: Kernel, program, assume_restrict: bool = False) -> AliasFacts:
    pointers = [p for p in kernel.params if p.is_pointer]
    written = written_names(kernel.funcdef, program.device_functions) & {p.name for p in pointers}
    if all(p.is_restrict for p in pointers):
        return AliasFacts(True, "declared", written=written)
    if assume_restrict:
        return AliasFacts(True, "--restrict", written=written)
    if len(pointers) < 2 or not written:
        # Nothing to alias with, or nothing written: restrict adds no constraint the program could break.
        return AliasFacts(True, "one pointer" if len(pointers) < 2 else "read-only", written=written)
    hint = "declare the pointer parameters __restrict__, compile with --restrict"
    reading = read_launches(kernel, program)
    if reading.why_not:
        return AliasFacts(False, "", why_not=f"{reading.why_not}; {hint}", written=written)
    for site in reading.sites:
        for p in pointers:
            if p.name in site.why:
                arg = site.args[kernel.params.index(p)]
                return AliasFacts(False, "", why_not=f"line {site.line}: '{arg}' for '{p.name}' {site.why[p.name]}; "
                                                     f"{hint}, or pass buffers from cudaMalloc directly",
                                  written=written)
        for name in sorted(written):
            shared = [q for q, b in site.buffers.items() if q != name and b == site.buffers[name]]
            if shared:
                return AliasFacts(False, "", why_not=f"the launch at line {site.line} passes "
                                                     f"'{site.buffers[name]}' to both '{name}' and '{shared[0]}'",
                                  written=written)
    return AliasFacts(True, "launch sites", sites=[s.line for s in reading.sites], written=written)


def read_launches(kernel: Kernel, program) -> LaunchReading:
    """Each launch of `kernel` in the program, with the buffer each pointer argument names (read once per
    kernel: host_view)."""
    return view_of(program).answer("launches read", kernel, lambda: _read_launches(kernel, program))


def _read_launches(kernel: Kernel, program) -> LaunchReading:
    try:
        syntax = host_syntax(host_view(program), program.path)
    except CompileError as err:  # an #error only the host compilation reaches, say
        return LaunchReading([], f"the host code could not be preprocessed ({err})")
    # An instantiation of a template kernel is proved over every launch of its template, whatever the
    # arguments: a superset of its own launches, so no spelling of its arguments can hide one.
    name = kernel.instance.template_name if kernel.instance is not None else kernel.name
    launches = [launch for launch in syntax.launches if launch.kernel == name]
    if not launches:
        return LaunchReading([], f"no launch of '{name}' in this file")
    hidden = _included_directive(program, name) or _hidden_mention(syntax, program.text, name, launches)
    if hidden:
        return LaunchReading([], f"'{name}' is also named at {hidden} (in a macro, or as a function "
                                 "pointer), so not every launch can be read")
    why = _whitelist_redefined(syntax) or _implicit_calls(syntax)
    if why:
        return LaunchReading([], why)
    buffers = _Buffers(syntax)
    sites = []
    for launch in launches:
        line = syntax.line(launch.name)
        if len(launch.args) != len(kernel.params):
            return LaunchReading([], f"the launch at line {line} passes {len(launch.args)} arguments for "
                                     f"{len(kernel.params)} parameters")
        broken = syntax.broken(launch.call)
        function = syntax.enclosing_function(launch.call)
        if broken is not None or function is None:
            return LaunchReading([], f"the launch at line {line} could not be parsed")
        site = SiteBuffers(line, [syntax.text_of(a) for a in launch.args])
        for k, p in enumerate(kernel.params):
            if p.is_pointer:
                buffer, why_not = buffers.named_by(launch.args[k], function)
                if buffer is None:
                    site.why[p.name] = why_not
                else:
                    site.buffers[p.name] = buffer
        sites.append(site)
    return LaunchReading(sites)


def unread_launches(kernel: Kernel, program) -> str | None:
    """Why the launches read in the program may not be every launch of `kernel` (none, a mention in a
    macro, a function pointer, text the parser could not read); None when they are (asked once per kernel)."""
    return view_of(program).answer("launches unread", kernel, lambda: _unread_launches(kernel, program))


def _unread_launches(kernel: Kernel, program) -> str | None:
    try:
        syntax = host_syntax(host_view(program), program.path)
    except CompileError as err:
        return f"the host code could not be preprocessed ({err})"
    name = kernel.instance.template_name if kernel.instance is not None else kernel.name
    launches = [launch for launch in syntax.launches if launch.kernel == name]
    if not launches:
        return f"no launch of '{name}' in this file"
    hidden = _included_directive(program, name) or _hidden_mention(syntax, program.text, name, launches)
    return f"'{name}' is also named at {hidden} (in a macro, or as a function pointer)" if hidden else None


def host_view(program) -> str:
    """The program preprocessed as nvcc's host compilation sees it (no __CUDA_ARCH__): the code that runs
    the launches, with every macro expanded and the user's -D and -I."""
    return _host_view(program.text, program.path, tuple(sorted(getattr(program, "defines", {}).items())),
                      tuple(getattr(program, "include_dirs", [])))


@lru_cache(maxsize=8)
def _host_view(text: str, path: str, defines: tuple, include_dirs: tuple) -> str:
    return preprocess(text, path, dict(defines), list(include_dirs), cuda_arch=None)[0]


def _directive_names(tok, name: str) -> bool:
    """A directive naming the kernel, other than an #include (a file named like it launches nothing)."""
    return tok.kind == "pp" and not re.match(r"\s*#\s*include\b", tok.text) \
        and re.search(rf"\b{re.escape(name)}\b", tok.text) is not None


def _included_directive(program, name: str) -> str | None:
    """A directive of a file the program includes that names the kernel (a macro that may launch it)."""
    for file in program.source_files()[1:]:
        for tok in scanner.tokenize(file.text):
            if _directive_names(tok, name):
                return f"{file.path}:{tok.line}"
    return None


def _hidden_mention(syntax: HostSyntax, text: str, name: str, launches) -> str | None:
    """Where kernel `name` is named other than at a launch read or in its definition or a declaration: a
    directive of the file as written (a macro that may launch it), a function pointer, a template argument,
    text the parser could not read."""
    for tok in scanner.tokenize(text):
        if _directive_names(tok, name):
            return f"line {tok.line}"
    at_launch = {launch.name.start_byte for launch in launches}
    for ident in syntax.identifiers(name):
        declared = ident.parent.type == "function_declarator" and HostSyntax.field_of(ident) == "declarator"
        if ident.start_byte not in at_launch and not declared:
            return syntax.where(ident)
    unparsed = syntax.unparsed_mentions(name)
    return f"line {unparsed[0]}" if unparsed else None


def _whitelist_redefined(syntax: HostSyntax) -> str:
    """A function of the file named like an allocator or pointer reader may take the pointer by reference."""
    for name in _ALLOCATORS + _POINTER_READERS:
        for ident in syntax.identifiers(name):
            if ident.parent.type == "function_declarator":
                return f"the file declares its own '{name}' at {syntax.where(ident)}"
    return ""


def _implicit_calls(syntax: HostSyntax) -> str:
    """What looks like a read may call the file's own code: an overloaded operator (`sink << v`, `s = v`)
    or a converting constructor (a class argument built from `v`) that takes v by reference."""
    for node in walk(syntax.root):
        if node.type == "operator_name":
            return f"the file overloads {syntax.text_of(node)} at {syntax.where(node)}, which may take a buffer " \
                   "by reference where the proof sees a read"
        if node.type == "function_declarator" and _is_member(node) and any(
                _by_reference(p) for p in node.child_by_field_name("parameters").named_children):
            return f"a member function or constructor declared at {syntax.where(node)} takes a reference, " \
                   "so it may change a buffer passed where the proof sees a read"
    return ""


def _is_member(declarator: Node) -> bool:
    name = declarator.child_by_field_name("declarator")
    if name is not None and name.type == "qualified_identifier":
        return True
    node = declarator.parent
    while node is not None and node.type not in ("field_declaration_list", "translation_unit", "compound_statement"):
        node = node.parent
    return node is not None and node.type == "field_declaration_list"


def _by_reference(param: Node) -> bool:
    """A parameter that binds a non-const lvalue reference (`T &`, `T *&`, `T &&`); `const T &` cannot
    change its argument."""
    declarator = param.child_by_field_name("declarator")
    if declarator is None or not (_has(declarator, "reference_declarator")
                                  or _has(declarator, "abstract_reference_declarator")):
        return False
    const = any(c.type == "type_qualifier" and c.text == b"const" for c in param.children)
    return not (const and declarator.type in ("reference_declarator", "abstract_reference_declarator"))


class _Buffers:
    """Which variables of a function are device buffers of their own (cached per function and name)."""

    def __init__(self, syntax: HostSyntax):
        self.syntax = syntax
        self._verdicts: dict[tuple[int, str], tuple[str | None, str]] = {}

    def named_by(self, arg: Node, function: Node) -> tuple[str | None, str]:
        """The variable whose allocation launch argument `arg` points into; or None and why not."""
        variable = _named_variable(arg, self.syntax)
        if variable is None:
            return None, "is not a device buffer variable"
        name = self.syntax.text_of(variable)
        key = (function.start_byte, name)
        if key not in self._verdicts:
            self._verdicts[key] = self._verdict(name, function)
        return self._verdicts[key]

    def _verdict(self, name: str, function: Node) -> tuple[str | None, str]:
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
            return None, f"is not allocated with {_ALLOCATORS[0]} in the function that launches the kernel " \
                         "(it is not declared there)"
        if len(declarations) > 1:
            return None, f"is declared again at {syntax.where(declarations[1])}"
        why = self._plain_pointer(declarations[0])
        if why:
            return None, why
        scope = _scope_of(declarations[0])
        allocated = False
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
            elif how != "read":
                return None, how
        if not allocated:
            return None, f"is not allocated with {_ALLOCATORS[0]} in the function that launches the kernel"
        return name, ""

    def _plain_pointer(self, name: Node) -> str:
        """Why the declaration of `name` is not `T *name;` or `T *name = NULL;` ('' when it is)."""
        syntax = self.syntax
        declarator = name.parent
        if declarator.type != "pointer_declarator" or HostSyntax.field_of(name) != "declarator":
            return f"is not declared a plain pointer (at {syntax.where(name)})"
        holder = declarator.parent
        if holder.type == "init_declarator" and HostSyntax.field_of(declarator) == "declarator":
            if not _is_null(holder.child_by_field_name("value"), syntax):
                return f"is initialised with another pointer than NULL at {syntax.where(name)}"
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
        root = _value_of(self.identifier)
        if root is None:
            return "read"  # a discarded comma operand, a condition of ?:
        parent, place = root.parent, HostSyntax.field_of(root)
        kind = parent.type
        if kind in _READING_PARENTS or (kind in ("for_statement", "do_statement") and place == "condition"):
            return "read"
        if kind == "cast_expression":
            return "read" if not _has(parent.child_by_field_name("type"), "abstract_reference_declarator") \
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
        if operator is not None and operator.type == "=" and _is_null(assignment.child_by_field_name("right"),
                                                                      self.syntax):
            return "read"  # a null pointer is no other buffer
        return f"is assigned at {self.at}"

    def _address_or_dereference(self, expression: Node) -> str:
        operator = expression.child_by_field_name("operator")
        if operator is not None and operator.type == "&":
            return "allocated" if _allocator_target(expression, self.syntax) \
                else f"has its address taken at {self.at}"
        return f"is dereferenced on the host at {self.at}"

    def _element(self, element: Node) -> str:
        """`v[e]`: `&v[e]` is a pointer into v's allocation; reading an element leaves v as it is; writing
        one (or anything else) is not understood."""
        root = _value_of(element)
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
        if any(c.type == "kernel_call_syntax" for c in call.named_children):
            return "read"  # a kernel takes its arguments by value
        callee = self.syntax.text_of(function)
        if function.type == "identifier" and callee in _POINTER_READERS:
            return "read"
        return f"is passed to {_short(callee)} at {self.at}, which may change it"


#: Parents for which a (parenthesized) value is only read.
_READING_PARENTS = {"binary_expression", "unary_expression", "condition_clause", "sizeof_expression",
                    "expression_statement"}


def _value_of(node: Node) -> Node | None:
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


def _named_variable(arg: Node, syntax: HostSyntax) -> Node | None:
    """The variable a launch argument points into: `v`, `(v)`, `(T *)v`, `v + e`, `v - e`, `k + v` (k a
    literal), `&v[e]`; any of these nested. (A pointer plus an integer stays inside its allocation.)"""
    node = arg
    while True:
        kind = node.type
        if kind == "identifier":
            return node
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif kind == "cast_expression" and not _has(node.child_by_field_name("type"), "abstract_reference_declarator"):
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


def _allocator_target(address: Node, syntax: HostSyntax) -> bool:
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
        and syntax.text_of(function) in _ALLOCATORS \
        and not any(c.type == "kernel_call_syntax" for c in call.named_children)


def _binds_reference(init: Node) -> bool:
    """Does `T d = v` bind a reference to v? Certainly with `&` in the declarator or decltype in the type;
    possibly when the declared name (not a pointer) has a type the proof cannot see through (a typedef)."""
    declaration = init.parent
    type_node = declaration.child_by_field_name("type") if declaration is not None else None
    declarator = init.child_by_field_name("declarator")
    if declarator is None or type_node is None or _has(declarator, "reference_declarator") or _has(type_node, "decltype"):
        return True
    if declarator.type in ("pointer_declarator", "array_declarator"):
        return False  # a pointer (or array) is a copy, whatever T is
    return type_node.type not in ("primitive_type", "sized_type_specifier", "placeholder_type_specifier")


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


def _is_null(value: Node | None, syntax: HostSyntax) -> bool:
    """NULL, nullptr, 0, possibly parenthesized or cast."""
    while value is not None and value.type in ("parenthesized_expression", "cast_expression"):
        value = value.child_by_field_name("value") if value.type == "cast_expression" else (
            value.named_children[0] if value.named_child_count == 1 else None)
    return value is not None and (value.type == "null" or (value.type == "number_literal"
                                                           and syntax.text_of(value) == "0"))


def _has(node: Node | None, kind: str) -> bool:
    return node is not None and any(n.type == kind for n in walk(node))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."
