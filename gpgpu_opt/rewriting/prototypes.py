"""Keeping a requalified kernel's declarations in step with its definition.

A pass may make a read-only pointee `const` (and a pointer `__restrict__`). In C++ `const float *` and
`float *` make two overloads: a prototype left as the user wrote it (`__global__ void k(float *a);` before
main, in a header) then declares another function, the launch calls that undefined one, and the program
compiles but no longer links. `__restrict__` on the pointer itself is a top-level qualifier: it does not
change the signature (nvcc links a `float *a` prototype with a `float *__restrict__ a` definition).

So every declaration of a requalified kernel, in every file of the program, gets the definition's
qualifiers, parameter by parameter, in the user's text. Where a declaration cannot be edited with
certainty (its parameters do not read as the definition's, or a macro may declare the kernel where the
scanner cannot see it), the definition keeps its pointee qualifiers as declared instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.aliasing import host_view
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend import scanner
from gpgpu_opt.host_expr import split_top_level
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.signature import qualify

#: Qualifiers that do not change a parameter's type in a signature (a `const` does not go: `const float *`
#: and `float *` are two overloads; a top-level `const int n` is only not proved the same).
_RESTRICT = {"__restrict__", "__restrict", "restrict"}


@dataclass(frozen=True)
class Declaration:
    """`... __global__ ... name(params) ...;`: a kernel declared without its body."""
    name: str
    file: str
    params: tuple[int, int]   # the text between the parentheses, as offsets in the file
    template: bool            # a template's declaration, specialization or explicit instantiation
    alone: bool = True        # False: one of several declarators (`__global__ void a(float *), b(int);`)


def find_declarations(text: str, file: str, tokens: list[scanner.Token] | None = None) -> list[Declaration]:
    """Every declaration of a `__global__` function in `text` that is not a definition, at any scope
    (namespace, `extern "C"`, block, friend)."""
    tokens = scanner.tokenize(text) if tokens is None else tokens
    found = []
    statement = 0  # index of the first token of the current statement
    for i, tok in enumerate(tokens):
        if tok.kind == "pp" or tok.text in (";", "{", "}"):
            statement = i + 1
            continue
        if tok.kind != "ident" or i + 1 >= len(tokens) or tokens[i + 1].text != "(" or tok.text in \
                ("__launch_bounds__", "__align__", "__attribute__", "__declspec"):
            continue
        words = [t.text for t in tokens[statement:i]]
        if "__global__" not in words:
            continue
        close = scanner.matching(tokens, i + 1, "(", ")")
        several = "," in words or (close + 1 < len(tokens) and tokens[close + 1].text == ",")
        if close == -1 or not (several or _ends_declaration(tokens, close + 1)):
            continue
        found.append(Declaration(tok.text, file, (tokens[i + 1].end, tokens[close].start), "template" in words,
                                 not several))
    return found


def _ends_declaration(tokens: list[scanner.Token], k: int) -> bool:
    """After the parameter list: `;`, possibly after attributes (`__attribute__((...))`), not `{`."""
    while k < len(tokens) and tokens[k].text in ("__attribute__", "__launch_bounds__"):
        if k + 1 >= len(tokens) or tokens[k + 1].text != "(":
            return False
        k = scanner.matching(tokens, k + 1, "(", ")") + 1
        if k == 0:
            return False
    return k < len(tokens) and tokens[k].text == ";"


@dataclass
class Plan:
    """The edits to the program's declarations, by file, and the kernels whose definitions keep the
    declared pointee qualifiers (`with_declared_signature`)."""
    edits: dict[str, list[tuple[int, int, str]]]
    keep_declared: set[str]


def declaration_plan(program, results) -> Plan:
    """The plan for a program's pipeline results (template instantiations are written as
    specializations with the primary template's signature: nothing to do for them)."""
    files = {f.path: f.text for f in program.source_files()}
    kernels = []
    for r in results:
        if r.naive.instance is None:
            start, end = r.naive.source_span
            kernels.append((r.naive, r.optimized, program.text_of(r.naive.source_file)[start:end]))

    def expanded() -> str | None:
        try:
            return host_view(program)
        except CompileError:
            return None
    return plan(files, kernels, expanded)


def plan(files: dict[str, str], kernels: list[tuple[Kernel, Kernel, str]], expanded) -> Plan:
    """`files`: each user file's text by name; `kernels`: (naive, optimized, the naive definition's text)
    of each kernel written back as a plain (non-template) function; `expanded()`: the program
    preprocessed (None: it could not be), asked only if a kernel gained a pointee const."""
    declarations = [d for file, text in files.items() for d in find_declarations(text, file)]
    result = Plan({file: [] for file in files}, set())
    for naive, optimized, written in kernels:
        if not _gains_const(naive, optimized):
            continue  # __restrict__ alone: the declarations still declare the definition
        mine = [d for d in declarations if d.name == naive.name and not d.template]
        edits = [_edited(files[d.file], d, naive, optimized, written) for d in mine]
        if any(e is None for e in edits) or _hidden_by_macros(expanded(), naive.name, mine, files):
            result.keep_declared.add(naive.name)
            continue
        for d, new in zip(mine, edits):
            if new is not False:
                result.edits[d.file].append((*d.params, new))
    return result


def with_declared_signature(kernel: Kernel, naive: Kernel) -> Kernel:
    """`kernel` with the pointee `const` a pass added dropped again (its `__restrict__` kept): the
    signature its declarations state. The body only reads through such a pointer, so this changes no
    result."""
    kernel = kernel.copy()
    args = kernel.funcdef.decl.type.args
    for param, before in zip(args.params if args else [], naive.params):
        if isinstance(param, c_ast.Decl) and before.is_pointer and not before.is_const:
            _drop_pointee_const(param)
    return kernel


def _drop_pointee_const(decl: c_ast.Decl) -> None:
    t = decl.type
    while isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)):
        t = t.type
    if isinstance(t, c_ast.TypeDecl):
        t.quals = [q for q in t.quals or [] if q != "const"]
    decl.quals = [q for q in decl.quals or [] if q != "const"]


def _gains_const(naive: Kernel, optimized: Kernel) -> bool:
    return any(a.is_pointer and b.is_const and not a.is_const for a, b in zip(naive.params, optimized.params))


def _edited(text: str, declaration: Declaration, naive: Kernel, optimized: Kernel, written: str) -> str | bool | None:
    """The declaration's parameter list qualified as the definition's; False: it declares another
    overload (another number of parameters), left alone; None: it cannot be edited with certainty."""
    if not declaration.alone:
        return None
    start, end = declaration.params
    declared = [p for p in split_top_level(text[start:end]) if p]
    defined = _written_parameters(written, naive.name)
    if defined is None or len(defined) != len(naive.params) or len(optimized.params) != len(naive.params):
        return None
    if len(declared) != len(defined):
        return False
    out, cursor, inner = "", 0, text[start:end]
    for piece, definition, before, after in zip(declared, defined, naive.params, optimized.params):
        if not _same_type(piece, definition, before.name):
            return None
        at = inner.index(piece, cursor)
        out += inner[cursor:at] + qualify(piece, after).rstrip()
        cursor = at + len(piece)
    return out + inner[cursor:]


def _written_parameters(written: str, name: str) -> list[str] | None:
    tokens = scanner.tokenize(written)
    at = next((k for k, t in enumerate(tokens) if t.text == "(" and k and tokens[k - 1].text == name), None)
    close = scanner.matching(tokens, at, "(", ")") if at is not None else -1
    if close == -1:
        return None
    return [p for p in split_top_level(written[tokens[at].end:tokens[close].start]) if p]


def _same_type(declared: str, defined: str, name: str) -> bool:
    """Do the two parameters have one type, whatever their names (the declaration's may differ or be
    absent) and their `__restrict__`? Compared token by token: a typedef name against its type,
    or a macro against its expansion, is not proved the same and answers no."""
    def type_tokens(text: str) -> list[str]:
        return [t.text for t in scanner.tokenize(text) if t.text not in _RESTRICT]

    defined_tokens = type_tokens(defined)
    if defined_tokens.count(name) != 1:
        return False
    defined_tokens.remove(name)
    declared_tokens = type_tokens(declared)
    if declared_tokens == defined_tokens:
        return True  # an unnamed parameter
    return any(declared_tokens[:k] + declared_tokens[k + 1:] == defined_tokens
               for k, word in enumerate(declared_tokens) if word.isidentifier())


def _hidden_by_macros(expanded: str | None, name: str, declarations: list[Declaration],
                      files: dict[str, str]) -> bool:
    """Does the program as preprocessed declare `name` where its text does not (a macro that expands to a
    declaration, or to a parameter type), or could it not be preprocessed (`expanded` None)?"""
    if expanded is None:
        return True
    seen = {_spelled(files[d.file][slice(*d.params)]) for d in declarations}
    return any(_spelled(expanded[slice(*d.params)]) not in seen
               for d in find_declarations(expanded, "") if d.name == name and not d.template)


def _spelled(text: str) -> str:
    return " ".join(t.text for t in scanner.tokenize(text))
