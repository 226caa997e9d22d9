"""A light CUDA/C++ token scanner for whole source files.

pycparser only understands C, and a `.cu` file is C++ host code around C-like kernels. The scanner finds
what the compiler needs in the file without parsing the host code: function definitions with CUDA
qualifiers (their exact spans, so the output can replace them byte for byte), kernel launch sites
`k<<<grid, block>>>(args)`, and `#pragma` lines.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+|\\\n)
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8|[uUL])?R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)"|(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"|(?:u8|[uUL])?'(?:\\.|[^'\\\n])*')
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct><<<|>>>|::|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\.\.\.|[^\s\w])
    """,
    re.VERBOSE | re.DOTALL,
)

CUDA_FUNCTION_QUALIFIERS = {"__global__", "__device__", "__host__"}
CXX_ONLY_TOKENS = {"template", "class", "namespace", "new", "delete", "operator", "typename", "auto",
                   "constexpr", "decltype", "nullptr", "static_cast", "reinterpret_cast", "const_cast",
                   "dynamic_cast", "this", "using", "try", "catch", "throw", "::"}


@dataclass(frozen=True)
class Token:
    kind: str          # ident, number, string, punct, pp
    text: str
    start: int
    end: int
    line: int
    column: int


_DIRECTIVE = re.compile(r"[ \t]*#")


def tokenize(text: str) -> list[Token]:
    """Tokens of `text`; comments and whitespace dropped, preprocessor lines kept whole as `pp` tokens.
    A new list each call (callers may edit it) of tokens scanned once per text: a compile scans the same
    file text for many questions (launch sites, typedefs, declarations, templates, prototypes...). Whole
    files are kept apart from the functions' texts, which would otherwise push them out of a file of
    thousands of kernels (each then scanned again per kernel)."""
    return list(_scanned_file(text) if len(text) > _FILE_SIZED else _scanned(text))


#: Texts longer than this are kept as files (a function of a hundred lines is shorter).
_FILE_SIZED = 8192


@functools.lru_cache(maxsize=16)
def _scanned_file(text: str) -> tuple[Token, ...]:
    return _scanned.__wrapped__(text)


@functools.lru_cache(maxsize=256)
def _scanned(text: str) -> tuple[Token, ...]:
    """The tokens of `text` (a function of the text alone; `Token` is frozen, so results are shared)."""
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    at_line_start = True
    n = len(text)
    while pos < n:
        if at_line_start:
            m = _DIRECTIVE.match(text, pos)
            if m:
                end = pos
                while True:  # a directive runs to the first newline not escaped by a backslash
                    nl = text.find("\n", end)
                    if nl == -1:
                        end = n
                        break
                    if text[nl - 1] == "\\" or _inside_block_comment(text, pos, nl):
                        end = nl + 1
                        continue
                    end = nl
                    break
                tokens.append(Token("pp", text[pos:end], pos, end, line, pos - line_start + 1))
                line += text.count("\n", pos, end)
                if text.rfind("\n", pos, end) != -1:
                    line_start = text.rfind("\n", pos, end) + 1
                pos = end
                continue
        m = _TOKEN.match(text, pos)
        if m is None:  # an unterminated string or comment: take the rest of the line as one token
            end = text.find("\n", pos)
            end = n if end == -1 else end
            tokens.append(Token("bad", text[pos:end], pos, end, line, pos - line_start + 1))
            pos = end
            continue
        kind = m.lastgroup if m.lastgroup != "delim" else "string"
        if m.group("string") is not None:
            kind = "string"
        chunk = m.group(0)
        if kind == "nl":
            line += 1
            line_start = m.end()
            at_line_start = True
            pos = m.end()
            continue
        if kind not in ("ws", "comment"):
            tokens.append(Token(kind, chunk, pos, m.end(), line, pos - line_start + 1))
            at_line_start = False
        newlines = chunk.count("\n")
        if newlines:
            line += newlines
            line_start = pos + chunk.rfind("\n") + 1
            if kind == "comment":
                at_line_start = False
        pos = m.end()
    return tuple(tokens)


def directive_safe_lines(text: str) -> set[int]:
    """The (0-based) lines of `text` before which a new directive line may be inserted: a line that starts
    outside any comment, literal or directive running on from the line before (a `\\` continuation)."""
    lines = text.split("\n")
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    spanning = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:           # an unterminated comment or literal: nothing after it is safe
            spanning.append((pos, len(text) + 1))
            break
        if "\n" in m.group(0) and m.lastgroup not in ("nl", "ws"):
            spanning.append((m.start(), m.end()))
        pos = m.end()
    safe = set()
    k = 0
    for number, start in enumerate(starts):
        while k < len(spanning) and spanning[k][1] <= start:
            k += 1
        inside = k < len(spanning) and spanning[k][0] < start < spanning[k][1]
        continued = number > 0 and lines[number - 1].endswith("\\")
        if not inside and not continued:
            safe.add(number)
    return safe


def _inside_block_comment(text: str, start: int, pos: int) -> bool:
    opened = text.rfind("/*", start, pos)
    return opened != -1 and text.find("*/", opened, pos) == -1


@dataclass
class FunctionDefinition:
    name: str
    qualifiers: frozenset[str]
    start: int          # offset of the first token of the definition
    body_start: int     # offset of its `{`
    end: int            # offset just past its `}`
    line: int
    column: int
    cxx_constructs: list[str] = field(default_factory=list)

    @property
    def is_kernel(self) -> bool:
        return "__global__" in self.qualifiers


@dataclass
class LaunchSite:
    kernel: str
    start: int          # offset of the kernel name
    config_start: int   # offset of `<<<`
    config_end: int     # offset just past `>>>`
    config: list[str]   # grid, block[, shared bytes[, stream]] as written
    line: int
    column: int
    args: list[str] = field(default_factory=list)  # the call's arguments as written
    args_start: int = -1  # offset of the `(` after `>>>` (-1: no argument list found)
    args_end: int = -1    # offset just past its `)`
    file: str = ""        # the user file it is in (offsets and line are in its text); '': the main file
    #: The template arguments written at the launch (`k<float, 256><<<...>>>`), None where none are.
    template_args: list[str] | None = None


def matching(tokens: list[Token], i: int, open_: str, close: str) -> int:
    """Index of the token that closes the bracket at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j].text
        if t == open_:
            depth += 1
        elif t == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def find_functions(text: str, tokens: list[Token] | None = None) -> list[FunctionDefinition]:
    """Function definitions at namespace scope that carry a CUDA function qualifier."""
    tokens = tokenize(text) if tokens is None else tokens
    found: list[FunctionDefinition] = []
    header: list[int] = []  # indices of the tokens since the last statement boundary
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind == "pp":
            i += 1
            continue
        if tok.text in (";", "}"):
            header = []
            i += 1
            continue
        if tok.text == "{":
            words = [tokens[j].text for j in header]
            transparent = words[:1] == ["namespace"] or words[:2] == ["extern", '"C"']
            if transparent:
                header = []
                i += 1
                continue
            close = matching(tokens, i, "{", "}")
            if close == -1:
                close = len(tokens) - 1
            qualifiers = frozenset(w for w in words if w in CUDA_FUNCTION_QUALIFIERS)
            name = _function_name(tokens, header)
            if qualifiers and name and words and words[-1] in (")", "const"):
                first = tokens[header[0]]
                body = [t.text for t in tokens[header[0]:close + 1]]
                cxx = sorted({w for w in body if w in CXX_ONLY_TOKENS})
                if any(tokens[j].text == "&" and _is_reference_param(tokens, j) for j in header):
                    cxx.append("reference parameter")
                if "[" in body and any(body[k] == "[" and body[k + 1] in ("=", "&") and body[k + 2] == "]"
                                       for k in range(len(body) - 2)):
                    cxx.append("lambda")
                found.append(FunctionDefinition(name, qualifiers, first.start, tok.start, tokens[close].end,
                                                first.line, first.column, cxx))
            header = []
            i = close + 1
            continue
        header.append(i)
        i += 1
    return found


def outside_namespaces(text: str, offset: int, tokens: list[Token] | None = None) -> int:
    """`offset`, or where the outermost `namespace ... {` block around it starts: a place at file scope,
    whose names a launch anywhere in the file sees unqualified."""
    tokens = tokenize(text) if tokens is None else tokens
    stack: list[int | None] = []  # per open brace: the offset its namespace statement starts at, or None
    statement = 0                 # index of the first token of the current statement
    for i, tok in enumerate(tokens):
        if tok.start >= offset:
            break
        if tok.kind == "pp":
            statement = i + 1
        elif tok.text == "{":
            words = [t.text for t in tokens[statement:i]]
            stack.append(tokens[statement].start if "namespace" in words[:2] else None)
            statement = i + 1
        elif tok.text in ("}", ";"):
            if tok.text == "}" and stack:
                stack.pop()
            statement = i + 1
    return next((start for start in stack if start is not None), offset)


def _function_name(tokens: list[Token], header: list[int]) -> str | None:
    depth = 0
    for k, j in enumerate(header):
        t = tokens[j]
        if t.text == "(":
            if depth == 0 and k > 0:
                prev = tokens[header[k - 1]]
                if prev.kind == "ident" and prev.text not in ("__launch_bounds__", "__align__"):
                    return prev.text
            depth += 1
        elif t.text == ")":
            depth -= 1
    return None


def _is_reference_param(tokens: list[Token], j: int) -> bool:
    prev, nxt = tokens[j - 1], tokens[j + 1] if j + 1 < len(tokens) else None
    return prev.kind == "ident" and nxt is not None and nxt.kind == "ident"


def find_launch_sites(text: str, tokens: list[Token] | None = None) -> list[LaunchSite]:
    tokens = tokenize(text) if tokens is None else tokens
    sites = []
    for i, tok in enumerate(tokens[:-1]):
        if tokens[i + 1].text != "<<<":
            continue
        name, template_args = i, None
        if tok.text in (">", ">>"):  # k<float, 256><<<...>>>
            opening = _template_argument_list(tokens, i)
            if opening is None:
                continue
            name, template_args = opening - 1, _top_level_parts(text, tokens, opening + 1, i)
            template_args = [] if opening + 1 == i else template_args
        if tokens[name].kind != "ident":
            continue
        close = next((j for j in range(i + 2, len(tokens)) if tokens[j].text == ">>>"), -1)
        if close == -1:
            continue
        named = tokens[name]
        site = LaunchSite(named.text, named.start, tokens[i + 1].start, tokens[close].end,
                          _top_level_parts(text, tokens, i + 2, close), named.line, named.column,
                          template_args=template_args)
        if close + 1 < len(tokens) and tokens[close + 1].text == "(":
            end = matching(tokens, close + 1, "(", ")")
            if end != -1:
                site.args = _top_level_parts(text, tokens, close + 2, end) if end > close + 2 else []
                site.args_start, site.args_end = tokens[close + 1].start, tokens[end].end
        sites.append(site)
    return sites


def _template_argument_list(tokens: list[Token], close: int) -> int | None:
    """Index of the `<` that opens the template argument list closed at tokens[close] (`>` or `>>`), where
    an identifier names the template before it; None otherwise."""
    depth = 0
    for j in range(close, -1, -1):
        t = tokens[j].text
        if t in (">", ">>"):
            depth += len(t)
        elif t in ("<", "<<"):
            depth -= len(t)
            if depth == 0:
                return j if t == "<" and j > 0 and tokens[j - 1].kind == "ident" else None
            if depth < 0:
                return None
        elif t in (";", "{", "}", "<<<", ">>>"):
            return None
    return None


def _top_level_parts(text: str, tokens: list[Token], first: int, close: int) -> list[str]:
    """The comma-separated parts of tokens[first:close] (the closing bracket at `close`), as written."""
    parts, depth, part_start = [], 0, first
    for j in range(first, close + 1):
        t = tokens[j].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        if (t == "," and depth == 0) or j == close:
            parts.append(text[tokens[part_start].start:tokens[j - 1].end].strip())
            part_start = j + 1
    return parts


_GVALUE = re.compile(r"#\s*pragma\s+gCompiler\s+gValue\s+(\w+)\s+(\S+)")


def find_gvalue_pragmas(tokens: list[Token]) -> dict[str, str]:
    """`#pragma gCompiler gValue NAME VALUE` (the original compiler's way to give a symbol a value)."""
    values = {}
    for tok in tokens:
        if tok.kind == "pp":
            m = _GVALUE.match(tok.text.strip())
            if m:
                values[m.group(1)] = m.group(2)
    return values


def find_typedefs(text: str, tokens: list[Token] | None = None) -> list[str]:
    """The text of each `typedef ...;` at namespace scope (kernels may use the names they declare), and of
    each C-style struct or union definition there (`struct Node { int starting; };`), preceded by the
    typedef C++ implies for it (`typedef struct Node Node;`: in C++ the tag is a type name). A definition
    that is not plain C (base classes, methods, a template) fails to parse as C later and is dropped."""
    tokens = tokenize(text) if tokens is None else tokens
    found = []
    depth, start = 0, None
    statement_start = True  # the token is the first of a statement at namespace scope
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok.kind == "pp":
            statement_start = depth == 0 and start is None
            continue
        first, statement_start = statement_start, False
        if depth == 0 and start is None and first and tok.text in ("struct", "union"):
            definition = _aggregate_definition(text, tokens, i - 1)
            if definition is not None:
                found.append(definition[0])
                i = definition[1]
                statement_start = True
                continue
        if tok.text == "{":
            depth += 1
        elif tok.text == "}":
            depth -= 1
            statement_start = depth == 0 and start is None
        elif depth == 0 and start is None and first and tok.text == "using":
            alias = _alias_declaration(text, tokens, i - 1)
            if alias is not None:
                found.append(alias[0])
                i = alias[1]
                statement_start = True
        elif depth == 0 and start is None and tok.text == "typedef":
            start = tok.start
        elif depth == 0 and start is not None and tok.text == ";":
            found.append(text[start:tok.end])
            start = None
            statement_start = True
        elif depth == 0 and tok.text == ";":
            statement_start = True
    return found


#: Tokens of a type an alias may name for it to be a C typedef (a template, a qualified or computed type is not).
_NOT_IN_A_C_TYPE = frozenset({"<", "(", "::", "typename", "decltype", "template", "{"})


def _alias_declaration(text: str, tokens: list[Token], i: int) -> tuple[str, int] | None:
    """`using NAME = TYPE;` at tokens[i], C++'s spelling of `typedef TYPE NAME;`, as that typedef and the index
    of the token after its `;`; None for any other `using` (a namespace, a declaration, an alias of a
    template or of a qualified type)."""
    if i + 3 >= len(tokens) or tokens[i + 1].kind != "ident" or tokens[i + 2].text != "=":
        return None
    end = i + 3
    while end < len(tokens) and tokens[end].text != ";":
        if tokens[end].text in _NOT_IN_A_C_TYPE or tokens[end].kind == "pp":
            return None
        end += 1
    if end >= len(tokens) or end == i + 3:
        return None
    aliased = text[tokens[i + 3].start:tokens[end - 1].end]
    return f"typedef {aliased} {tokens[i + 1].text};", end + 1


def _aggregate_definition(text: str, tokens: list[Token], i: int) -> tuple[str, int] | None:
    """`struct X { ... };` at tokens[i] as `typedef struct X X; struct X { ... };` and the index of the
    token after its `;`; None where the statement is anything else (a declaration `struct X *p;`, a
    definition with declarators, base classes `struct X : Y {`)."""
    if i + 2 >= len(tokens) or tokens[i + 1].kind != "ident" or tokens[i + 2].text != "{":
        return None
    close = matching(tokens, i + 2, "{", "}")
    if close == -1 or close + 1 >= len(tokens) or tokens[close + 1].text != ";":
        return None
    keyword, tag = tokens[i].text, tokens[i + 1].text
    return f"typedef {keyword} {tag} {tag}; {text[tokens[i].start:tokens[close + 1].end]}", close + 2
