"""Reading a whole .cu file into a Program: its text, its kernels as c_ast, its launch sites."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from pycparser import c_ast, c_parser

from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import CompileError, Diagnostics, Location
from gpgpu_opt.frontend import scanner, templates
from gpgpu_opt.frontend.cuda_c import PRELUDE_NAMES, cuda_to_c, parse_c, restore_cuda_storage
from gpgpu_opt.frontend.cxx_lowering import reference_parameters
from gpgpu_opt.frontend.file_scope import find_enum_constants, find_file_constants, find_file_variables, substitute_file_constants, \
    variables_used
from gpgpu_opt.frontend.inline import NotInlined, ReferenceHelper, inline_reference_helpers
from gpgpu_opt.frontend.names import resolve_names
from gpgpu_opt.frontend.nvcc_verdict import reject_what_nvcc_rejects
from gpgpu_opt.frontend.preprocess import preprocess_program
from gpgpu_opt.frontend.source_files import SourceFile, check_live_bytes, read_source_file
from gpgpu_opt.frontend.struct_layouts import pointer_structs, uniform_layouts
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.frontend.dereferences import subscript_dereferences
from gpgpu_opt.frontend.depth import too_deep_to_analyse, too_deep_to_read
from gpgpu_opt.targets import DEFAULT_TARGET, Target, get_target


@dataclass
class Program:
    path: str
    text: str                                   # the main file exactly as the user wrote it
    kernels: list[Kernel]
    device_functions: dict[str, c_ast.FuncDef]  # parsed __device__ helpers, by name
    launch_sites: list[scanner.LaunchSite]      # in every user file (LaunchSite.file says which)
    macros: dict[str, str]                      # object-like macros after preprocessing
    gvalues: dict[str, str]                     # `#pragma gCompiler gValue NAME VALUE`
    passed_through: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)  # -D, to preprocess the file again (host view)
    include_dirs: list[str] = field(default_factory=list)  # -I
    #: The main file, then each user file it includes (directly or not) in the order the preprocessor
    #: opened them. Empty for a Program built by hand: the main file alone.
    files: list[SourceFile] = field(default_factory=list)

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def source_files(self) -> list[SourceFile]:
        return self.files or [SourceFile(self.path, self.text)]

    @property
    def main_file(self) -> str:
        """The main file's name among source_files() (as read: `path` may be relabelled after loading)."""
        return self.source_files()[0].path

    def text_of(self, path: str) -> str:
        """The text of a user file by the name kernels and launch sites give it ('' or None: the main file)."""
        if not path or path == self.path or path == self.main_file:
            return self.text
        for f in self.files:
            if f.path == path:
                return f.text
        raise KeyError(path)

    @property
    def is_multi_file(self) -> bool:
        return len(self.source_files()) > 1

    @property
    def code_in_included_files(self) -> bool:
        """Does an included file hold a kernel, a function passed through or a launch site?"""
        main_functions = {d.name for d in scanner.find_functions(self.text)}
        return any(k.source_file for k in self.kernels) or any(s.file for s in self.launch_sites) \
            or any(name not in main_functions for name in self.passed_through)


def parse_expression(text: str) -> c_ast.Node:
    """Parse a C expression (used for shorthand definitions and generated snippets)."""
    ast = c_parser.CParser().parse(f"int __e = {text};", filename="<expr>")
    return ast.ext[0].init


@dataclass
class _FileScan:
    """What the scanner finds in one user file, before any parsing."""
    file: SourceFile
    functions: list[scanner.FunctionDefinition]
    launch_sites: list[scanner.LaunchSite]
    gvalues: dict[str, str]
    tokens: list[scanner.Token]
    #: The file's braces do not pair up as written: an error unless the preprocessor's view pairs them (the
    #: branches of an #ifdef may each open a block that one closing brace ends).
    unpaired_braces: CompileError | None = None


def _scan(file: SourceFile, main: bool = False) -> _FileScan:
    """A user file's functions and launch sites; damage to the whole file (an unterminated comment or
    block) is an error. Launch sites of an included file name it (those of the main file name none)."""
    tokens = scanner.tokenize(file.text)
    bad = next((t for t in tokens if t.kind == "bad"), None)
    if bad is not None:
        what = "comment" if bad.text.startswith("/*") else "string or character literal"
        raise CompileError(f"unterminated {what}", Location(file.path, bad.line, bad.column))
    # `/*` outside a string always opens a comment: scanned as `/` then `*`, it is one never closed.
    opened = next((a for a, b in zip(tokens, tokens[1:]) if a.text == "/" and b.text == "*" and b.start == a.end),
                  None)
    if opened is not None:
        raise CompileError("unterminated comment", Location(file.path, opened.line, opened.column))
    try:
        _check_braces(file.text, tokens, file.path)
        unpaired = None
    except CompileError as err:
        unpaired = err
    sites = scanner.find_launch_sites(file.text, tokens)
    for site in sites:
        site.file = "" if main else file.path
    return _FileScan(file, scanner.find_functions(file.text, tokens), sites, scanner.find_gvalue_pragmas(tokens),
                     tokens, unpaired)


#: Functions of CUDA's headers that gpgpu-opt's own outputs call and the emulator runs, but the passes do not
#: read (cp.async from <cuda_pipeline.h>): known only where an output is read back to be emulated.
OUTPUT_BUILTINS = frozenset({"__pipeline_memcpy_async", "__pipeline_commit", "__pipeline_wait_prior"})


def load_program(path: str, defines: dict[str, str] | None = None, include_dirs: list[str] | None = None,
                 diagnostics: Diagnostics | None = None, target: Target | None = None,
                 text: str | None = None, to_emulate: bool = False) -> Program:
    """Read, preprocess (as nvcc does device code for `target`, the default target if None) and parse a
    program: the file and the user files it includes. A function that cannot be read passes through with
    a note; the others are still parsed. `text`: the main file's text as a pass rewrote it (grid_stride),
    instead of what is on disk. A function that nvcc rejects is an error, and its notes are not printed.
    `to_emulate`: the program is only emulated (an output read back), so OUTPUT_BUILTINS are known."""
    diagnostics = diagnostics or Diagnostics()
    held = Diagnostics(quiet=True)
    program = _load_program(path, defines, include_dirs, held, target, text, OUTPUT_BUILTINS if to_emulate else ())
    diagnostics.extend(held.notes)
    return program


def _load_program(path: str, defines: dict[str, str] | None, include_dirs: list[str] | None,
                  diagnostics: Diagnostics, target: Target | None, text: str | None,
                  builtins: frozenset[str] | tuple = ()) -> Program:
    target = target or get_target(DEFAULT_TARGET)
    if text is not None and not os.path.exists(path):
        main = SourceFile(path, text)       # a program that is no file (standard input)
    else:
        main = read_source_file(path)
        main = replace(main, text=text) if text is not None else main
    scans = [_scan(main, main=True)]
    preprocessed = preprocess_program(main.text, path, defines, include_dirs, cuda_arch=target.cuda_arch)
    for real, name in preprocessed.user_files.items():
        scans.append(_scan(read_source_file(real, name)))
    expanded, macros = preprocessed.text, preprocessed.macros
    check_live_bytes(expanded, [scan.file for scan in scans])
    unpaired = next((scan.unpaired_braces for scan in scans if scan.unpaired_braces), None)
    if unpaired is not None and not _braces_pair(expanded):
        raise unpaired
    expanded_list = scanner.find_functions(expanded)
    expanded_functions = {f.name: f for f in expanded_list}
    overloaded = _overloaded(expanded_list, expanded)
    typedefs = _c_typedefs(expanded, path)
    gvalues = {k: v for scan in scans for k, v in scan.gvalues.items()}
    # In the order of the translation unit (an included header's helpers before the kernels that call them).
    definitions = sorted(((scan.file, d) for scan in scans for d in scan.functions),
                         key=lambda fd: expanded_functions[fd[1].name].start if fd[1].name in expanded_functions else -1)

    program = Program(path, main.text, [], {}, [s for scan in scans for s in scan.launch_sites], macros, gvalues,
                      [], dict(defines or {}), list(include_dirs or []), [scan.file for scan in scans])
    if not any(d.is_kernel for _, d in definitions):
        diagnostics.note(f"no __global__ kernel in '{path}'" + (" or the files it includes" if len(scans) > 1
                                                               else "") + "; nothing to optimize",
                         Location(path, 1, 1))
        return program

    file_variables = find_file_variables(expanded, typedefs.text, path, parse_c)
    file_constants = find_file_constants(expanded)
    file_constants.update(find_enum_constants(expanded, file_constants))
    known = set(PRELUDE_NAMES) | set(builtins) | {d.name for _, d in definitions} | set(file_variables) | set(file_constants)
    unreadable: dict[str, str] = {}  # device functions passed through -> why
    unparsed: list[tuple[SourceFile, scanner.FunctionDefinition]] = []  # nvcc may reject these (below)
    reference_helpers: dict[str, ReferenceHelper] = {}  # helpers taking C++ references: inlined where called
    template_uses = {scan.file.path: templates.TemplateUses(scan.file.text, scan.tokens, scan.launch_sites,
                                                            macros, expanded) for scan in scans}
    for file, definition in definitions:
        where = Location(file.path, definition.line, definition.column)
        pp_def = expanded_functions.get(definition.name)
        if pp_def is None:
            _pass_through(program, diagnostics, definition, "it could not be found after preprocessing", where,
                          unreadable)
            continue
        if definition.name in overloaded:
            _pass_through(program, diagnostics, definition, f"it is overloaded ({overloaded[definition.name]} "
                          "definitions): launches and calls are matched to functions by name here", where,
                          unreadable)
            continue
        deep = too_deep_to_read(expanded[pp_def.start:pp_def.end])
        if deep:
            _pass_through(program, diagnostics, definition, deep, where, unreadable)
            continue
        # C++ lowered to C, one unit per instantiation of a template kernel (frontend/templates.py)
        lowered = templates.function_units(definition, expanded[pp_def.start:pp_def.end],
                                           template_uses[file.path])
        for why in lowered.notes:
            diagnostics.note(why, where, kernel=definition.name)
        if not lowered.units:
            program.passed_through.append(definition.name)
            if not definition.is_kernel:
                unreadable[definition.name] = "it uses C++ that has no C meaning here"
        for unit in lowered.units:
            unit_definition = unit.definition or definition
            try:
                func, launch_bounds, shorthand = _parse_unit(unit, pp_def, expanded, path, typedefs,
                                                             program.device_functions, known, gvalues)
            except CompileError as err:
                unparsed.append((file, definition))
                _pass_through(program, diagnostics, unit_definition, f"{err.message} at {err.location or where}",
                              where, unreadable)
                continue
            deep = too_deep_to_analyse(func)
            if deep:
                _pass_through(program, diagnostics, unit_definition, deep, where, unreadable)
                continue
            substitute_file_constants(func, file_constants)
            # a kernel or helper calling a helper passed through cannot be analysed either
            calls = sorted(_called_functions(func) & set(unreadable))
            if calls:
                _pass_through(program, diagnostics, unit_definition, f"it calls '{calls[0]}', which is passed "
                              f"through ({unreadable[calls[0]]})", where, unreadable)
                continue
            try:
                func, inlined = inline_reference_helpers(func, reference_helpers)
            except NotInlined as why:
                _pass_through(program, diagnostics, unit_definition, f"a helper taking C++ references is not "
                              f"inlined: {why}", where, unreadable)
                continue
            if inlined and definition.is_kernel:
                diagnostics.note(f"'{unit_definition.name}': inlined {', '.join(inlined)} (__device__ helpers taking "
                                 f"C++ references)", where, kernel=definition.name)
            references = () if definition.is_kernel else reference_parameters(expanded[pp_def.start:pp_def.end])
            if references:
                reference_helpers[definition.name] = ReferenceHelper(func, references)
            elif definition.is_kernel:
                subscript_dereferences(func)  # `*(b + i) = s;` is an access, seen by every analysis
                program.kernels.append(Kernel.from_funcdef(func, unit_definition, launch_bounds, shorthand,
                                                           source_file="" if file is main else file.path,
                                                           instance=unit.instance))
            else:
                program.device_functions[definition.name] = func
    if unparsed and text is None:
        reject_what_nvcc_rejects(path, defines or {}, include_dirs or [], target, unparsed)
    layouts, members = _struct_layouts(typedefs, path)
    for kernel in program.kernels:
        kernel.file_variables = variables_used(kernel.funcdef, file_variables, program.device_functions)
        kernel.struct_layouts = {p.base_type: layouts[p.base_type] for p in kernel.params if p.base_type in layouts}
        kernel.struct_members = {p.base_type: members[p.base_type] for p in kernel.params
                                 if not p.is_pointer and p.base_type in members}
    return program


def _overloaded(functions: list[scanner.FunctionDefinition], expanded: str) -> dict[str, int]:
    """Names the preprocessed program defines more than once (overloads: `scale(float *)` and `scale(double
    *)`), with how many times; a template and its explicit specializations are one name (frontend/templates)."""
    counts: dict[str, int] = {}
    for f in functions:
        if not expanded[f.start:f.end].lstrip().startswith("template"):
            counts[f.name] = counts.get(f.name, 0) + 1
    return {name: count for name, count in counts.items() if count > 1}


def _pass_through(program: Program, diagnostics: Diagnostics, definition: scanner.FunctionDefinition, why: str,
                  where: Location, unreadable: dict[str, str]) -> None:
    diagnostics.note(f"'{definition.name}' passed through unchanged: {why}", where, kernel=definition.name)
    program.passed_through.append(definition.name)
    if not definition.is_kernel:
        unreadable[definition.name] = why


def _parse_unit(unit: templates.FunctionUnit, pp_def: scanner.FunctionDefinition, expanded: str, path: str,
                typedefs: "_Typedefs", device_functions: dict[str, c_ast.FuncDef], known: set[str],
                gvalues: dict[str, str]) -> tuple[c_ast.FuncDef, list[str], list[str]]:
    """One function (or one instantiation of a template kernel) of the preprocessed program as c_ast (the
    function, its `__launch_bounds__`, the shorthand names it uses). A CompileError says why it cannot be
    read: the caller passes it through."""
    pp_def = unit.pp_definition or pp_def
    c_text, qualifiers, launch_bounds = cuda_to_c(_with_line_marker(expanded, pp_def, path, unit.text))
    # Earlier device helpers are visible to later functions, as in the file.
    helpers = "\n".join(_helper_prototype(f) for f in device_functions.values())
    ast = parse_c(typedefs.text + helpers + "\n" + c_text, path)
    func = ast.ext[-1]
    if not isinstance(func, c_ast.FuncDef):
        raise CompileError(f"expected a function definition for '{pp_def.name}'")
    restore_cuda_storage(func)
    typedefs.resolve_scalars(func)
    func.decl.funcspec = qualifiers + [s for s in func.decl.funcspec if s not in qualifiers]
    shorthand = resolve_names(func, known, gvalues, parse_expression)
    return func, launch_bounds, shorthand


def _struct_layouts(typedefs: "_Typedefs", path: str) -> tuple[dict, dict]:
    """The structs of the file whose layout is certain, and the structs of pointers, by type name
    (frontend/struct_layouts.py)."""
    try:
        ast = parse_c(typedefs.text, path)
    except CompileError:
        return {}, {}
    return uniform_layouts(ast), pointer_structs(ast)


def _called_functions(func: c_ast.FuncDef) -> set[str]:
    return {n.name.name for n in walk(func) if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)}


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
            # the earlier kept ones too: a struct's field may have a type the file declared before it
            decl = c_parser.CParser().parse("\n".join([_PARSEABLE_TYPES, *kept, text]), filename="<typedefs>").ext[-1]
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


def _with_line_marker(expanded: str, definition: scanner.FunctionDefinition, path: str,
                      text: str | None = None) -> str:
    """The function's text (`text`: the same lines rewritten) preceded by a #line marker naming its line in
    the user's file."""
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
    body = expanded[definition.start:definition.end] if text is None else text
    return f'#line {line} "{file}"\n' + " " * column + body


def _braces_pair(text: str) -> bool:
    try:
        _check_braces(text, scanner.tokenize(text), "")
    except CompileError:
        return False
    return True


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
