"""What a suite's build files compile, read as text: the `.cu` files handed to nvcc and the `-I`/`-D` flags.

Not a make or cmake implementation; it reads what a person skimming the file would:

- Makefiles (`Makefile`, `makefile`, not `Makefile_nvidia` and friends): lines are joined at `\\`,
  comments dropped, `include FILE` followed (relative to the Makefile, missing ones ignored), every
  assignment (`=`, `:=`, `?=`, `+=`, with `override`/`export`) collected with both branches of any
  `ifeq`/`ifdef` taken, and `$(VAR)`/`${VAR}` expanded (unknown: empty). The compiled files are every
  token ending in `.cu` (or an object `x.o` whose `x.cu` exists) that names an existing file; the flags are
  the `-I`/`-D` of the recipe lines that run nvcc (first value of a macro wins).
- CMake (`CMakeLists.txt`): every `.cu` token naming an existing file, `include_directories` /
  `target_include_directories` and `add_definitions` / `(target_)compile_definitions`, with
  `${CMAKE_CURRENT_SOURCE_DIR}` expanded.
- No build file: every `.cu` file of the program, no flags.

`sources.main_files` then drops the files another compiled file includes (`#include "kernel.cu"`): nvcc
compiles those as part of the includer.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

MAKEFILE_NAMES = ("Makefile", "makefile", "GNUmakefile")
_ASSIGN = re.compile(r"^(?:override\s+|export\s+)*([A-Za-z_][A-Za-z0-9_.-]*)\s*(\+=|:=|::=|\?=|=)\s*(.*)$")
_VAR_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_.-]*)[)}]")
_NVCC = re.compile(r"(^|[\s/])nvcc(\s|$)")


@dataclass
class BuildUnit:
    """One build file's view: the `.cu` files it compiles and the flags it gives nvcc."""
    build_file: str | None                   # None: no build file, heuristics
    directory: str                           # where the build runs (relative paths start here)
    cu_files: list[str] = field(default_factory=list)        # absolute paths
    host_files: list[str] = field(default_factory=list)      # .c/.cpp/.cc files linked with them (absolute)
    include_dirs: list[str] = field(default_factory=list)    # absolute paths that exist
    defines: list[str] = field(default_factory=list)         # NAME or NAME=VALUE
    missing_include_dirs: list[str] = field(default_factory=list)


def _logical_lines(text: str) -> list[str]:
    """Lines joined at a trailing backslash, `#` comments removed."""
    joined = re.sub(r"\\\r?\n", " ", text)
    lines = []
    for line in joined.splitlines():
        line = re.sub(r"(?<!\\)#.*$", "", line)
        if line.strip():
            lines.append(line.rstrip())
    return lines


def _read_makefile(path: str, seen: set[str]) -> list[str]:
    """The logical lines of a Makefile with its `include`d files spliced in (once each)."""
    real = os.path.realpath(path)
    if real in seen or not os.path.isfile(real):
        return []
    seen.add(real)
    with open(real, encoding="utf-8", errors="replace") as f:
        lines = _logical_lines(f.read())
    out = []
    for line in lines:
        m = re.match(r"^-?include\s+(.+)$", line.strip())
        if m and not line.startswith("\t"):
            for name in m.group(1).split():
                out += _read_makefile(os.path.join(os.path.dirname(real), os.path.expanduser(name)), seen)
            continue
        out.append(line)
    return out


def expand(text: str, variables: dict[str, str], depth: int = 0) -> str:
    """`$(VAR)` and `${VAR}` replaced by their values, recursively; functions and unknown names: empty."""
    if depth > 20:
        return text
    new = _VAR_REF.sub(lambda m: variables.get(m.group(1), ""), text)
    new = re.sub(r"\$\([a-z]+ [^()]*\)", "", new)    # $(shell ...), $(patsubst ...): not evaluated
    return new if new == text else expand(new, variables, depth + 1)


_CONDITIONAL = re.compile(r"^(ifeq|ifneq|ifdef|ifndef)\s*(.*)$")


def _condition(kind: str, argument: str, variables: dict[str, str]) -> bool:
    """`ifeq (A,B)`, `ifneq "A" "B"`, `ifdef VAR`: evaluated with what is known (unknown variables empty)."""
    if kind in ("ifdef", "ifndef"):
        return bool(variables.get(argument.strip())) == (kind == "ifdef")
    argument = expand(argument.strip(), variables)
    m = re.match(r"^\((.*),(.*)\)$", argument)
    parts = [m.group(1), m.group(2)] if m else [p.strip("'\"") for p in re.findall(r"\"[^\"]*\"|'[^']*'", argument)]
    if len(parts) != 2:
        return False
    return (parts[0].strip() == parts[1].strip()) == (kind == "ifeq")


def active_lines(lines: list[str]) -> tuple[list[str], dict[str, str]]:
    """The lines make would read (`ifeq`/`ifdef`/`else`/`endif` evaluated in order, with the variables known
    at that point) and the variables they set."""
    variables: dict[str, str] = {}
    stack: list[tuple[bool, bool]] = []       # (this branch taken, some branch of this block taken)
    kept = []
    for line in lines:
        word = line.strip()
        live = all(taken for taken, _ in stack)
        cond = _CONDITIONAL.match(word)
        if cond:
            taken = live and _condition(cond.group(1), cond.group(2), variables)
            stack.append((taken, taken))
            continue
        if re.match(r"^else\b", word) and stack:
            _, done = stack.pop()
            outer = all(taken for taken, _ in stack)
            rest = _CONDITIONAL.match(word[4:].strip())
            taken = outer and not done and (rest is None or _condition(rest.group(1), rest.group(2), variables))
            stack.append((taken, done or taken))
            continue
        if word == "endif" and stack:
            stack.pop()
            continue
        if live:
            kept.append(line)
            _assign(line, variables)
    return kept, variables


def _assign(line: str, variables: dict[str, str]) -> None:
    """An assignment, also tab-indented inside an `ifeq` (as Rodinia writes them); a recipe line never
    has the form `NAME += value`."""
    m = _ASSIGN.match(line.strip())
    if m:
        name, op, value = m.groups()
        if op == "+=":
            variables[name] = (variables.get(name, "") + " " + value).strip()
        elif op == "?=":
            variables.setdefault(name, value)
        else:
            variables[name] = value


def _flags(tokens: list[str], directory: str, unit: BuildUnit) -> None:
    """Add the -I/-D flags of one nvcc command line's tokens to `unit`."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        for flag, store in (("-I", "include"), ("-D", "define")):
            if not tok.startswith(flag):
                continue
            value = tok[2:]
            if not value and i + 1 < len(tokens):
                i += 1
                value = tokens[i]
            if store == "include":
                _add_include(value, directory, unit)
            elif value and value.split("=")[0] not in [d.split("=")[0] for d in unit.defines]:
                unit.defines.append(value)
        i += 1


def _add_include(value: str, directory: str, unit: BuildUnit) -> None:
    if not value:
        return
    path = os.path.normpath(os.path.join(directory, os.path.expanduser(value)))
    if os.path.isdir(path):
        if path not in unit.include_dirs:
            unit.include_dirs.append(path)
    elif value not in unit.missing_include_dirs:
        unit.missing_include_dirs.append(value)


def _cu_tokens(tokens: list[str], directory: str, suffixes: tuple[str, ...] = (".cu",)) -> list[str]:
    """Existing files the tokens name with one of `suffixes` (an object `x.o` names the first of them that
    exists)."""
    found = []
    for tok in tokens:
        tok = tok.strip("'\";,()")
        names = [tok[:-2] + s for s in suffixes] if tok.endswith(".o") else [tok]
        for name in names:
            path = os.path.normpath(os.path.join(directory, name))
            if name.endswith(suffixes) and os.path.isfile(path):
                if path not in found:
                    found.append(path)
                break
    return found


def _host_tokens(tokens: list[str], directory: str, cu_files: list[str]) -> list[str]:
    """The C/C++ files the tokens name (objects whose source is not a `.cu` file)."""
    return [p for p in _cu_tokens(tokens, directory, (".c", ".cpp", ".cc"))
            if os.path.splitext(p)[0] + ".cu" not in cu_files]


def parse_makefile(path: str) -> BuildUnit:
    directory = os.path.dirname(os.path.abspath(path))
    lines, variables = active_lines(_read_makefile(path, set()))
    unit = BuildUnit(build_file=os.path.abspath(path), directory=directory)
    for line in lines:
        expanded = expand(line, variables)
        tokens = expanded.split()
        for cu in _cu_tokens(tokens, directory):
            if cu not in unit.cu_files:
                unit.cu_files.append(cu)
        for host in _host_tokens(tokens, directory, unit.cu_files):
            if host not in unit.host_files:
                unit.host_files.append(host)
        if line.startswith("\t") and _NVCC.search(expanded) and "clang" not in expanded \
                and not _ASSIGN.match(line.strip()):
            _flags(tokens, directory, unit)
    return unit


def parse_cmake(path: str) -> BuildUnit:
    directory = os.path.dirname(os.path.abspath(path))
    with open(path, encoding="utf-8", errors="replace") as f:
        text = re.sub(r"#[^\n]*", "", f.read())
    text = text.replace("${CMAKE_CURRENT_SOURCE_DIR}", directory).replace("${CMAKE_SOURCE_DIR}", directory)
    unit = BuildUnit(build_file=os.path.abspath(path), directory=directory)
    unit.cu_files = _cu_tokens(text.split(), directory)
    unit.host_files = _host_tokens(text.split(), directory, unit.cu_files)
    for m in re.finditer(r"\b(target_)?include_directories\s*\(([^)]*)\)", text):
        for tok in m.group(2).split():
            if tok not in ("PRIVATE", "PUBLIC", "INTERFACE", "SYSTEM", "BEFORE", "AFTER") and "$" not in tok:
                if m.group(1) and tok == m.group(2).split()[0]:
                    continue                                   # the target's name
                _add_include(tok.strip('"'), directory, unit)
    for m in re.finditer(r"\b(add_definitions|(?:target_|add_)?compile_definitions)\s*\(([^)]*)\)", text):
        for tok in m.group(2).split()[1 if m.group(1) == "target_compile_definitions" else 0:]:
            tok = tok.strip('"')
            if m.group(1) == "add_definitions" and not tok.startswith("-D"):
                continue
            name = tok[2:] if tok.startswith("-D") else tok
            if re.match(r"^[A-Za-z_]\w*(=[^$]*)?$", name) and name not in ("PRIVATE", "PUBLIC", "INTERFACE") \
                    and name not in unit.defines:
                unit.defines.append(name)
    return unit


def build_units(program_dir: str) -> list[BuildUnit]:
    """The build files of one program (its own directory and subdirectories two levels down), each read;
    one heuristic unit with every `.cu` file when none names a `.cu` file."""
    program_dir = os.path.abspath(program_dir)
    units = []
    for root, dirs, files in os.walk(program_dir):
        depth = os.path.relpath(root, program_dir).count(os.sep) + (root != program_dir)
        if depth >= 2:
            dirs[:] = []
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if name in MAKEFILE_NAMES:
                units.append(parse_makefile(path))
            elif name == "CMakeLists.txt":
                units.append(parse_cmake(path))
    units = [u for u in units if u.cu_files]
    if units:
        return units
    every = sorted(os.path.join(r, f) for r, _, fs in os.walk(program_dir) for f in fs if f.endswith(".cu"))
    return [BuildUnit(build_file=None, directory=os.path.abspath(program_dir), cu_files=every)] if every else []
