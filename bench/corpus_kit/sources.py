"""What a program's sources hold, read as text (independently of the compiler, so its table can be checked
against it): the user files each `.cu` includes, the `__global__` kernels they define, and which of those
are written in the naive style the compiler targets (no `__shared__`, no `__syncthreads`, in the kernel's body
or in a function it calls: Rodinia's dwt2d kernels are one call to a class template's `run`, which stages)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"' + r"|'(?:\\.|[^'\\\n])*'")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class KernelText:
    file: str               # absolute path of the file that defines it
    name: str
    line: int
    end_line: int
    naive_style: bool       # no __shared__ and no __syncthreads in its body or the functions it calls
    template: bool


def read_text(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def strip_comments(text: str) -> str:
    """Comments and string literals blanked out with spaces (line numbers kept)."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/|" + _STRING.pattern, blank, text, flags=re.DOTALL)


def user_includes(path: str, include_dirs: list[str]) -> list[str]:
    """The files `path` includes with quotes that exist (beside it first, then `include_dirs`, as C)."""
    found = []
    for name in _INCLUDE.findall(read_text(path)):
        for base in [os.path.dirname(path), *include_dirs]:
            candidate = os.path.normpath(os.path.join(base, name))
            if os.path.isfile(candidate):
                if candidate not in found:
                    found.append(candidate)
                break
    return found


def include_closure(path: str, include_dirs: list[str]) -> list[str]:
    """`path` and every user file it includes, directly or not, each once, in the order first met."""
    order, todo = [], [os.path.normpath(path)]
    while todo:
        current = todo.pop(0)
        if current in order:
            continue
        order.append(current)
        todo += [p for p in user_includes(current, include_dirs) if p not in order]
    return order


def main_files(cu_files: list[str], include_dirs: list[str]) -> list[str]:
    """The compiled files no other compiled file includes (nvcc compiles an included `.cu` with its includer)."""
    included = set()
    for path in cu_files:
        included.update(include_closure(path, include_dirs)[1:])
    return [p for p in cu_files if p not in included]


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    """Index just past the bracket that closes the one at `start`, or -1."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def _kernel_at(code: str, pos: int) -> tuple[str, int, int] | None:
    """After the `__global__` at `pos`: (name, body start, body end), or None for a declaration."""
    i = pos + len("__global__")
    while True:
        paren = code.find("(", i)
        if paren < 0:
            return None
        names = _IDENT.findall(code[i:paren])
        if names and names[-1] == "__launch_bounds__":
            i = _matching(code, paren, "(", ")")
            if i < 0:
                return None
            continue
        break
    if not names:
        return None
    close = _matching(code, paren, "(", ")")
    if close < 0:
        return None
    m = re.compile(r"\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?([{;])", re.DOTALL).match(code, close)
    if not m or m.group(1) != "{":
        return None
    body_end = _matching(code, m.end() - 1, "{", "}")
    return (names[-1], m.end() - 1, body_end) if body_end > 0 else None


_SYNC_WORDS = ("__shared__", "__syncthreads")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;{}()]*>\s*)?\(")
_DEFINITION_TAIL = re.compile(r"\s*(?:const\s*)?(?:noexcept\s*)?\{")
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "alignof", "decltype",
                  "__launch_bounds__", "__attribute__", "defined"}


def function_bodies(code: str) -> dict[str, list[str]]:
    """Every function body `code` defines (free functions and methods alike), by the function's name."""
    bodies: dict[str, list[str]] = {}
    for m in _CALL.finditer(code):
        if m.group(1) in _NOT_FUNCTIONS:
            continue
        close = _matching(code, m.end() - 1, "(", ")")
        tail = _DEFINITION_TAIL.match(code, close) if close > 0 else None
        if tail:
            end = _matching(code, tail.end() - 1, "{", "}")
            if end > 0:
                bodies.setdefault(m.group(1), []).append(code[tail.end() - 1:end])
    return bodies


def stages_or_syncs(body: str, functions: dict[str, list[str]], seen: set[str] | None = None) -> bool:
    """Whether `body`, or a function it calls (by name, transitively), declares `__shared__` memory or
    synchronizes. A name defined more than once counts when any definition does (the text is not typed)."""
    if any(word in body for word in _SYNC_WORDS):
        return True
    seen = set() if seen is None else seen
    for name in {m.group(1) for m in _CALL.finditer(body)} - _NOT_FUNCTIONS - seen:
        seen.add(name)
        if any(stages_or_syncs(callee, functions, seen) for callee in functions.get(name, [])):
            return True
    return False


def linked_host_files(host_files: list[str], main_sources: list[str], include_dirs: list[str]) -> list[str]:
    """The host files a build links beside its `.cu` main files: those no other host file includes, and
    none a main file includes itself (Rodinia's srad_v1 lists graphics.c in its Makefile's dependencies, and
    main.cu includes it: compiled alone, it does not build)."""
    included = {p for source in main_sources for p in include_closure(source, include_dirs)[1:]}
    return [h for h in main_files(host_files, include_dirs) if os.path.normpath(h) not in included]


def kernels_in(path: str, functions: dict[str, list[str]] | None = None) -> list[KernelText]:
    """The `__global__` functions `path` defines (declarations skipped). `functions`: the bodies of the
    functions the program defines, by name, followed from each kernel (default: those of `path`)."""
    code = strip_comments(read_text(path))
    functions = function_bodies(code) if functions is None else functions
    found = []
    for m in re.finditer(r"\b__global__\b", code):
        kernel = _kernel_at(code, m.start())
        if kernel is None:
            continue
        name, start, end = kernel
        naive = not stages_or_syncs(code[start:end], functions)
        before = code[max(0, code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start())):m.start()]
        found.append(KernelText(path, name, code.count("\n", 0, m.start()) + 1, code.count("\n", 0, end) + 1, naive,
                                template=re.search(r"\btemplate\s*<", before) is not None))
    return found


_MAIN = re.compile(r"^[ \t]*(?:int|void)?[ \t]*\bmain[ \t]*\(", re.MULTILINE)


def defines_main(path: str) -> bool:
    """Whether the file defines main() (a comment or a string naming it does not count)."""
    return _MAIN.search(strip_comments(read_text(path))) is not None


def program_kernels(main_file: str, include_dirs: list[str]) -> list[KernelText]:
    """The kernels a main `.cu` file's compilation sees: its own and those of the user files it includes."""
    files = include_closure(main_file, include_dirs)
    functions: dict[str, list[str]] = {}
    for path in files:
        for name, bodies in function_bodies(strip_comments(read_text(path))).items():
            functions.setdefault(name, []).extend(bodies)
    return [kernel for path in files for kernel in kernels_in(path, functions)]
