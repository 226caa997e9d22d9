"""The user's files as nvcc reads them: UTF-8, with what nvcc accepts besides kept byte for byte.

- Bytes that are not UTF-8 are kept as surrogates (`surrogateescape`) and written back as they were read. In
  a comment, or in a part of the file the preprocessor leaves out, nvcc accepts them; in code it rejects them
  ("invalid multibyte character sequence" in a literal, "unrecognized token" elsewhere), and so does
  gpgpu-opt, at the same place.
- A byte-order mark is no part of the text: it is taken off when the file is read (so that offsets, tokens
  and inserted code start after it) and put back in front when the file is written.
- NUL bytes in comments and string literals are accepted, as nvcc does; a NUL in code is a file that is not
  text (a binary named by mistake).
- A file whose lines all end with CRLF is read with LF and written back with CRLF.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gpgpu_opt.diagnostics import CompileError, Location
from gpgpu_opt.frontend import scanner

BOM = "\ufeff"
_UNDECODED = re.compile("[\udc80-\udcff]")
_LINE_MARKER = re.compile(r'^#line (\d+) "([^"]*)"[^\n]*\n', re.MULTILINE)


@dataclass
class SourceFile:
    """One user file of the program: the main .cu or a file it includes with quotes."""
    path: str                   # as the user names it: the main file as given, the others relative to it
    text: str                   # as written; bytes that are not UTF-8 kept as surrogates, CRLF read as LF
    crlf: bool = False          # every line ended with CRLF: written back so
    bom: bool = False           # the file started with a byte-order mark: written back with it

    def as_written(self, text: str) -> str:
        """`text` (this file's text, edited or not) with the file's own line endings and byte-order mark."""
        text = text.replace("\n", "\r\n") if self.crlf else text
        return BOM + text if self.bom else text


def read_source_file(path: str, name: str | None = None) -> SourceFile:
    """A user file, every byte kept (see the module doc)."""
    p = Path(path)
    if not p.exists():
        raise CompileError(f"no such file: '{path}'")
    if p.is_dir():
        raise CompileError(f"'{path}' is a directory, not a .cu file")
    return source_file(p.read_bytes(), name or path)


def source_file(data: bytes, name: str) -> SourceFile:
    """A user file from its bytes (a file's, or standard input's), named `name` (see the module doc)."""
    text = data.decode("utf-8", errors="surrogateescape")
    bom = text.startswith(BOM)
    text = text[len(BOM):] if bom else text
    if "\0" in text and _nul_in_code(text):
        raise CompileError(f"'{name}' is not a text file", Location(name, 1, 1))
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    return SourceFile(name, text.replace("\r\n", "\n") if crlf else text, crlf, bom)


def source_text(data: bytes, name: str) -> str:
    """The text the front end reads of a program given as bytes (standard input)."""
    return source_file(data, name).text


def _nul_in_code(text: str) -> bool:
    """A NUL outside comments and string or character literals (the scanner drops comments)."""
    return any("\0" in t.text for t in scanner.tokenize(text) if t.kind != "string")


def check_live_bytes(expanded: str, files: list[SourceFile]) -> None:
    """An error at the first byte that is not UTF-8 in what the preprocessor kept of the program (`expanded`,
    with its #line markers; comments are gone), placed in the user's file as nvcc places it."""
    found = _UNDECODED.search(expanded)
    if found is None:
        return
    path, line = _origin(expanded, found.start())
    written = next((f for f in files if os.path.abspath(f.path) == os.path.abspath(path)), None)
    column = 1
    if written is not None:
        lines = written.text.split("\n")
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        bad = _UNDECODED.search(text)
        column = bad.start() + 1 if bad else 1
        literal = next((t for t in scanner.tokenize(text) if t.kind == "string" and _UNDECODED.search(t.text)), None)
    else:
        literal = None
    what = "invalid multibyte character sequence" if literal is not None else "unrecognized token"
    raise CompileError(f"{what} (a byte that is not UTF-8)", Location(path, line, column))


def _origin(expanded: str, offset: int) -> tuple[str, int]:
    """The user's file and line of an offset of the preprocessed text, from the #line marker before it."""
    marker = None
    for marker in _LINE_MARKER.finditer(expanded, 0, offset):
        pass
    if marker is None:
        return "", expanded.count("\n", 0, offset) + 1
    return marker.group(2), int(marker.group(1)) + expanded.count("\n", marker.end(), offset)
