"""File-scope `__constant__` and `__device__` variables (`__constant__ float c_filter[25];`,
`__device__ int d_count;`): kernels use them by name, so the front end declares them; the analyses and
the emulator need their space, element type and dimensions. File-scope integer constants (`const int
threads_per_block = 512;`) are read as their values (find_file_constants)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import constant_value, ids_in, transform, walk
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend import scanner
from gpgpu_opt.host_expr import split_top_level
from gpgpu_opt.frontend.cuda_c import cuda_to_c

#: The storage qualifiers that put a variable in one of the GPU's memories.
_SPACES = {"__constant__": "constant", "__device__": "device"}
#: Other words a file-scope variable declaration may start with.
_STORAGE_WORDS = {"static", "extern", "const", "volatile", "__managed__"}


@dataclass(frozen=True)
class FileVariable:
    """A variable of the GPU's constant or global memory declared at file scope."""
    name: str
    space: str                      # 'constant' (read-only in kernels) or 'device' (global memory)
    decl: c_ast.Decl                # as parsed, CUDA qualifiers removed
    type_names: tuple[str, ...]     # the element type, `('float',)`, `('double3',)`
    #: The declared dimensions in elements (`float a[4][8]`: (4, 8)); () for a scalar; None when one
    #: is not a constant (`extern __device__ float a[];`).
    dims: tuple[int, ...] | None

    @property
    def is_array(self) -> bool:
        return self.dims is None or len(self.dims) > 0


def find_file_variables(expanded: str, typedef_text: str, path: str, parse_c) -> dict[str, FileVariable]:
    """The `__constant__`/`__device__` variables declared at namespace scope of the preprocessed file
    `expanded`. `parse_c(text, path)` parses C text (with the file's typedefs in `typedef_text`). A
    declaration that does not parse as C is left out: a kernel using it reports the name as before."""
    declarations = [(space, cuda_to_c(text)[0]) for space, text in _declarations(expanded)]
    found: dict[str, FileVariable] = {}
    for decl, space in _parse_halving(declarations, typedef_text, path, parse_c):
        element, dims = _element_and_dims(decl.type)
        if element is not None:
            found[decl.name] = FileVariable(decl.name, space, decl, element, dims)
    return found


def _parse_halving(batch, typedef_text: str, path: str, parse_c) -> list[tuple[c_ast.Decl, str]]:
    """The declarations of `batch` parsed all at once; where that fails, each half on its own, down to the
    single declarations that do not parse (left out)."""
    if not batch:
        return []
    try:
        return _parsed(batch, typedef_text, path, parse_c)
    except CompileError:
        if len(batch) == 1:
            return []
    middle = len(batch) // 2
    return _parse_halving(batch[:middle], typedef_text, path, parse_c) + \
        _parse_halving(batch[middle:], typedef_text, path, parse_c)


_BEGIN = "__gpgpu_opt_file_scope_begin"


def _parsed(batch, typedef_text: str, path: str, parse_c) -> list[tuple[c_ast.Decl, str]]:
    """(Decl, space) of each variable the declarations of `batch` declare (`int a, b;` declares two)."""
    text = "\n".join(f"int {_BEGIN}{k};\n{c_text}" for k, (_, c_text) in enumerate(batch))
    ast = parse_c(typedef_text + "\n" + text, path)
    out, space = [], None
    for ext in ast.ext:
        name = getattr(ext, "name", None) or ""
        if name.startswith(_BEGIN):
            space = batch[int(name[len(_BEGIN):])][0]
        elif space is not None and isinstance(ext, c_ast.Decl) and ext.name and \
                not isinstance(ext.type, c_ast.FuncDecl):
            out.append((ext, space))
    return out


def _declarations(expanded: str):
    """(space, C text) of each namespace-scope declaration that carries `__constant__` or `__device__`
    and is not a function: the qualifiers blanked to spaces, so columns stay right."""
    tokens = scanner.tokenize(expanded)
    depth, k = 0, 0
    while k < len(tokens):
        tok = tokens[k]
        if tok.kind == "pp":
            k += 1
            continue
        if tok.text == "{":
            depth += 1
        elif tok.text == "}":
            depth -= 1
        elif depth == 0 and tok.text in _SPACES and _starts_statement(tokens, k):
            end, space, is_function = _statement_end(tokens, k)
            if not is_function:
                yield space, _c_text(expanded, tokens, _statement_start(tokens, k), end)
            k = end + 1
            continue
        k += 1


def _starts_statement(tokens, k: int) -> bool:
    j = k - 1
    while j >= 0 and tokens[j].kind != "pp" and (tokens[j].text in _STORAGE_WORDS or tokens[j].text in _SPACES):
        j -= 1
    return j < 0 or tokens[j].kind == "pp" or tokens[j].text in (";", "}", "{")


def _statement_start(tokens, k: int) -> int:
    while k > 0 and tokens[k - 1].kind != "pp" and (tokens[k - 1].text in _STORAGE_WORDS
                                                   or tokens[k - 1].text in _SPACES):
        k -= 1
    return k


def _statement_end(tokens, k: int) -> tuple[int, str, bool]:
    """Index of the `;` ending the declaration at tokens[k] (or of a function body's `}`), its space
    (`__constant__` wins over `__device__`) and whether it declares a function."""
    space = "device"
    depth, seen_init, is_function = 0, False, False
    j = k
    while j < len(tokens):
        text = tokens[j].text
        if text == "__constant__":
            space = "constant"
        if depth == 0 and text == "=":
            seen_init = True
        elif depth == 0 and text == "(" and not seen_init and tokens[j - 1].kind == "ident" \
                and tokens[j - 1].text not in _SPACES and tokens[j - 1].text != "__align__":
            is_function = True
        if text in "({[":
            depth += 1
        elif text in ")}]":
            depth -= 1
            if depth == 0 and text == "}" and is_function:
                return j, space, True
        elif depth == 0 and text == ";":
            return j, space, is_function
        j += 1
    return len(tokens) - 1, space, is_function


def _c_text(expanded: str, tokens, first: int, last: int) -> str:
    """The declaration's text, preceded by a #line marker naming its line, CUDA words blanked."""
    words = [" " * len(t.text) if t.text in _SPACES or t.text in ("extern", "__managed__") else t.text
             for t in tokens[first:last + 1]]
    file, line = _line_in_file(expanded, tokens[first].start) or ("<file>", tokens[first].line)
    return f'#line {line} "{file}"\n' + " ".join(words)


def _line_in_file(expanded: str, offset: int):
    """(file, line) of `offset` in the preprocessed text, through its #line markers."""
    import re

    before = expanded[:offset]
    last = None
    for m in re.finditer(r'^#line (\d+) "([^"]*)"[^\n]*\n', before, re.MULTILINE):
        last = m
    if last is None:
        return None
    return last.group(2), int(last.group(1)) + before.count("\n", last.end())


def _element_and_dims(type_node) -> tuple[tuple[str, ...] | None, tuple[int, ...] | None]:
    dims: list[int] | None = []
    while isinstance(type_node, c_ast.ArrayDecl):
        value = constant_value(type_node.dim) if type_node.dim is not None else None
        if value is None or value <= 0:
            dims = None
        elif dims is not None:
            dims.append(value)
        type_node = type_node.type
    if isinstance(type_node, c_ast.TypeDecl) and isinstance(type_node.type, c_ast.IdentifierType):
        return tuple(type_node.type.names), tuple(dims) if dims is not None else None
    return None, None


def variables_used(func: c_ast.FuncDef, variables: dict[str, FileVariable],
                   device_functions: dict[str, c_ast.FuncDef]) -> dict[str, FileVariable]:
    """The file variables `func` names, itself or through the device functions it calls (by name),
    unless a local or parameter of the same name hides it."""
    used: dict[str, FileVariable] = {}
    seen: set[str] = set()
    pending = [func]
    while pending:
        f = pending.pop()
        hidden = {n.name for n in walk(f) if isinstance(n, c_ast.Decl) and n.name} - {f.decl.name}
        for name in ids_in(f.body):
            if name in variables and name not in hidden:
                used[name] = variables[name]
            if name in device_functions and name not in seen:
                seen.add(name)
                pending.append(device_functions[name])
    return used


# -- file-scope integer constants ----------------------------------------------------------------------

_CONSTANT_DECL = re.compile(r"(?:static\s+)?(?:const|constexpr)\s+(?:static\s+)?(?P<type>int|unsigned(?:\s+int)?|"
                            r"signed(?:\s+int)?)\s+(?:const\s+)?(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<init>[^,;]+)",
                            re.DOTALL)


def find_file_constants(expanded: str) -> dict[str, c_ast.Constant]:
    """The namespace-scope `const int N = 512;` (also `static`, `constexpr`, `unsigned`) of the preprocessed
    file whose initializer is an integer constant expression (of literals and earlier such constants):
    name -> its value as a literal of its type, which a kernel may use wherever it names the constant. A
    name declared twice is left out (which one a kernel sees is not known here)."""
    found: dict[str, c_ast.Constant] = {}
    seen: set[str] = set()
    for text in _file_scope_statements(expanded):
        m = _CONSTANT_DECL.fullmatch(text.strip())
        if m is None:
            continue
        name = m.group("name")
        value = _initializer_value(m.group("init"), found)
        if name in seen or value is None:
            found.pop(name, None)
            seen.add(name)
            continue
        seen.add(name)
        unsigned = m.group("type").startswith("unsigned")
        if (unsigned and 0 <= value < 2 ** 32) or (not unsigned and -2 ** 31 <= value < 2 ** 31):
            found[name] = c_ast.Constant("unsigned int" if unsigned else "int", f"{value}u" if unsigned else str(value))
    return found


def find_enum_constants(expanded: str, constants: dict[str, c_ast.Constant]) -> dict[str, c_ast.Constant]:
    """The enumerators of the namespace-scope unscoped enums (`enum Mode { HALVE = 2, QUARTER };`), each with
    its value as an `int` literal, counted as C++ counts them (the one before plus 1, from 0); `constants`:
    the file's constants an enumerator's value may use. An enumerator after one whose value is not a constant
    expression here, one outside `int`, and a name declared twice are left out. `enum class` enumerators are
    named with their enum (`Mode::HALVE`), which kernels are not read with."""
    tokens = scanner.tokenize(expanded)
    found: dict[str, c_ast.Constant] = {}
    repeated: set[str] = set()
    depth = 0
    for k, tok in enumerate(tokens):
        if tok.text in ("{", "}"):
            depth += 1 if tok.text == "{" else -1
        if depth != 0 or tok.text != "enum" or k + 1 >= len(tokens) or tokens[k + 1].text in ("class", "struct"):
            continue
        opening = next((j for j in range(k + 1, min(k + 40, len(tokens))) if tokens[j].text in ("{", ";")), None)
        if opening is None or tokens[opening].text != "{":
            continue
        close = scanner.matching(tokens, opening, "{", "}")
        if close == -1:
            continue
        body = expanded[tokens[opening].end:tokens[close].start]
        for name, value in _enumerators(body, {**constants, **found}):
            if name in found or name in constants:
                repeated.add(name)
            if value is not None and -2 ** 31 <= value < 2 ** 31:
                found[name] = c_ast.Constant("int", str(value))
    return {name: value for name, value in found.items() if name not in repeated}


def _enumerators(body: str, constants: dict[str, c_ast.Constant]):
    """(name, value or None) of each enumerator of an enum's body, in order; None from the first whose value
    cannot be computed here on."""
    value: int | None = -1
    for part in split_top_level(body):
        name, _, init = part.strip().partition("=")
        name = name.strip()
        if not name:
            continue
        if init.strip():
            value = _initializer_value(init.strip(), constants)
        elif value is not None:
            value += 1
        yield name, value
        if value is not None:
            constants = {**constants, name: c_ast.Constant("int", str(value))}


def _file_scope_statements(expanded: str):
    """The text of each statement at namespace depth 0 that is not a function or a directive."""
    tokens = scanner.tokenize(expanded)
    depth, start = 0, None
    for k, tok in enumerate(tokens):
        if tok.kind == "pp":
            start = None
            continue
        if tok.text == "{":
            depth, start = depth + 1, None
        elif tok.text == "}":
            depth, start = depth - 1, None
        elif depth == 0 and tok.text == ";":
            if start is not None:
                yield expanded[tokens[start].start:tok.start]
            start = None
        elif depth == 0 and start is None:
            start = k


def _initializer_value(text: str, constants: dict[str, c_ast.Constant]) -> int | None:
    from pycparser import c_parser

    try:
        init = c_parser.CParser().parse(f"int __v = {text};", filename="<constant>").ext[-1].init
    except Exception:  # noqa: BLE001 - pycparser raises several kinds of errors; all mean "not a C constant"
        return None
    for n in walk(init):
        for attr in ("left", "right", "expr"):
            child = getattr(n, attr, None)
            if isinstance(child, c_ast.ID) and child.name in constants:
                setattr(n, attr, constants[child.name])
    if isinstance(init, c_ast.ID):
        init = constants.get(init.name, init)
    return constant_value(init)


def substitute_file_constants(func: c_ast.FuncDef, constants: dict[str, c_ast.Constant]) -> None:
    """Each use of a file-scope integer constant in `func` becomes its value, unless the function declares
    something of that name itself (then which one a use means depends on scopes: left as written)."""
    declared = {n.name for n in walk(func) if isinstance(n, c_ast.Decl) and n.name} - {func.decl.name}
    mine = {name: value for name, value in constants.items() if name not in declared}
    if not mine:
        return

    def replace(n):
        if isinstance(n, c_ast.ID) and n.name in mine:
            return c_ast.Constant(mine[n.name].type, mine[n.name].value, n.coord)
        return None
    transform(func.body, replace, skip_member_names=True)
