"""Host variables as a launch site sees them: declarations scoped to the host function around the site (and
file scope), with the writes between the declaration and the site.

A scalar has a value when it is declared once in scope with an initializer and never written: no
assignment, `++`, `&v` (which could write it), reference bound to it, or bare argument of a function the
compiler does not know (a C++ reference parameter could write it). A `dim3` may also be written by plain
statements `g.x = E;` / `g = dim3(...);` between its declaration and the site, at the declaration's own
nesting (not in a loop, a branch or a condition): those are applied in order. A member `g.x = v;` copies
v's value: where v changes later, g.x is what v held there, when that is proved (_snapshot). Any other
write, or one that a later write of what E reads could change, makes the value unknown, with the reason;
never the declaration's value."""
from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from gpgpu_opt.frontend.scanner import Token, tokenize
from gpgpu_opt.host_expr import _COMMENT, _SCALAR_DECL, HostDeclarations, split_top_level

_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
_STEP = {"++", "--"}
_DECL_TYPES = {"dim3", "int", "unsigned", "long", "short", "size_t", "float", "double", "char", "bool", "auto",
               "const", "static", "constexpr", "signed"}
#: Functions whose arguments are passed by value (C, CUDA and its libraries): a bare variable there is read.
_BY_VALUE_CALLEE = re.compile(r"^(?:cuda|cu|cublas|cufft|curand|cusparse|nvtx)\w*$|^(?:printf|fprintf|sprintf|"
                              r"snprintf|puts|malloc|calloc|realloc|free|memset|memcpy|exit|abs|fabs|sqrt|"
                              r"ceil|floor|min|max|fmin|fmax|pow|assert|dim3|sizeof|srand|rand|atoi|atof)$")


@dataclass(frozen=True)
class Write:
    offset: int
    straight: bool          # `g.x = E;` / `g = E;` at statement level, no loop or branch around it
    axis: int | None        # 0..2 for `g.x = E`, None for the whole variable
    value: str              # E as written ('' when not straight)
    depth: int              # braces around it


class HostFunction:
    """The tokens of the host text with their brace and parenthesis depth."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = [t for t in tokenize(text) if t.kind != "pp"]
        self.starts = [t.start for t in self.tokens]
        self.brace, self.paren = [], []
        #: Per token, the innermost `{` open before it (-1: none); per `{`, the `{` around it and its `}`. A
        #: block is found from them in a few steps (scanning for it per launch site, and the writes of a name
        #: over all tokens, made a function of thousands of launches quadratic).
        self.innermost_open, self.outer_open, self.close_of = [], {}, {}
        self.positions: dict[str, list[int]] = {}    # identifier -> its token indices, in order
        self.memo: dict[tuple, object] = {}          # writes_of's answers (they depend on their range only)
        braces = parens = 0
        opened: list[int] = []
        for i, t in enumerate(self.tokens):
            braces -= t.text == "}"
            parens -= t.text in (")", "]")
            if t.text == "}" and opened:
                self.close_of[opened.pop()] = i
            self.innermost_open.append(opened[-1] if opened else -1)
            self.brace.append(braces)
            self.paren.append(parens)
            if t.text == "{":
                self.outer_open[i] = opened[-1] if opened else -1
                opened.append(i)
            if t.kind == "ident":
                self.positions.setdefault(t.text, []).append(i)
            braces += t.text == "{"
            parens += t.text in ("(", "[")

    def index_at(self, offset: int) -> int:
        return bisect.bisect_left(self.starts, offset)

    def enclosing_block(self, i: int, depth: int) -> tuple[int, int]:
        """Token range (open, close) of the block at `depth` around token i (i itself when it opens it);
        (-1, len) for file scope."""
        if depth == 0:
            return -1, len(self.tokens)
        if i < len(self.tokens) and self.tokens[i].text == "{" and self.brace[i] == depth - 1:
            start = i
        else:
            start = self.innermost_open[i] if i < len(self.tokens) else -1
            while start != -1 and self.brace[start] != depth - 1:
                start = self.outer_open[start]
            if start == -1:
                raise StopIteration(f"no block at depth {depth} around token {i}")
        return start, self.close_of.get(start, len(self.tokens))

    def uses(self, name: str, lo: int, hi: int) -> list[int]:
        """The token indices of identifier `name` in lo..hi."""
        found = self.positions.get(name, [])
        return found[bisect.bisect_left(found, lo):bisect.bisect_left(found, hi)]

    def function_parameters(self, open_brace: int) -> set[str]:
        """The names in the parameter list before a function body's `{`."""
        j = open_brace - 1
        while j >= 0 and self.tokens[j].text != ")":
            if self.tokens[j].text in (";", "}", "{"):
                return set()
            j -= 1
        names, depth = set(), 0
        while j >= 0:
            t = self.tokens[j].text
            depth += t == ")"
            depth -= t == "("
            if depth == 0:
                break
            if self.tokens[j].kind == "ident":
                names.add(t)
            j -= 1
        return names


@dataclass
class Visible:
    """A declaration as the site sees it: its token index, its initializer, and every write in scope."""
    name: str
    index: int
    writes: list[Write]
    reason: str | None = None   # why its writes cannot be followed


def writes_of(fn: HostFunction, name: str, lo: int, hi: int, declaration: int) -> tuple[list[Write], str | None]:
    """Every use of `name` in tokens lo..hi that may write it; (writes, reason) with a reason when some write
    cannot be followed (asked once per range: the same declaration is asked at every launch it reaches)."""
    key = (name, lo, hi, declaration)
    if key not in fn.memo:
        fn.memo[key] = _writes_of(fn, name, lo, hi, declaration)
    writes, reason = fn.memo[key]
    return list(writes), reason


def _writes_of(fn: HostFunction, name: str, lo: int, hi: int, declaration: int) -> tuple[list[Write], str | None]:
    toks, writes, reason = fn.tokens, [], None
    for i in fn.uses(name, max(lo, 0), min(hi, len(toks))):
        t = toks[i]
        if i == declaration:
            continue
        prev = toks[i - 1].text if i > 0 else ";"
        if i > 0 and toks[i - 1].text in (".", "->", "::"):
            continue                                  # a member of something else named alike
        axis, k = None, i + 1
        if k + 1 < len(toks) and toks[k].text == "." and toks[k + 1].text in ("x", "y", "z"):
            axis, k = "xyz".index(toks[k + 1].text), k + 2
        after = toks[k].text if k < len(toks) else ";"
        if after in _ASSIGN or after in _STEP or prev in _STEP:
            straight = after == "=" and prev in (";", "{", "}") and fn.paren[i] == 0
            end = _statement_end(fn, k)
            value = fn.text[toks[k].end:toks[end].start].strip() if straight and end < len(toks) else ""
            writes.append(Write(t.start, straight and bool(value), axis, value, fn.brace[i]))
        elif prev == "&" and _unary(toks, i - 1):
            reason = reason or f"its address is taken at line {t.line}"
        elif _reference_bound(toks, i):
            reason = reason or f"a reference is bound to it at line {t.line}"
        elif axis is None and _bare_argument_of_unknown_call(fn, i):
            reason = reason or f"it is passed to a function that could change it at line {t.line}"
    return writes, reason


def _statement_end(fn: HostFunction, k: int) -> int:
    j = k
    while j < len(fn.tokens) and not (fn.tokens[j].text == ";" and fn.paren[j] == fn.paren[k]):
        if fn.tokens[j].text in ("{", "}"):
            return len(fn.tokens)
        j += 1
    return j


def _unary(toks: list[Token], i: int) -> bool:
    """The `&` at toks[i] takes an address (after an operator or an opening bracket), not a bitwise and."""
    return i == 0 or toks[i - 1].kind not in ("ident", "number") and toks[i - 1].text not in (")", "]")


def _reference_bound(toks: list[Token], i: int) -> bool:
    """`T &r = v`, `T& r(v)`, `T &r{v}`: a reference that could write v."""
    j = i - 1
    if j >= 0 and toks[j].text in ("=", "(", "{"):
        return j >= 2 and toks[j - 1].kind == "ident" and toks[j - 2].text in ("&", "&&")
    return False


def _bare_argument_of_unknown_call(fn: HostFunction, i: int) -> bool:
    toks = fn.tokens
    lo, hi = i, i
    while lo >= 2 and toks[lo - 1].text == "(" and hi + 1 < len(toks) and toks[hi + 1].text == ")" \
            and toks[lo - 2].kind != "ident" and toks[lo - 2].text not in (">>>", ")", "]"):
        lo, hi = lo - 1, hi + 1                    # `f((n))`: grouping parentheses still pass n itself
    if not (lo > 0 and toks[lo - 1].text in ("(", ",") and hi + 1 < len(toks) and toks[hi + 1].text in (")", ",")):
        return False
    depth, j = 0, lo - 1
    while j >= 0:                                  # back to the `(` of the call
        t = toks[j].text
        if t in (")", "]"):
            depth += 1
        elif t in ("(", "["):
            if depth == 0:
                break
            depth -= 1
        j -= 1
    if j <= 0 or toks[j].text != "(":
        return False
    callee = toks[j - 1]
    if callee.text == ">>>" or (j >= 2 and toks[j - 2].text in _DECL_TYPES):
        return False                               # a launch's arguments are copied; `dim3 g(n)` constructs
    if callee.kind != "ident" or callee.text in _DECL_TYPES or callee.text in ("if", "while", "for", "switch",
                                                                               "return"):
        return False
    # A library's by-value function, unless the file defines or declares a function of that name itself
    # (`void cuda_setup(int &n)` matches the library prefix but may write n).
    if _used_as_a_value(toks, j) and _by_value_macro(fn.text, callee.text):
        return False
    return not _BY_VALUE_CALLEE.match(callee.text) or callee.text in _declared_functions(fn)


def _used_as_a_value(toks: list[Token], open_paren: int) -> bool:
    """Whether the call whose `(` is at `open_paren` is a statement of its own or the value of an assignment
    or return (`print(n);`, `m = ceilDiv(n, 256);`): a macro's expansion there can only be read, where
    `print(n) = 0;` or `&print(n)` would make a bare `x` body a store or an address (a whitelist)."""
    before = toks[open_paren - 2].text if open_paren >= 2 else ";"
    depth, k = 0, open_paren
    while k < len(toks):
        depth += toks[k].text == "("
        depth -= toks[k].text == ")"
        if depth == 0:
            break
        k += 1
    after = toks[k + 1].text if k + 1 < len(toks) else ""
    return before in (";", "{", "}", "=", "return") and after == ";"


def _by_value_macro(text: str, name: str) -> bool:
    """A function-like macro, defined once on one line, whose expansion only reads its arguments: its body is
    made of its parameters, numbers, strings, `#` (spelling), the names of C's arithmetic types (casts), calls
    of a library's by-value functions and operators that store nothing (`( a + b - 1 ) / b`,
    `printf( #x ": %lu\\n", (unsigned long) x )`). Such a "call" reads its argument (a whitelist)."""
    found = re.findall(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}\(([\w\s,]*)\)(.*)$", text, re.MULTILINE)
    if len(found) != 1 or found[0][1].rstrip().endswith("\\"):
        return False
    params = {p.strip() for p in found[0][0].split(",")}
    body = tokenize(found[0][1])
    for k, tok in enumerate(body):
        after = body[k + 1].text if k + 1 < len(body) else ""
        if tok.kind in ("number", "string") or tok.text in _READ_ONLY_PUNCT:
            continue
        if tok.kind == "ident" and (tok.text in params or tok.text in _DECL_TYPES or
                                    (after == "(" and tok.text != name and _BY_VALUE_CALLEE.match(tok.text))):
            continue
        return False
    return True


#: Operators and punctuation that store nothing and take no address.
_READ_ONLY_PUNCT = {"(", ")", ",", "#", "+", "-", "*", "/", "%", "<", ">", "<=", ">=", "==", "!=", "&&", "||", "!",
                    "?", ":", "<<", ">>", "^", "|", "~"}


@functools.lru_cache(maxsize=8)
def _declared_functions(fn: HostFunction) -> frozenset[str]:
    """Names the file declares or defines as functions: `TYPE name (`, `TYPE *name (`, `TYPE &name (`."""
    toks = fn.tokens
    return frozenset(toks[k].text for k in range(1, len(toks) - 1)
                     if toks[k].kind == "ident" and toks[k + 1].text == "("
                     and (toks[k - 1].kind == "ident" and toks[k - 1].text not in _NOT_TYPES
                          or toks[k - 1].text in ("*", "&")))


#: Words that can stand before a call without declaring it (`return f(n)`, `else f(n)`).
_NOT_TYPES = {"return", "else", "do", "case", "goto", "throw", "new", "delete", "sizeof"}


_DIM3_START = re.compile(r"\bdim3\s+(?=[A-Za-z_])")
_DIM3_DECLARATOR = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*(?:\((?P<a>.*)\)|=\s*dim3\s*\((?P<b>.*)\)|\{(?P<c>.*)\}|"
                              r"(?P<default>))", re.DOTALL)


def dim3_declarators(text: str):
    """(name, offset of the name, components) of each variable a `dim3` declaration statement declares,
    several in one (`dim3 grid(n / 192), block(192);`, `dim3 g, b(64);`) included; `dim3 g;` is 1x1x1.
    A parameter list (`f(dim3 g, dim3 b)`) is no declaration: its `)` closes before any `;`."""
    for start in _DIM3_START.finditer(text):
        depth, end = 0, None
        for k in range(start.end(), min(len(text), start.end() + 2000)):
            depth += text[k] in "([{"
            depth -= text[k] in ")]}"
            if depth < 0:
                break
            if depth == 0 and text[k] == ";":
                end = k
                break
        if end is None:
            continue
        offset = start.end()
        for part in split_top_level(text[offset:end], keep_spacing=True):
            m = _DIM3_DECLARATOR.fullmatch(part.strip())
            if m is not None:
                args = next((g for g in (m.group("a"), m.group("b"), m.group("c")) if g is not None), None)
                at = offset + part.index(m.group("name"))
                yield m.group("name"), at, ["1", "1", "1"] if args is None else split_top_level(args)
            offset += len(part) + 1


@functools.lru_cache(maxsize=8)
def _host_function(text: str) -> HostFunction:
    return HostFunction(text)


@functools.lru_cache(maxsize=256)
def declarations_at(host_text: str, offset: int) -> HostDeclarations:
    """The HostDeclarations a launch site at `offset` of the host text sees (shared: not to be changed)."""
    fn = _host_function(host_text)
    text, scalars, dim3s, props = _text_declarations(host_text)
    site = fn.index_at(offset)
    site_depth = fn.brace[site] if site < len(fn.tokens) else 0
    shadowed = fn.function_parameters(fn.enclosing_block(site, 1)[0]) if site_depth else set()
    found = HostDeclarations()
    for name, decls in scalars.items():
        visible = _visible(fn, decls, site, shadowed)
        if visible is None:
            continue
        index, (type_name, init), (lo, hi) = visible
        writes, reason = writes_of(fn, name, lo, hi, index)
        if not writes and reason is None and len(split_top_level(init)) == 1:
            found.scalars[name] = (type_name, init)
    found.device_props = _read_only_device_props(fn, props, site, shadowed)
    for name, decls in dim3s.items():
        visible = _visible(fn, decls, site, shadowed)
        if visible is None:   # a dim3 of that name, not one the site can tell: unknown, never another's value
            found.dim3[name] = None
            continue
        index, components, (lo, hi) = visible
        found.dim3[name], why = _dim3_at_site(fn, name, index, list(components), site, lo, hi)
        if why:
            found.reasons[name] = why
    return found


_DEVICE_PROP = re.compile(r"\bcudaDeviceProp\s+([A-Za-z_]\w*)\s*;")
_MEMBER_WRITE = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--"}


@functools.lru_cache(maxsize=8)
def _text_declarations(host_text: str) -> tuple[str, dict[str, list], dict[str, list], dict[str, list]]:
    """The host text with its comments blanked (offsets kept), and its scalar, dim3 and cudaDeviceProp
    declarations by name (offset, payload): read once per text, not per launch site."""
    text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), host_text)
    scalars: dict[str, list] = {}
    for m in _SCALAR_DECL.finditer(text):
        scalars.setdefault(m.group("name"), []).append((m.start("name"), (" ".join(m.group("type").split()),
                                                                          m.group("init"))))
    dim3s: dict[str, list] = {}
    for name, offset, components in dim3_declarators(text):
        dim3s.setdefault(name, []).append((offset, components))
    props: dict[str, list] = {}
    for m in _DEVICE_PROP.finditer(text):
        props.setdefault(m.group(1), []).append((m.start(1), None))
    return text, scalars, dim3s, props


def _read_only_device_props(fn: HostFunction, decls: dict[str, list], site: int, shadowed: set[str]) -> set[str]:
    """The `cudaDeviceProp p;` the site sees whose every use is `cudaGetDeviceProperties(&p, ...)` or a read
    of a member (`p.maxThreadsPerBlock` not assigned, incremented, or taken the address of)."""
    found = set()
    for name, found_decls in decls.items():
        visible = _visible(fn, found_decls, site, shadowed)
        if visible is not None and all(_read_or_filled(fn, i) for i in fn.uses(name, *visible[2])
                                       if i != visible[0]):
            found.add(name)
    return found


def _read_or_filled(fn: HostFunction, i: int) -> bool:
    toks = fn.tokens
    before = [t.text for t in toks[max(i - 3, 0):i]]
    if before == ["cudaGetDeviceProperties", "(", "&"]:
        return True
    after = [t.text for t in toks[i + 1:i + 4]]
    return len(after) == 3 and after[0] == "." and toks[i + 2].kind == "ident" and after[2] not in _MEMBER_WRITE \
        and (not before or before[-1] not in ("&", "++", "--"))


def _visible(fn: HostFunction, decls: list, site: int, shadowed: set[str]):
    """The one declaration the site sees among `decls` (offset, payload): (token index, payload, the
    token range where it may be written), or None (none, several, or a file-scope one the enclosing
    function's parameter hides)."""
    seen = []
    for offset, payload in decls:
        i = fn.index_at(offset)
        depth = fn.brace[i] if i < len(fn.tokens) else 0
        open_, close = fn.enclosing_block(i, depth)
        if i < site and open_ < site < close:
            seen.append((i, payload, (i, close) if depth else (0, len(fn.tokens)), depth))
    if len(seen) != 1 or (seen[0][3] == 0 and fn.tokens[seen[0][0]].text in shadowed):
        return None
    return seen[0][:3]


def _dim3_at_site(fn: HostFunction, name: str, index: int, components: list[str], site: int, lo: int,
                  hi: int) -> tuple[list[str] | None, str | None]:
    """The dim3's components at the site after the plain writes before it, or (None, why)."""
    writes, reason = writes_of(fn, name, lo, hi, index)
    if reason:
        return None, f"'{name}' {reason}"
    depth = fn.brace[index]
    site_offset = fn.tokens[site].start if site < len(fn.tokens) else len(fn.text)
    if fn.brace[site] > depth and any(w.offset > site_offset for w in writes):
        return None, f"'{name}' is assigned after the launch, which is in a loop or a branch"
    for w in (w for w in writes if w.offset < site_offset):
        line = fn.text.count("\n", 0, w.offset) + 1
        if not w.straight or w.depth != depth:
            return None, f"'{name}' is assigned in a loop, a branch or an expression at line {line}"
        if re.search(rf"\b{re.escape(name)}\b", w.value):
            return None, f"what '{name}' is assigned at line {line} may change before the launch"
        copied = _snapshot(fn, w, site) if w.axis is not None else None
        if copied is None and _changed_between(fn, w, site):
            return None, f"what '{name}' is assigned at line {line} may change before the launch"
        if copied is not None:
            w = Write(w.offset, w.straight, w.axis, copied, w.depth)
        if w.axis is not None and len(components) <= w.axis:
            components += ["1"] * (w.axis + 1 - len(components))
        if w.axis is not None:
            components[w.axis] = w.value
        else:
            components = _dim3_value(w.value)
            if components is None:
                return None, f"'{name}' is assigned a value the compiler cannot read at line {line}"
    return components, None


def _dim3_value(text: str) -> list[str] | None:
    m = re.fullmatch(r"dim3\s*(?:\((.*)\)|\{(.*)\})", text.strip(), re.DOTALL)
    if m:
        return split_top_level(m.group(1) if m.group(1) is not None else m.group(2))
    return None if re.search(r"[{}]", text) else [text, "1", "1"]


def _changed_between(fn: HostFunction, write: Write, site: int) -> bool:
    """A variable the write's value reads is written between the write and the site."""
    start = fn.index_at(write.offset)
    for ident in set(re.findall(r"[A-Za-z_]\w*", write.value)):
        writes, reason = writes_of(fn, ident, start + 1, site, -1)
        if reason or [w for w in writes if w.offset != write.offset]:
            return True
    return False


# -- a dim3 member assigned a variable that changes later: the value it copied ---------------------------

_INTEGER_WORDS = {"int", "long", "short", "unsigned", "size_t", "signed"}


def _snapshot(fn: HostFunction, write: Write, site: int) -> str | None:
    """`g.x = v;` copies v's value (a dim3's members are integers): a later `v = ...` does not change g.
    The text of what the write copied, as an expression the site can evaluate, or None where that is not
    proved. A whitelist: each variable the value reads that changes before the site is a local integer of
    the function, written before the copy only by plain `v = E;` statements in the copy's own block and
    in `if (C) { v = E; }` blocks directly inside it (no else, no loop, no goto); what those statements
    read (E, C) must not change between them and the site."""
    at = fn.index_at(write.offset)
    value = write.value
    start, expanded = at, set()
    for name in sorted(set(re.findall(r"[A-Za-z_]\w*", value))):
        found = _value_before(fn, name, at)
        if found is None:
            if _written(fn, name, at + 1, site):
                return None
            continue        # not assigned before the copy (a macro, a fixed variable), or unchanged after it
        text, first = found
        value = re.sub(rf"\b{re.escape(name)}\b", f"({text})", value)
        start, expanded = min(start, first), expanded | {name}
    rest = set(re.findall(r"[A-Za-z_]\w*", value)) - expanded
    if any(_written(fn, v, start + 1, site) for v in rest):
        return None
    return value


def _written(fn: HostFunction, name: str, lo: int, hi: int) -> bool:
    writes, reason = writes_of(fn, name, lo, hi, -1)
    return bool(writes) or reason is not None


def _value_before(fn: HostFunction, name: str, at: int) -> tuple[str, int] | None:
    """(v's value just before token `at` as text, the token index of the write it starts from), or None."""
    depth = fn.brace[at]
    open_, close = fn.enclosing_block(at, depth)
    declared = _local_declaration(fn, name, open_, at)
    body = fn.enclosing_block(at, 1) if depth >= 1 else (0, 0)
    if declared is None or "goto" in (t.text for t in fn.tokens[body[0]:body[1]]):
        return None     # (a jump back to a label between the writes and the copy would undo the order)
    writes, reason = writes_of(fn, name, declared, close, -1)
    if reason is not None:
        return None
    before = [w for w in writes if fn.index_at(w.offset) < at]
    starts = [k for k, w in enumerate(before) if w.straight and w.depth == depth and w.axis is None
              and open_ < fn.index_at(w.offset) < close      # in the copy's own block, not a sibling's
              and not re.search(rf"\b{re.escape(name)}\b", w.value)]
    if not starts:
        return None
    first = starts[-1]
    current = before[first].value
    for w in before[first + 1:]:
        if not w.straight or w.axis is not None:
            return None
        updated = re.sub(rf"\b{re.escape(name)}\b", f"({current})", w.value)
        if w.depth == depth:
            current = updated
            continue
        condition = _plain_if_condition(fn, fn.index_at(w.offset), depth, open_) if w.depth == depth + 1 else None
        if condition is None or any(_written(fn, v, fn.index_at(w.offset), at)
                                    for v in set(re.findall(r"[A-Za-z_]\w*", condition)) - {name}):
            return None
        condition = re.sub(rf"\b{re.escape(name)}\b", f"({current})", condition)
        current = f"({condition}) ? ({updated}) : ({current})"
    return current, fn.index_at(before[first].offset)


def _local_declaration(fn: HostFunction, name: str, open_: int, at: int) -> int | None:
    """The token index of `T name;` / `T name = ...;` (T an integer type) in the function's block before
    `at` at most as deep as `at`, the block enclosing both; None if there is none."""
    if open_ < 0:
        return None
    for j in range(open_ + 1, at):
        t = fn.tokens[j]
        if t.text == name and fn.tokens[j - 1].text in _INTEGER_WORDS and fn.tokens[j + 1].text in (";", "=") \
                and fn.brace[j] <= fn.brace[at] and fn.enclosing_block(j, fn.brace[j])[1] >= at:
            return j
    return None


def _plain_if_condition(fn: HostFunction, i: int, depth: int, outer: int) -> str | None:
    """C of `if (C) { ... }` whose block (at depth + 1) holds token i: a statement of its own (not an
    `else if`) of the block opened at token `outer`, with no else."""
    open_, close = fn.enclosing_block(i, depth + 1)
    toks = fn.tokens
    if open_ < 1 or toks[open_ - 1].text != ")" or (close + 1 < len(toks) and toks[close + 1].text == "else"):
        return None
    j, level = open_ - 1, 0
    while j >= 0:
        level += toks[j].text == ")"
        level -= toks[j].text == "("
        if level == 0:
            break
        j -= 1
    if j < 2 or toks[j - 1].text != "if" or toks[j - 2].text not in (";", "{", "}") or fn.brace[j - 1] != depth \
            or fn.enclosing_block(j - 1, depth)[0] != outer:
        return None
    return fn.text[toks[j].end:toks[open_ - 1].start].strip()
