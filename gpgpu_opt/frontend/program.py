"""Reading a whole .cu file into a Program: its text, its kernels as c_ast, its launch sites."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pycparser import c_ast, c_parser

from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import CompileError, Diagnostics, Location
from gpgpu_opt.frontend import scanner
from gpgpu_opt.frontend.cuda_c import PRELUDE_NAMES, cuda_to_c, parse_c, restore_cuda_storage
from gpgpu_opt.frontend.file_scope import find_file_variables, variables_used
from gpgpu_opt.frontend.names import resolve_names
from gpgpu_opt.frontend.preprocess import preprocess
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.targets import DEFAULT_TARGET, Target, get_target


@dataclass
class Program:
    path: str
    text: str                                   # the file exactly as the user wrote it
    kernels: list[Kernel]
    device_functions: dict[str, c_ast.FuncDef]  # parsed __device__ helpers, by name
    launch_sites: list[scanner.LaunchSite]
    macros: dict[str, str]                      # object-like macros after preprocessing
    gvalues: dict[str, str]                     # `#pragma gCompiler gValue NAME VALUE`
    passed_through: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)  # -D, to preprocess the file again (host view)
    include_dirs: list[str] = field(default_factory=list)  # -I

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


def parse_expression(text: str) -> c_ast.Node:
    """Parse a C expression (used for shorthand definitions and generated snippets)."""
    ast = c_parser.CParser().parse(f"int __e = {text};", filename="<expr>")
    return ast.ext[0].init


def read_source(path: str) -> str:
    p = Path(path)
    if not p.exists():
        raise CompileError(f"no such file: '{path}'")
    if p.is_dir():
        raise CompileError(f"'{path}' is a directory, not a .cu file")
    try:
        return p.read_text()
    except UnicodeDecodeError:
        raise CompileError(f"'{path}' is not a text file", Location(path, 1, 1)) from None


def load_program(path: str, defines: dict[str, str] | None = None, include_dirs: list[str] | None = None,
                 diagnostics: Diagnostics | None = None, target: Target | None = None) -> Program:
    """Read, preprocess (as nvcc does device code for `target`, the default target if None) and parse a file."""
    diagnostics = diagnostics or Diagnostics()
    target = target or get_target(DEFAULT_TARGET)
    text = read_source(path)
    tokens = scanner.tokenize(text)
    bad = next((t for t in tokens if t.kind == "bad"), None)
    if bad is not None:
        what = "comment" if bad.text.startswith("/*") else "string or character literal"
        raise CompileError(f"unterminated {what}", Location(path, bad.line, bad.column))
    original = scanner.find_functions(text, tokens)
    gvalues = scanner.find_gvalue_pragmas(tokens)
    launch_sites = scanner.find_launch_sites(text, tokens)

    expanded, macros = preprocess(text, path, defines, include_dirs, cuda_arch=target.cuda_arch)
    expanded_functions = {f.name: f for f in scanner.find_functions(expanded)}
    typedefs = _c_typedefs(expanded, path)
    _check_braces(text, tokens, path)

    if not any(f.is_kernel for f in original):
        raise CompileError(f"no __global__ kernel in '{path}'", Location(path, 1, 1))

    device_functions: dict[str, c_ast.FuncDef] = {}
    file_variables = find_file_variables(expanded, typedefs.text, path, parse_c)
    known = set(PRELUDE_NAMES) | {f.name for f in original} | set(file_variables)
    kernels: list[Kernel] = []
    passed: list[str] = []
    for definition in original:
        where = Location(path, definition.line, definition.column)
        if definition.cxx_constructs:
            diagnostics.note(f"'{definition.name}' uses C++ ({', '.join(definition.cxx_constructs)}); "
                             "passed through unchanged", where, kernel=definition.name)
            passed.append(definition.name)
            continue
        pp_def = expanded_functions.get(definition.name)
        if pp_def is None:
            diagnostics.note(f"'{definition.name}' could not be found after preprocessing; passed through",
                             where, kernel=definition.name)
            passed.append(definition.name)
            continue
        c_text, qualifiers, launch_bounds = cuda_to_c(_with_line_marker(expanded, pp_def, path))
        # Earlier device helpers are visible to later functions, as in the file.
        helpers = "\n".join(_helper_prototype(f) for f in device_functions.values())
        ast = parse_c(typedefs.text + helpers + "\n" + c_text, path)
        func = ast.ext[-1]
        if not isinstance(func, c_ast.FuncDef):
            raise CompileError(f"expected a function definition for '{definition.name}'", where)
        restore_cuda_storage(func)
        typedefs.resolve_scalars(func)
        func.decl.funcspec = qualifiers + [s for s in func.decl.funcspec if s not in qualifiers]
        shorthand = resolve_names(func, known, gvalues, parse_expression)
        if definition.is_kernel:
            kernels.append(Kernel.from_funcdef(func, definition, launch_bounds, shorthand))
        else:
            device_functions[definition.name] = func
    for kernel in kernels:
        kernel.file_variables = variables_used(kernel.funcdef, file_variables, device_functions)
    return Program(path, text, kernels, device_functions, launch_sites, macros, gvalues, passed,
                   dict(defines or {}), list(include_dirs or []))


@dataclass
class _Typedefs:
    """The file's namespace-scope typedefs that parse as C. Kernels see them all; a typedef of a scalar
    or vector type (`typedef float DATA_TYPE;`) is resolved to that type, as a macro would be, so the
    analyses and the emulator know the element type."""
    text: str
    scalars: dict[str, list[str]]

    def resolve_scalars(self, func: c_ast.FuncDef) -> None:
        for node in walk(func):
            if isinstance(node, c_ast.IdentifierType):
                names: list[str] = []
                for name in node.names:
                    names.extend(self.scalars.get(name, [name]))
                node.names = names


def _c_typedefs(expanded: str, path: str) -> _Typedefs:
    kept, scalars = [], {}
    for text in scanner.find_typedefs(expanded):
        try:
            decl = c_parser.CParser().parse(f"{_PARSEABLE_TYPES}\n{text}", filename="<typedefs>").ext[-1]
        except c_parser.ParseError:
            continue  # C++ (a template alias, a class): kernels that use it fail to parse, as before
        if decl.name in PRELUDE_NAMES:
            continue  # the prelude declares it already (size_t, a vector type)
        kept.append(text)
        if isinstance(decl.type, c_ast.TypeDecl) and isinstance(decl.type.type, c_ast.IdentifierType):
            scalars[decl.name] = decl.type.type.names
    for name, names in scalars.items():  # typedefs of typedefs
        while len(names) == 1 and names[0] in scalars and names[0] != name:
            names = scalars[names[0]]
        scalars[name] = names
    text = "".join(f'#line 1 "<typedefs>"\n{t}\n' for t in kept)
    return _Typedefs(text, scalars)


#: Types a typedef in host code may refer to without declaring them.
_PARSEABLE_TYPES = "typedef unsigned long size_t; typedef struct { float x, y; } float2; " \
                   "typedef struct { float x, y, z, w; } float4;"


def _helper_prototype(func: c_ast.FuncDef) -> str:
    from gpgpu_opt.codegen import CudaGenerator  # the printer knows how to print declarations

    decl = CudaGenerator(cuda_spellings=False).visit(func.decl)
    return f'#line 1 "<helpers>"\n{decl};'


def _with_line_marker(expanded: str, definition: scanner.FunctionDefinition, path: str) -> str:
    """The function's text preceded by a #line marker naming its line in the user's file."""
    before = expanded[:definition.start]
    file, line = path, 1
    last = None
    for m in re.finditer(r'^#line (\d+) "([^"]*)"[^\n]*\n', before, re.MULTILINE):
        last = m
    if last is not None:
        line = int(last.group(1)) + before.count("\n", last.end())
        file = last.group(2)
    else:
        line = before.count("\n") + 1
    column = definition.start - (before.rfind("\n") + 1)
    return f'#line {line} "{file}"\n' + " " * column + expanded[definition.start:definition.end]


def _check_braces(text: str, tokens: list[scanner.Token], path: str) -> None:
    """An unterminated block is reported at the brace that is never closed."""
    stack = []
    for tok in tokens:
        if tok.text == "{":
            stack.append(tok)
        elif tok.text == "}":
            if not stack:
                raise CompileError("extraneous closing brace ('}')", Location(path, tok.line, tok.column))
            stack.pop()
    if stack:
        tok = stack[-1]
        raise CompileError("expected '}' at end of input: this '{' is never closed",
                           Location(path, tok.line, tok.column))
