"""The C preprocessor step (pcpp), with nvcc's -D/-I and system includes left alone."""
from __future__ import annotations

import io
import os
from pathlib import Path

from pcpp import Action, OutputDirective, Preprocessor

from gpgpu_opt.diagnostics import CompileError, Location


class _CudaPreprocessor(Preprocessor):
    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename
        self.line_directive = "#line"
        self.compress = 0
        self.first_error: CompileError | None = None

    def on_include_not_found(self, is_malformed, is_system_include, curdir, includepath):
        if is_system_include:
            raise OutputDirective(Action.IgnoreAndPassThrough)
        raise CompileError(f"'{includepath}' file not found", None)

    def on_unknown_macro_in_defined_expr(self, tok):
        return None  # undefined macros are 0 in #if, as in C

    def on_error(self, file, line, msg):
        if self.first_error is None:
            self.first_error = CompileError(msg, Location(file, line, 1))

    def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):
        if directive.value == "pragma":
            return None  # keep #pragma lines in the output
        return super().on_directive_unknown(directive, toks, ifpassthru, precedingtoks)


def preprocess(text: str, filename: str, defines: dict[str, str] | None = None,
               include_dirs: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """Preprocess a whole file. Returns the text (with #line markers) and the object-like macros defined."""
    pp = _CudaPreprocessor(filename)
    pp.add_path(str(Path(filename).resolve().parent))
    for d in include_dirs or []:
        pp.add_path(d)
    for name, value in (defines or {}).items():
        pp.define(f"{name} {value}")
    pp.parse(text, filename)
    out = io.StringIO()
    pp.write(out)
    if pp.first_error:
        raise pp.first_error
    macros = {}
    for name, macro in pp.macros.items():
        if macro.arglist is None and not name.startswith("__"):
            macros[name] = "".join(tok.value for tok in macro.value).strip()
    return _normalise_line_markers(out.getvalue(), filename), macros


def _normalise_line_markers(text: str, filename: str) -> str:
    """pcpp names files relative to the working directory; name the input as the user did."""
    real = os.path.realpath(filename)
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("#line "):
            parts = line.split(" ", 2)
            if len(parts) == 3:
                named = parts[2].strip().strip('"')
                if os.path.realpath(named) == real:
                    lines[k] = f'#line {parts[1]} "{filename}"'
    return "\n".join(lines)
