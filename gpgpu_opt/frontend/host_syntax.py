"""The host code of a .cu file as a C++ syntax tree (tree-sitter's CUDA grammar).

The kernels go through pycparser (frontend/program.py); the host code around them is C++ that pycparser
cannot read. This module parses the preprocessed text once (macros expanded, so what a macro does is in
the tree) and answers the questions analyses ask of host code: the function definitions, where a name is
used and in what syntactic context, the kernel launches `k<<<...>>>(args)`, and where the parser gave up
(ERROR and MISSING nodes), so that an analysis can refuse what it cannot read.

The #line markers the preprocessor writes are blanked before parsing (they may fall inside a statement)
and kept as a map from the tree's rows back to the user's file and line.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import tree_sitter
import tree_sitter_cuda

from gpgpu_opt.frontend import scanner

_LANGUAGE = tree_sitter.Language(tree_sitter_cuda.language())
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
_LINE_MARKER = re.compile(r'[ \t]*#[ \t]*line[ \t]+(\d+)(?:[ \t]+"([^"]*)")?[^\n]*')

Node = tree_sitter.Node


@dataclass(frozen=True)
class Launch:
    """A kernel launch `kernel<<<config>>>(args)`."""
    kernel: str
    call: Node              # the call_expression
    name: Node              # the identifier naming the kernel
    config: list[Node]      # grid, block[, shared bytes[, stream]]
    args: list[Node]


class HostSyntax:
    """One preprocessed file, parsed. Build it with `host_syntax(text)`, which parses each text once."""

    def __init__(self, text: str, filename: str = ""):
        self.filename = filename
        self.text, self._rows = _without_line_markers(text, filename)
        self.source = self.text.encode("utf-8", "surrogateescape")  # bytes nvcc accepts in comments
        self.tree = tree_sitter.Parser(_LANGUAGE).parse(self.source)
        self.root = self.tree.root_node
        self._identifiers: dict[str, list[Node]] = {}
        self._functions: list[Node] = []
        self._launches: list[Launch] = []
        self._index()
        self._tokens: list[scanner.Token] | None = None
        self._token_index: dict[str, list[scanner.Token]] | None = None
        self._wide_chars: tuple[list[int], list[int]] | None = None

    # -- what a node says --------------------------------------------------------------------------------

    def text_of(self, node: Node) -> str:
        return self.source[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")

    def location(self, node: Node) -> tuple[str, int]:
        """(file, line) in the user's files of the node's first character."""
        return self._rows[node.start_point.row] if node.start_point.row < len(self._rows) else (self.filename, 0)

    def line(self, node: Node) -> int:
        return self.location(node)[1]

    def where(self, node: Node) -> str:
        """'line N', or 'line N of FILE' for a line in another (included) file."""
        file, line = self.location(node)
        return f"line {line}" if file == self.filename else f"line {line} of {file}"

    # -- what the file holds -----------------------------------------------------------------------------

    @property
    def functions(self) -> list[Node]:
        """Every function_definition, nested ones (class members, local classes) included, in text order."""
        return self._functions

    @property
    def files(self) -> set[str]:
        """The files the text came from (the #line markers name them)."""
        return {file for file, _ in self._rows if file and not file.startswith("<")}

    @property
    def launches(self) -> list[Launch]:
        return self._launches

    def identifiers(self, name: str, within: Node | None = None) -> list[Node]:
        """The `identifier` nodes spelled `name` (not type or field names), inside `within` if given."""
        found = self._identifiers.get(name, [])
        if within is None:
            return found
        return [n for n in found if within.start_byte <= n.start_byte and n.end_byte <= within.end_byte]

    def unparsed_mentions(self, name: str, within: Node | None = None) -> list[int]:
        """Lines where the word `name` appears as a token (outside comments and strings) but the tree has no
        identifier for it: in a type position (`float *r(v);` parses as a function declaration), in a
        preprocessor line, or in text the parser could not read."""
        start = 0 if within is None else self._char_offset(within.start_byte)
        end = len(self.text) if within is None else self._char_offset(within.end_byte)
        parsed = {self._char_offset(n.start_byte) for n in self.identifiers(name, within)}
        candidates = sorted(self._tokens_naming(name), key=lambda t: t.start)
        return [self._rows[t.line - 1][1] for t in candidates
                if start <= t.start < end and t.start not in parsed
                and (t.text == name if t.kind == "ident" else _mentions(t.text, name))]

    @property
    def tokens(self) -> list[scanner.Token]:
        if self._tokens is None:
            self._tokens = scanner.tokenize(self.text)
        return self._tokens

    def _tokens_naming(self, name: str) -> list[scanner.Token]:
        """The identifier tokens spelled `name` and the preprocessor lines with the word in them, from an
        index built once (scanning every token per question made a file of many kernels quadratic)."""
        if self._token_index is None:
            self._token_index = {}
            for t in self.tokens:
                words = [t.text] if t.kind == "ident" else set(_WORD.findall(t.text)) if t.kind == "pp" else []
                for word in words:
                    self._token_index.setdefault(word, []).append(t)
        return self._token_index.get(name, [])

    # -- navigation ----------------------------------------------------------------------------------------

    @staticmethod
    def enclosing_function(node: Node) -> Node | None:
        """The nearest function_definition around `node` (a lambda's body belongs to the function)."""
        node = node.parent
        while node is not None and node.type != "function_definition":
            node = node.parent
        return node

    def function_name(self, function: Node) -> str | None:
        declarator = _function_declarator(function)
        name = declarator.child_by_field_name("declarator") if declarator is not None else None
        return self.text_of(name) if name is not None else None

    def parameter_names(self, function: Node) -> set[str]:
        declarator = _function_declarator(function)
        params = declarator.child_by_field_name("parameters") if declarator is not None else None
        names = set()
        for param in (params.named_children if params is not None else []):
            names.update(self.text_of(n) for n in walk(param) if n.type == "identifier")
        return names

    @staticmethod
    def field_of(node: Node) -> str | None:
        """The field name under which `node` hangs from its parent (`left`, `value`, ...), or None."""
        parent = node.parent
        if parent is None:
            return None
        for k in range(parent.child_count):
            if parent.child(k) == node:
                return parent.field_name_for_child(k)
        return None

    @staticmethod
    def broken(node: Node) -> Node | None:
        """The first ERROR or MISSING node inside `node`, if the parser gave up anywhere in it."""
        if not node.has_error:
            return None
        return next((n for n in walk(node) if n.is_error or n.is_missing), node)

    # -- building ---------------------------------------------------------------------------------------

    def _index(self) -> None:
        for node in walk(self.root):
            if node.type == "identifier":
                self._identifiers.setdefault(self.text_of(node), []).append(node)
            elif node.type == "function_definition":
                self._functions.append(node)
            elif node.type == "call_expression":
                launch = self._launch(node)
                if launch is not None:
                    self._launches.append(launch)

    def _launch(self, call: Node) -> Launch | None:
        config = next((c for c in call.named_children if c.type == "kernel_call_syntax"), None)
        name = call.child_by_field_name("function")
        args = call.child_by_field_name("arguments")
        if name is not None and name.type == "template_function":  # `k<float, 256><<<...>>>`: a launch of `k`
            name = name.child_by_field_name("name")
        if config is None or name is None or name.type != "identifier" or args is None:
            return None
        return Launch(self.text_of(name), call, name, list(config.named_children),
                      [a for a in args.named_children if a.type != "comment"])

    def _char_offset(self, byte: int) -> int:
        """The character offset in `text` of a byte offset in `source`: the byte less the extra bytes of the
        multi-byte characters before it (decoding the prefix per question was quadratic)."""
        if self._wide_chars is None:
            ends, extra, total = [], [], 0
            at = 0
            for char in ("" if self.text.isascii() else self.text):
                width = len(char.encode("utf-8", "surrogateescape"))
                at += width
                if width > 1:
                    total += width - 1
                    ends.append(at)
                    extra.append(total)
            self._wide_chars = (ends, extra)
        ends, extra = self._wide_chars
        k = bisect.bisect_right(ends, byte)
        return byte - (extra[k - 1] if k else 0)


def walk(node: Node) -> Iterator[Node]:
    """`node` and everything under it, in text order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _function_declarator(function: Node) -> Node | None:
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    return declarator


#: `#include <...>` or `"..."`: the directive names a file, whose name mentions no identifier (`cuda_fp16.h`).
_INCLUDE = re.compile(r"\s*#\s*include\s*[<\"][^>\"]*[>\"]\s*$")


def _mentions(text: str, name: str) -> bool:
    """Whether a preprocessor line names `name` (an include directive's file name does not)."""
    if _INCLUDE.match(text):
        return False
    return re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", text) is not None


def _without_line_markers(text: str, filename: str) -> tuple[str, list[tuple[str, int]]]:
    """The text with each #line marker blanked (the rows stay), and each row's (file, line)."""
    rows, lines = [], text.split("\n")
    file, line = filename, 1
    for k, row in enumerate(lines):
        m = _LINE_MARKER.fullmatch(row)
        if m:
            rows.append((file, line))
            line, file = int(m.group(1)), m.group(2) if m.group(2) is not None else file
            lines[k] = ""
            continue
        rows.append((file, line))
        line += 1
    return "\n".join(lines), rows


@lru_cache(maxsize=16)
def host_syntax(text: str, filename: str = "") -> HostSyntax:
    """The parsed file (one parse per text)."""
    return HostSyntax(text, filename)
