"""Do a kernel's pointer parameters alias? Known when they are declared `__restrict__`, when the user says
so (`--restrict`, nvcc's flag: every kernel pointer parameter is a restrict pointer), or when the program
proves it: every launch site passes each pointer parameter a device buffer of its own.

The whole-program proof reads the host code as text. An argument names a buffer when it is a variable
(possibly offset: `A_gpu + n`, `&A_gpu[n]`, or cast) that the function making the launch allocates itself
with `cudaMalloc` and friends (`&A_gpu`, not an element of an array of pointers), that is not a parameter of
that function, and that the file never otherwise assigns, increments, takes the address of or hands to a
function that could change it. Two arguments that name different such variables point into different
allocations. A parameter the kernel writes through must
get a buffer that no other pointer argument of that launch gets; read-only parameters may share one (C's
`restrict` only forbids aliasing where the object is modified).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpgpu_opt.analysis.writes import written_names
from gpgpu_opt.frontend import scanner
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch import host_text

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
    host = HostPointers(host_text(program))
    sites = [s for s in program.launch_sites if s.kernel == kernel.name]
    hint = "declare the pointer parameters __restrict__, compile with --restrict"
    if not sites:
        return AliasFacts(False, "", why_not=f"no launch of '{kernel.name}' in this file; {hint}",
                          written=written)
    hidden = _launch_we_cannot_see(program.text, kernel.name, sites)
    if hidden:
        return AliasFacts(False, "", why_not=f"'{kernel.name}' is also named at line {hidden} (in a macro, or as "
                                             f"a function pointer), so not every launch can be read; {hint}",
                          written=written)
    positions = {p.name: k for k, p in enumerate(kernel.params)}
    for site in sites:
        args = site.args
        if len(args) != len(kernel.params):
            return AliasFacts(False, "", why_not=f"the launch at line {site.line} passes {len(args)} arguments "
                                                 f"for {len(kernel.params)} parameters; {hint}", written=written)
        buffers = {}
        for p in pointers:
            arg = args[positions[p.name]]
            buffer, why = host.buffer_of(arg, site.start)
            if buffer is None:
                return AliasFacts(False, "", why_not=f"line {site.line}: '{arg}' for '{p.name}' {why}; {hint}, "
                                                     "or pass buffers from cudaMalloc directly", written=written)
            buffers[p.name] = buffer
        for name in sorted(written):
            shared = [q for q, b in buffers.items() if q != name and b == buffers[name]]
            if shared:
                return AliasFacts(False, "", why_not=f"the launch at line {site.line} passes '{buffers[name]}' "
                                                     f"to both '{name}' and '{shared[0]}'", written=written)
    return AliasFacts(True, "launch sites", sites=[s.line for s in sites], written=written)


def _launch_we_cannot_see(text: str, name: str, sites: list) -> int | None:
    """The line of a mention of kernel `name` that is neither its definition or a declaration (after `void`)
    nor one of the launch sites read: a launch in a macro, a function pointer."""
    at_sites = {s.start for s in sites}
    all_tokens = scanner.tokenize(text)
    for tok in all_tokens:
        if tok.kind == "pp" and re.search(rf"\b{re.escape(name)}\b", tok.text):
            return tok.line
    tokens = [t for t in all_tokens if t.kind != "pp"]
    for k, tok in enumerate(tokens):
        if tok.kind == "ident" and tok.text == name and tok.start not in at_sites \
                and not (k and tokens[k - 1].text == "void"):
            return tok.line
    return None


class HostPointers:
    """Device pointer variables of the host code: which ones are buffers of their own."""

    def __init__(self, text: str):
        self.tokens = [t for t in scanner.tokenize(text) if t.kind != "pp"]
        self.allocations: list[tuple[str, int]] = []    # (variable, offset of the allocating call)
        self.disturbed: dict[str, str] = {}             # variable -> how it may stop naming its own buffer
        self.functions = self._function_bodies()
        self._scan()

    def buffer_of(self, arg: str, launch_at: int) -> tuple[str | None, str]:
        """The variable whose allocation `arg`, passed by the launch at offset `launch_at`, points into; or
        None and why not."""
        m = _BUFFER_ARGUMENT.fullmatch(arg.strip())
        if m is None:
            return None, "is not a device buffer variable"
        name = m.group(1) or m.group(2)
        start, end, params = next(((s, e, p) for s, e, p in self.functions if s <= launch_at < e), (0, 0, set()))
        if name in params:
            return None, "is a parameter of the function that launches the kernel"
        if not any(var == name and start <= at < end for var, at in self.allocations):
            return None, f"is not allocated with {_ALLOCATORS[0]} in the function that launches the kernel"
        if name in self.disturbed:
            return None, self.disturbed[name]
        return name, ""

    def _function_bodies(self) -> list[tuple[int, int, set[str]]]:
        """(body start, body end, parameter names) of each function defined in the text."""
        toks, bodies, k = self.tokens, [], 0
        while k < len(toks):
            if toks[k].text == "{" and k and toks[k - 1].text in (")", "const"):
                close = scanner.matching(toks, k, "{", "}")
                if close == -1:
                    break  # an unclosed body (the front end reports it)
                paren = k - 1 if toks[k - 1].text == ")" else k - 2
                bodies.append((toks[k].start, toks[close].end, self._parameter_names(paren)))
                k = close + 1
                continue
            k += 1
        return bodies

    def _parameter_names(self, close_paren: int) -> set[str]:
        """Names in the parameter list that ends at token `close_paren`: identifiers before `,` or `)`."""
        names, depth = set(), 0
        for j in range(close_paren, 0, -1):
            t = self.tokens[j].text
            depth += {")": 1, "(": -1}.get(t, 0)
            if depth == 0:
                break
            if depth == 1 and t in (",", ")") and self.tokens[j - 1].kind == "ident":
                names.add(self.tokens[j - 1].text)
        return names

    def _scan(self) -> None:
        toks = self.tokens
        for i, tok in enumerate(toks):
            if tok.kind != "ident":
                continue
            if tok.text in _ALLOCATORS and i + 1 < len(toks) and toks[i + 1].text == "(":
                name = self._address_argument(i + 2)
                if name:
                    self.allocations.append((name, tok.start))
                continue
            prev = toks[i - 1].text if i else ""
            nxt = toks[i + 1].text if i + 1 < len(toks) else ""
            if prev in (".", "->"):
                continue
            if nxt in ("=", "+=", "-=", "++", "--") or prev in ("++", "--"):
                if not (nxt == "=" and self._assigns_null(i + 2)):
                    self.disturbed.setdefault(tok.text, f"is assigned at line {tok.line}")
            elif prev == "&" and not self._inside_allocator(i):
                self.disturbed.setdefault(tok.text, f"has its address taken at line {tok.line}")
            elif prev in ("(", ",") and nxt in (")", ","):
                callee = self._callee_that_may_change(i)
                if callee:
                    self.disturbed.setdefault(tok.text, f"is passed to {callee} at line {tok.line}, "
                                                        "which may change it")

    def _assigns_null(self, i: int) -> bool:
        """`= NULL;`, `= 0;`, `= nullptr;`: a null pointer is no other buffer."""
        value = [t.text for t in self.tokens[i:i + 2]]
        return len(value) == 2 and value[0] in ("NULL", "0", "nullptr") and value[1] in (";", ",")

    def _address_argument(self, i: int) -> str | None:
        """The `name` of a first argument `&name` or `(void **)&name`, the call's tokens starting at i."""
        depth = 0
        for j in range(i, len(self.tokens) - 1):
            t = self.tokens[j].text
            if t == "(":
                depth += 1
            elif t == ")":
                if depth == 0:
                    return None
                depth -= 1
            elif t == "," and depth == 0:
                return None
            elif t == "&" and self.tokens[j + 1].kind == "ident":
                after = self.tokens[j + 2].text if j + 2 < len(self.tokens) else ""
                return self.tokens[j + 1].text if after in (",", ")") else None  # not `&bufs[i]`, `&s.p`
        return None

    def _enclosing_call(self, i: int):
        """The token naming the call whose parentheses hold token i, if any (within the statement)."""
        depth = 0
        for j in range(i - 1, -1, -1):
            t = self.tokens[j].text
            if t == ")":
                depth += 1
            elif t == "(":
                if depth == 0:
                    return self.tokens[j - 1] if j > 0 else None
                depth -= 1
            elif t in (";", "{", "}"):
                return None
        return None

    def _inside_allocator(self, i: int) -> bool:
        callee = self._enclosing_call(i)
        return callee is not None and callee.text in _ALLOCATORS

    def _callee_that_may_change(self, i: int) -> str | None:
        """A function a bare argument at token i is passed to, unless it only reads pointers. (A kernel
        launch's `)(` follows `>>>`, not a name: kernels get the pointer by value.)"""
        callee = self._enclosing_call(i)
        if callee is None or callee.kind != "ident" or callee.text in _POINTER_READERS + _ALLOCATORS \
                or callee.text in _CONTROL:
            return None
        return callee.text


_CONTROL = {"if", "while", "for", "switch", "return", "sizeof"}
#: `name`, `name + offset`, `&name[offset]`, any of them behind a pointer cast.
_BUFFER_ARGUMENT = re.compile(r"(?:\(\s*[\w\s]+\*\s*\)\s*)?(?:&\s*([A-Za-z_]\w*)\s*\[[^\]]*\]|([A-Za-z_]\w*)(?:\s*\+\s*.+)?)")

