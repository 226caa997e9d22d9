"""The C preprocessor step (pcpp), with C's rules for #if, nvcc's predefined macros, and nvcc's -D/-I.

System includes (`<stdio.h>`) that are not found are left in the output as written: host code needs
them, and nothing this compiler parses comes from them.
"""
from __future__ import annotations

import io
import os
import re
from pathlib import Path

from pcpp import Action, OutputDirective, Preprocessor

from gpgpu_opt.diagnostics import CompileError, Location
from gpgpu_opt.frontend.scanner import tokenize
from gpgpu_opt.targets import DEFAULT_TARGET, get_target

NVCC_VERSION_MAJOR = 13


def nvcc_predefined_macros(cuda_arch: int | None) -> dict[str, str]:
    """What nvcc defines while compiling device code for an architecture (None: host code)."""
    return {
        "__CUDACC__": "1",
        "__NVCC__": "1",
        **({"__CUDA_ARCH__": str(cuda_arch)} if cuda_arch is not None else {}),
        "__CUDACC_VER_MAJOR__": str(NVCC_VERSION_MAJOR),
    }


class _CudaPreprocessor(Preprocessor):
    """pcpp, deciding everything as a C compiler would.

    pcpp can "pass through" an #if it cannot decide: it keeps the directive in the output and carries
    on as if every branch were live, following their includes and defines. A C compiler has no such
    state, so none of the hooks below ever asks for it.
    """

    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename
        self.line_directive = "#line"
        self.compress = 0
        self.first_error: CompileError | None = None

    def on_unknown_macro_in_defined_expr(self, tok):
        return False  # `defined(X)`, #ifdef X, #ifndef X: X is not a macro

    def on_unknown_macro_in_expr(self, ident):
        # A name that is not a macro is 0; nvcc preprocesses as C++, where `true` is 1.
        return 1 if ident == "true" else 0

    def on_unknown_macro_function_in_expr(self, ident):
        # The evaluator turns exceptions into a vaguer message, so record the error and go on.
        self._record(CompileError(f"function-like macro '{ident}' is not defined",
                                  self.location_of(self.lastdirective)))
        return lambda args: 0

    def on_include_not_found(self, is_malformed, is_system_include, curdir, includepath):
        if is_system_include:
            raise OutputDirective(Action.IgnoreAndPassThrough)
        what = f"malformed #include {includepath}" if is_malformed else f"'{includepath}' file not found"
        raise CompileError(what, self.location_of(self.lastdirective))

    def on_error(self, file, line, msg):
        # pcpp places an empty #if expression at line 0; the directive being handled is the culprit.
        where = self.location_of(self.lastdirective) if line == 0 else Location(self.user_name(file), line, 1)
        self._record(CompileError(msg, where))

    def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):
        # pcpp calls this only for directives in a live branch.
        if directive.value == "pragma":
            return None  # keep #pragma lines in the output
        if directive.value == "error":
            message = "".join(tok.value for tok in toks).strip()
            raise CompileError(f"#error {message}", self.location_of(directive))
        return super().on_directive_unknown(directive, toks, ifpassthru, precedingtoks)

    def _record(self, error: CompileError) -> None:
        """pcpp carries on after the errors it reports; the first is raised once preprocessing ends."""
        if self.first_error is None:
            self.first_error = error

    def user_name(self, source: str) -> str:
        """pcpp names files relative to the working directory; name the input as the user did."""
        return self.filename if os.path.realpath(source) == os.path.realpath(self.filename) else source

    def location_of(self, tok) -> Location:
        return Location(self.user_name(tok.source), tok.lineno, _column(tok.source, tok.lineno, tok.value))


def _column(path: str, line: int, word: str) -> int:
    """The 1-based column of the first `word` on a line of a file (pcpp's tokens carry no column)."""
    try:
        text = Path(path).read_text().splitlines()[line - 1]
    except (OSError, UnicodeDecodeError, IndexError):
        return 1
    return text.find(word) + 1 or 1


_EMPTY_CONDITION = re.compile(r"#\s*(if|elif)\s*(?://.*|/\*.*)?$")


def _check_conditions(text: str, filename: str) -> None:
    """`#if` with nothing to test is an error (pcpp would fail on it without saying where)."""
    for tok in tokenize(text):
        m = _EMPTY_CONDITION.match(tok.text.strip()) if tok.kind == "pp" else None
        if m:
            raise CompileError(f"#{m.group(1)} with no expression", Location(filename, tok.line, tok.column))


def preprocess(text: str, filename: str, defines: dict[str, str] | None = None,
               include_dirs: list[str] | None = None, *,
               cuda_arch: int | None = get_target(DEFAULT_TARGET).cuda_arch) -> tuple[str, dict[str, str]]:
    """Preprocess a whole file as nvcc does for device code of `cuda_arch` (None: as for host code).

    Returns the text (with #line markers) and the object-like macros the file and -D defined.
    """
    pp = _CudaPreprocessor(filename)
    pp.add_path(str(Path(filename).resolve().parent))
    for d in include_dirs or []:
        pp.add_path(d)
    # -D comes after the predefined macros so that it can replace them, as with nvcc.
    for name, value in {**nvcc_predefined_macros(cuda_arch), **(defines or {})}.items():
        pp.define(f"{name} {value}")
    _check_conditions(text, filename)
    pp.parse(text, filename)
    out = io.StringIO()
    try:
        pp.write(out)
    except (IndexError, KeyError, TypeError, ValueError) as err:  # pcpp itself failed on this input
        raise pp.first_error or CompileError(f"the preprocessor could not process this file ({err!r})",
                                             Location(filename, 1, 1)) from None
    if pp.first_error:
        raise pp.first_error
    macros = {}
    for name, macro in pp.macros.items():
        if macro.arglist is None and not name.startswith("__"):
            macros[name] = "".join(tok.value for tok in macro.value).strip()
    return _normalise_line_markers(out.getvalue(), pp), macros


def _normalise_line_markers(text: str, pp: _CudaPreprocessor) -> str:
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("#line "):
            parts = line.split(" ", 2)
            if len(parts) == 3:
                named = parts[2].strip().strip('"')
                lines[k] = f'#line {parts[1]} "{pp.user_name(named)}"'
    return "\n".join(lines)
