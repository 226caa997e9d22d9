"""Host variables as a launch site sees them: declarations scoped to the host function around the site (and
file scope), with the writes between the declaration and the site.

A scalar has a value when it is declared once in scope with an initializer and never written: no
assignment, `++`, `&v` (which could write it), reference bound to it, or bare argument of a function the
compiler does not know (a C++ reference parameter could write it). A `dim3` may also be written by plain
statements `g.x = E;` / `g = dim3(...);` between its declaration and the site, at the declaration's own
nesting (not in a loop, a branch or a condition): those are applied in order. Any other write, or one that a
later write of what E reads could change, makes the value unknown, with the reason; never the
declaration's value."""
from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from gpgpu_opt.frontend.scanner import Token, tokenize

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
        braces = parens = 0
        for t in self.tokens:
            braces -= t.text == "}"
            parens -= t.text in (")", "]")
            self.brace.append(braces)
            self.paren.append(parens)
            braces += t.text == "{"
            parens += t.text in ("(", "[")

    def index_at(self, offset: int) -> int:
        return bisect.bisect_left(self.starts, offset)

    def enclosing_block(self, i: int, depth: int) -> tuple[int, int]:
        """Token range (open, close) of the block at `depth` around token i; (-1, len) for file scope."""
        if depth == 0:
            return -1, len(self.tokens)
        start = next(j for j in range(i, -1, -1) if self.tokens[j].text == "{" and self.brace[j] == depth - 1)
        end = next((j for j in range(i, len(self.tokens)) if self.tokens[j].text == "}" and self.brace[j] == depth - 1),
                   len(self.tokens))
        return start, end

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
    cannot be followed."""
    toks, writes, reason = fn.tokens, [], None
    for i in range(max(lo, 0), min(hi, len(toks))):
        t = toks[i]
        if t.kind != "ident" or t.text != name or i == declaration:
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
    return not _BY_VALUE_CALLEE.match(callee.text) or callee.text in _declared_functions(fn)


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


_DIM3_DEFAULT = re.compile(r"\bdim3\s+(?P<name>[A-Za-z_]\w*)\s*;")


@functools.lru_cache(maxsize=8)
def _host_function(text: str) -> HostFunction:
    return HostFunction(text)


@functools.lru_cache(maxsize=256)
def declarations_at(host_text: str, offset: int):
    """The HostDeclarations a launch site at `offset` of the host text sees (shared: not to be changed)."""
    from gpgpu_opt.host_expr import _COMMENT, _SCALAR_DECL, HostDeclarations, dim3_declarations, split_top_level

    fn = _host_function(host_text)
    text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), host_text)   # offsets kept
    site = fn.index_at(offset)
    site_depth = fn.brace[site] if site < len(fn.tokens) else 0
    shadowed = fn.function_parameters(fn.enclosing_block(site, 1)[0]) if site_depth else set()
    found = HostDeclarations()
    scalars: dict[str, list] = {}
    for m in _SCALAR_DECL.finditer(text):
        scalars.setdefault(m.group("name"), []).append((m.start("name"), (" ".join(m.group("type").split()),
                                                                          m.group("init"))))
    dim3s: dict[str, list] = {}
    for name, at, args in dim3_declarations(text):
        dim3s.setdefault(name, []).append((at, split_top_level(args)))
    for m in _DIM3_DEFAULT.finditer(text):
        dim3s.setdefault(m.group("name"), []).append((m.start("name"), ["1", "1", "1"]))
    for name, decls in scalars.items():
        visible = _visible(fn, decls, site, shadowed)
        if visible is None:
            continue
        index, (type_name, init), (lo, hi) = visible
        writes, reason = writes_of(fn, name, lo, hi, index)
        if not writes and reason is None and len(split_top_level(init)) == 1:
            found.scalars[name] = (type_name, init)
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
        if re.search(rf"\b{re.escape(name)}\b", w.value) or _changed_between(fn, w, site):
            return None, f"what '{name}' is assigned at line {line} may change before the launch"
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
    from gpgpu_opt.host_expr import split_top_level

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
