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

An argument may also name a file-scope pointer variable (`float *feature_d;`, allocated in one function and
launched with in another): file_scope_buffers.py accepts it when every use of its name in the whole program
is one of the uses above (allocated, read, `= NULL`), with exact name resolution against the locals and
parameters named like it. It is distinct from every other buffer, and named by itself through any chain of
calls, so that one variable passed to two parameters is one buffer.

The file's own functions count as known calls where the call surely reaches them (host_calls.py): passing
v to a parameter declared `T *p` (by value) reads v; `T *v = alloc<T>(n)` and `v = alloc<T>(n);` allocate v
when `alloc` only declares a local pointer, allocates it and returns it. A launch argument that is a
parameter p of the launching function F (`void compute_flux(..., float *fluxes) { k<<<...>>>(fluxes); }`)
is followed back (buffer_variables.py): p must be declared `T *p` and only read in F, F named nowhere but at
direct calls and its declarations (no function pointer, macro, overload, recursion, `using`), called at
least once, and at every call the argument bound to p must be a buffer of the caller by the same rules (at
most three calls deep). Each chain of calls reaching a launch is a site of its own, its buffers named with
their function (`fluxes of main`); a buffer allocated in F is distinct from anything its caller passes.

A parameter the kernel writes through must get a buffer that no other pointer argument of that launch
gets; read-only parameters may share one (C's `restrict` only forbids aliasing where the object is
modified). Every launch of the kernel must be read: a kernel also named elsewhere (a function pointer, a
macro, a template argument) is refused, except as the kernel argument of a runtime call that sets or reads
its attributes (`cudaFuncSetCacheConfig(k, ...)`, which launches nothing).

Assumed, for kernels, host functions and file-scope variables alike: the file with its includes is the
whole program (no other translation unit launches the kernel, calls the functions followed or changes a
file-scope buffer through an `extern` declaration, and no function outside the user's files shares a name
with one of them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from gpgpu_opt.analysis.buffer_variables import (MOST_CHAINS, Buffers, CallChain, directive_line,
                                                 included_directive, named_variable)
from gpgpu_opt.analysis.host_calls import ALLOCATORS, POINTER_READERS, has, names_kernel_without_launch
from gpgpu_opt.analysis.writes import written_names
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend.host_syntax import HostSyntax, Node, host_syntax, walk
from gpgpu_opt.frontend.preprocess import preprocess
from gpgpu_opt.launch.host_view import view_of
from gpgpu_opt.kernel import Kernel

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
    # a variable of the launching function, allocated there, or a file-scope buffer: only allocations (256-byte
    # aligned) or NULL
    buffers: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    # every pointer parameter whose buffer is known, through the calls of `via` where the argument is a
    # parameter of the launching function: equal strings for one buffer, different ones for distinct buffers
    owners: dict[str, str] = field(default_factory=dict)
    via: str = ""           # ' (reached from line N)': the calls that lead to the launch, when followed


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
                return AliasFacts(False, "", why_not=f"line {site.line}{site.via}: '{arg}' for '{p.name}' "
                                                     f"{site.why[p.name]}; {hint}, or pass buffers from cudaMalloc "
                                                     "directly", written=written)
        for name in sorted(written):
            shared = [q for q, b in site.owners.items() if q != name and b == site.owners[name]]
            if shared:
                return AliasFacts(False, "", why_not=f"the launch at line {site.line}{site.via} passes "
                                                     f"'{site.owners[name]}' to both '{name}' and '{shared[0]}'",
                                  written=written)
    lines = list(dict.fromkeys(s.line for s in reading.sites))   # a launch reached through several calls once
    return AliasFacts(True, "launch sites", sites=lines, written=written)


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
    hidden = included_directive(program, name) or _hidden_mention(syntax, program.text, name, launches)
    if hidden:
        return LaunchReading([], f"'{name}' is also named at {hidden} (in a macro, or as a function "
                                 "pointer), so not every launch can be read")
    why = view_of(program).once("launch reading refused", lambda: _whitelist_redefined(syntax) or _implicit_calls(syntax))
    if why:
        return LaunchReading([], why)
    # One for the program: what it learns of a variable (a buffer `a` passed to a thousand launches) holds
    # for every kernel (built per kernel, a compile was quadratic in the kernels).
    buffers = view_of(program).once("buffers", lambda: Buffers(syntax, program))
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
        chains = buffers.chains(function)
        if len(chains) > MOST_CHAINS:
            return LaunchReading([], f"the launch at line {line} is reached through more than {MOST_CHAINS} "
                                     "chains of calls")
        for chain in chains:
            sites.append(_site(launch, function, chain, kernel, buffers))
    return LaunchReading(sites)


def _site(launch, function: Node, chain: CallChain, kernel: Kernel, buffers: Buffers) -> SiteBuffers:
    """The launch as reached through one chain of calls: the owner of each pointer argument."""
    syntax = buffers.syntax
    via = ", ".join(syntax.where(call) for call in chain.calls)
    site = SiteBuffers(syntax.line(launch.name), [syntax.text_of(a) for a in launch.args],
                       via=f" (reached from {via})" if via else "")
    for k, p in enumerate(kernel.params):
        if p.is_pointer:
            owner, why_not = buffers.owner(launch.args[k], function, chain, 0)
            if owner is None:
                site.why[p.name] = why_not
            else:
                site.owners[p.name] = owner
                if owner == syntax.text_of(named_variable(launch.args[k], syntax)):
                    site.buffers[p.name] = owner   # a variable of the launching function, or of file scope
    return site


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
    hidden = included_directive(program, name) or _hidden_mention(syntax, program.text, name, launches)
    return f"'{name}' is also named at {hidden} (in a macro, or as a function pointer)" if hidden else None


def host_view(program) -> str:
    """The program preprocessed as nvcc's host compilation sees it (no __CUDA_ARCH__): the code that runs
    the launches, with every macro expanded and the user's -D and -I."""
    return _host_view(program.text, program.path, tuple(sorted(getattr(program, "defines", {}).items())),
                      tuple(getattr(program, "include_dirs", [])))


@lru_cache(maxsize=8)
def _host_view(text: str, path: str, defines: tuple, include_dirs: tuple) -> str:
    return preprocess(text, path, dict(defines), list(include_dirs), cuda_arch=None)[0]


def _hidden_mention(syntax: HostSyntax, text: str, name: str, launches) -> str | None:
    """Where kernel `name` is named other than at a launch read or in its definition or a declaration: a
    directive of the file as written (a macro that may launch it), a function pointer, a template argument,
    text the parser could not read."""
    line = directive_line(text, name)
    if line is not None:
        return f"line {line}"
    at_launch = {launch.name.start_byte for launch in launches}
    for ident in syntax.identifiers(name):
        declared = ident.parent.type == "function_declarator" and HostSyntax.field_of(ident) == "declarator"
        if ident.start_byte not in at_launch and not declared and not names_kernel_without_launch(ident, syntax):
            return syntax.where(ident)
    unparsed = syntax.unparsed_mentions(name)
    return f"line {unparsed[0]}" if unparsed else None


def _whitelist_redefined(syntax: HostSyntax) -> str:
    """A function of the file named like an allocator or pointer reader may take the pointer by reference."""
    for name in ALLOCATORS + POINTER_READERS:
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
    if declarator is None or not (has(declarator, "reference_declarator")
                                  or has(declarator, "abstract_reference_declarator")):
        return False
    const = any(c.type == "type_qualifier" and c.text == b"const" for c in param.children)
    return not (const and declarator.type in ("reference_declarator", "abstract_reference_declarator"))
