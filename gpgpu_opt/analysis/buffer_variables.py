"""Which variables of the host code hold a device buffer of their own, for the alias proof (aliasing.py).

A variable of a function is a buffer when it is declared a plain pointer there, allocated there (by an
allocator, or from a user allocation helper: host_calls.py), and every use of it in that function is one the
proof understands (PointerUse). A file-scope variable is a buffer by the rules of file_scope_buffers.py.
A parameter of a helper function that launches a kernel is followed back through every direct call of the
helper (CallChain) to the buffer each call passes. Two buffers named differently (a function's with its
function, a file-scope one by itself) hold different allocations.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from gpgpu_opt.analysis.host_calls import (ALLOCATORS, arguments_of, has, parameter_index, plain_pointer_parameter,
                                           signature, user_functions)
from gpgpu_opt.analysis.file_scope_buffers import FileScopeBuffers
from gpgpu_opt.analysis.pointer_uses import (SWAPPED, PointerUse, declares, initialised, scope_of, shortened,
                                             why_not_plain_pointer)
from gpgpu_opt.frontend import scanner
from gpgpu_opt.frontend.host_syntax import HostSyntax, Node


def directive_names(tok, name: str) -> bool:
    """A directive naming the kernel, other than an #include (a file named like it launches nothing)."""
    return tok.kind == "pp" and not re.match(r"\s*#\s*include\b", tok.text) \
        and re.search(rf"\b{re.escape(name)}\b", tok.text) is not None


def directive_line(text: str, name: str) -> int | None:
    """The first line of `text` with a directive naming `name` (directive_names), or None."""
    return _directive_lines(text).get(name)


@functools.lru_cache(maxsize=16)
def _directive_lines(text: str) -> dict[str, int]:
    """Each name the file's directives (but #include) spell, with the first line: read once per text, as
    every kernel asks (scanning the file per kernel made a compile quadratic in its kernels)."""
    lines: dict[str, int] = {}
    for tok in scanner.tokenize(text):
        if tok.kind == "pp" and not re.match(r"\s*#\s*include\b", tok.text):
            for word in re.findall(r"[A-Za-z_]\w*", tok.text):
                lines.setdefault(word, tok.line)
    return lines


def included_directive(program, name: str) -> str | None:
    """A directive of a file the program includes that names the kernel (a macro that may launch it)."""
    for file in program.source_files()[1:]:
        line = directive_line(file.text, name)
        if line is not None:
            return f"{file.path}:{line}"
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
        self.file_scope = FileScopeBuffers(syntax)

    def _names_file_scope(self, name: str, function: Node) -> bool:
        """Does `name`, not a parameter of `function`, name a file-scope variable there? (Where the function
        declares its own, the function's verdict judges it; the file-scope verdict refuses a function that
        uses both.)"""
        return self.file_scope.declared(name) and not any(declares(use)
                                                          for use in self.syntax.identifiers(name, function))

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
        `chain`: a variable of the function named by itself (depth 0) or with its function's name, a
        file-scope variable named by itself, followed through the calls of the chain where it is a parameter;
        or None and why not."""
        syntax = self.syntax
        variable = named_variable(arg, syntax)
        if variable is None:
            return None, "is not a device buffer variable"
        name = syntax.text_of(variable)
        if name not in syntax.parameter_names(function) and self._names_file_scope(name, function):
            return self.file_scope.verdict(name)  # one name for the buffer, wherever it is passed
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
                         f"'{shortened(syntax.text_of(args[index]))}' {why}"
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
        line = directive_line(self.program.text, name)
        directive = included_directive(self.program, name) or (f"line {line}" if line is not None else None)
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
            if declares(use):
                return f"declared again at {syntax.where(use)}"
            how = PointerUse(syntax, use).verdict()
            if how == "allocated":
                return f"allocated again at {syntax.where(use)}"
            if how.startswith(SWAPPED):
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
        declarations = [u for u in uses if declares(u)]
        if not declarations:
            return None, f"is not allocated with {ALLOCATORS[0]} in the function that launches the kernel " \
                         "(it is not declared there)"
        if len(declarations) > 1:
            return None, f"is declared again at {syntax.where(declarations[1])}"
        why = why_not_plain_pointer(declarations[0], syntax)
        if why:
            return None, why
        scope = scope_of(declarations[0])
        allocated = initialised(declarations[0], syntax)
        for use in uses:
            if use == declarations[0]:
                continue
            if not (declarations[0].end_byte <= use.start_byte and use.end_byte <= scope.end_byte):
                # before its declaration, or past the end of its block: another variable of that name
                return None, f"names another variable at {syntax.where(use)} (outside the scope of the " \
                             f"declaration at {syntax.where(declarations[0])})"
            how = PointerUse(syntax, use).verdict()
            if how == "allocated":
                allocated = True
            elif how.startswith(SWAPPED):
                partners.add(how[len(SWAPPED):])
            elif how != "read":
                return None, how
        if not allocated:
            return None, f"is not allocated with {ALLOCATORS[0]} in the function that launches the kernel"
        return name, ""


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
