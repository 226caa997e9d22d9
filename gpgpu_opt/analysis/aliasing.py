"""Do a kernel's pointer parameters alias? Known when they are declared `__restrict__`, when the user says
so (`--restrict`, nvcc's flag: every kernel pointer parameter is a restrict pointer), or when the program
proves it: every launch site passes each pointer parameter a device buffer of its own.

The whole-program proof reads the host code as text. An argument names a buffer when it is a variable
(possibly offset: `A_gpu + n`, `&A_gpu[n]`, or cast) that the file allocates with `cudaMalloc` and friends
and never otherwise assigns, increments or hands to a function that could change it. Two arguments that
name different such variables point into different allocations. A parameter the kernel writes through must
get a buffer that no other pointer argument of that launch gets; read-only parameters may share one (C's
`restrict` only forbids aliasing where the object is modified).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpgpu_opt.analysis.writes import written_names
from gpgpu_opt.frontend import scanner
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
    host = HostPointers(program.text)
    sites = [s for s in program.launch_sites if s.kernel == kernel.name]
    hint = "declare the pointer parameters __restrict__, compile with --restrict"
    if not sites:
        return AliasFacts(False, "", why_not=f"no launch of '{kernel.name}' in this file; {hint}",
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
            buffer, why = host.buffer_of(arg)
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


class HostPointers:
    """Device pointer variables of the host code: which ones are buffers of their own."""

    def __init__(self, text: str):
        self.tokens = [t for t in scanner.tokenize(text) if t.kind != "pp"]
        self.allocated: set[str] = set()
        self.disturbed: dict[str, str] = {}      # variable -> how it may stop naming its own buffer
        self._scan()

    def buffer_of(self, arg: str) -> tuple[str | None, str]:
        """The variable whose allocation `arg` points into, or None and why not."""
        m = re.fullmatch(r"(?:\(\s*[\w\s]+\*\s*\)\s*)?&?\s*([A-Za-z_]\w*)(?:\s*\[[^\]]*\]|\s*\+\s*[^,]+)?", arg.strip())
        if m is None:
            return None, "is not a device buffer variable"
        name = m.group(1)
        if name not in self.allocated:
            return None, f"is not allocated with {_ALLOCATORS[0]} in this file"
        if name in self.disturbed:
            return None, self.disturbed[name]
        return name, ""

    def _scan(self) -> None:
        toks = self.tokens
        for i, tok in enumerate(toks):
            if tok.kind != "ident":
                continue
            if tok.text in _ALLOCATORS and i + 1 < len(toks) and toks[i + 1].text == "(":
                name = self._address_argument(i + 2)
                if name:
                    self.allocated.add(name)
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
                return self.tokens[j + 1].text
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
