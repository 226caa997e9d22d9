"""The C preprocessor step (pcpp), with C's rules for #if, nvcc's predefined macros, and nvcc's -D/-I.

System headers are modelled, not expanded: an `#include` that is not found, or that names a header of the
system's or the CUDA toolkit's include directories (`<stdio.h>`, `<cuda.h>`, also through `-I` a toolkit
include directory), is left in the output as written. Host code needs them, nothing this compiler parses
comes from them, and pcpp cannot expand all of them (the CUDA headers overflow its recursion). A quoted
include (`#include "cuda.h"`) that is not a user file falls back to the system's headers, as in C.

Every other file the preprocessor opens is a user file of the program (`#include "kernels.cu"`); the
preprocessor records them, in the order it opens them, so the front end reads their kernels too.
"""
from __future__ import annotations

import glob
import io
import os
import re
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pcpp import Action, OutputDirective, Preprocessor

from gpgpu_opt.diagnostics import CompileError, Location
from gpgpu_opt.frontend.environment import define_modelled_macros
from gpgpu_opt.frontend.scanner import tokenize
from gpgpu_opt.targets import DEFAULT_TARGET, get_target

NVCC_VERSION_MAJOR = 13


#: The platform macros gcc defines on Linux x86-64, which nvcc passes on to device code too (not `__GNUC__`,
#: which would select code written for gcc's own builtins and attributes).
HOST_PLATFORM_MACROS = {"__linux__": "1", "__linux": "1", "__unix__": "1", "__unix": "1", "__x86_64__": "1",
                        "__x86_64": "1", "__LP64__": "1"}


def nvcc_predefined_macros(cuda_arch: int | None) -> dict[str, str]:
    """What nvcc defines while compiling device code for an architecture (None: host code), on the host it runs
    on here and on the GPU machines, Linux on x86-64 (its host compiler's platform macros: code that chooses
    `#if defined(__linux__) ... #else #error Unsupported system` takes nvcc's branch)."""
    return {
        **HOST_PLATFORM_MACROS,
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

    def __init__(self, filename: str, include_dirs: list[str] | None = None):
        super().__init__()
        self.filename = filename
        self.line_directive = "#line"
        self.compress = 0
        self.first_error: CompileError | None = None
        self.modelled_dirs = modelled_include_dirs(tuple(include_dirs or ()))
        self.modelled_found: set[str] = set()  # included names found only in modelled directories
        self.user_files: dict[str, str] = {}  # real path -> the name the user would give it, in opening order
        define_modelled_macros(self)  # what nvcc's implicit cuda_runtime.h defines (environment.CONSTANTS)

    def on_file_open(self, is_system_include, includepath):
        # Refusing to open a modelled header makes pcpp look on, then call on_include_not_found.
        if _inside(includepath, self.modelled_dirs):
            self.modelled_found.add(os.path.basename(includepath))
            raise FileNotFoundError(includepath)
        # Bytes that are not UTF-8 (a Latin-1 comment) are carried through, not an error.
        handle = open(includepath, encoding="utf-8", errors="surrogateescape")
        if handle.read(1) != "\ufeff":  # a byte-order mark is no token (pcpp's own reader drops it too)
            handle.seek(0)
        real = os.path.realpath(includepath)
        if real != os.path.realpath(self.filename):
            self.user_files.setdefault(real, self.name_for(real))
        return handle

    def name_for(self, real: str) -> str:
        """A user file named as the user would: relative to the main file's directory as it was given."""
        main_dir = os.path.realpath(os.path.dirname(os.path.abspath(self.filename)))
        return os.path.normpath(os.path.join(os.path.dirname(self.filename), os.path.relpath(real, main_dir)))

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
        if is_system_include or os.path.basename(includepath) in self.modelled_found \
                or is_system_header(includepath, self.modelled_dirs):
            define_modelled_macros(self, includepath)  # the header's constants (environment.CONSTANTS)
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
        """pcpp names files relative to the working directory; name the input as the user did, and the
        user files it includes relative to it."""
        real = os.path.realpath(source)
        if real == os.path.realpath(self.filename):
            return self.filename
        return self.user_files.get(real, source)

    def location_of(self, tok) -> Location:
        return Location(self.user_name(tok.source), tok.lineno, _column(tok.source, tok.lineno, tok.value))


def _toolkit_roots() -> list[str]:
    """Where the CUDA toolkit may be: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, and the nvcc on the PATH
    (through links and a wrapper script's `exec`)."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), *glob.glob("/usr/local/cuda*")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
        try:
            with open(nvcc, "rb") as fh:
                head = fh.read(4096).decode("utf-8", "replace")
            roots += [os.path.dirname(os.path.dirname(m)) for m in re.findall(r"exec\s+(\S+/bin/nvcc)\b", head)]
        except OSError:
            pass
    return [r for r in roots if r]


def _is_toolkit_include_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "cuda_runtime_api.h"))


@lru_cache(maxsize=16)
def modelled_include_dirs(include_dirs: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The directories whose headers are modelled, not expanded: the system's and the CUDA toolkit's
    (wherever a toolkit is found, with its cccl directory, and any -I directory that is one), as real paths."""
    dirs = ["/usr/include", "/usr/local/include"]
    for root in _toolkit_roots():   # include/cccl: thrust, cub and libcu++ since CUDA 12.x, on nvcc's own path
        for include in [os.path.join(root, "include"), *glob.glob(os.path.join(root, "targets", "*", "include"))]:
            dirs += [include, os.path.join(include, "cccl")]
    dirs += [d for d in include_dirs if _is_toolkit_include_dir(d)]
    return tuple(sorted({os.path.realpath(d) for d in dirs if os.path.isdir(d)}))


#: Headers of the C and C++ standard libraries and the CUDA toolkit that a quoted include may name where
#: no toolkit is installed here: C's search falls back to the system directories, where they are.
_KNOWN_SYSTEM_HEADERS = frozenset("""
assert.h ctype.h errno.h float.h limits.h locale.h math.h setjmp.h signal.h stdarg.h stddef.h stdint.h
stdbool.h stdio.h stdlib.h string.h time.h inttypes.h unistd.h sys/time.h sys/types.h fcntl.h omp.h
cassert cctype cerrno cfloat climits cmath cstdarg cstddef cstdint cstdio cstdlib cstring ctime iostream
fstream sstream iomanip string vector algorithm
cuda.h cuda_runtime.h cuda_runtime_api.h device_launch_parameters.h device_functions.h cuda_fp16.h
cuda_bf16.h vector_types.h vector_functions.h math_functions.h cuda_profiler_api.h curand.h
curand_kernel.h cublas.h cublas_v2.h cufft.h cooperative_groups.h cuda_pipeline.h
""".split())


def is_system_header(name: str, modelled_dirs: tuple[str, ...]) -> bool:
    """A name a system or toolkit include directory holds (or a standard one when none is installed)."""
    if name in _KNOWN_SYSTEM_HEADERS:
        return True
    return any(os.path.isfile(os.path.join(d, name)) for d in modelled_dirs)


def _inside(path: str, directories: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d.rstrip(os.sep) + os.sep) for d in directories)


def _column(path: str, line: int, word: str) -> int:
    """The 1-based column of the first `word` on a line of a file (pcpp's tokens carry no column)."""
    try:
        text = Path(path).read_text().splitlines()[line - 1]
    except (OSError, UnicodeDecodeError, IndexError):
        return 1
    return text.find(word) + 1 or 1


def _last_location(pp: _CudaPreprocessor, filename: str) -> Location:
    """Where pcpp was when it failed: the last directive it handled, else the file's start."""
    tok = getattr(pp, "lastdirective", None)
    if tok is None or not getattr(tok, "source", None):
        return Location(filename, 1, 1)
    return pp.location_of(tok)


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
    result = preprocess_program(text, filename, defines, include_dirs, cuda_arch=cuda_arch)
    return result.text, result.macros


@dataclass
class Preprocessed:
    text: str                   # with #line markers naming the user's files
    macros: dict[str, str]      # object-like macros the files and -D defined
    #: The user files the preprocessor opened (not the main file), real path -> the user's name for it.
    user_files: dict[str, str] = field(default_factory=dict)


def preprocess_program(text: str, filename: str, defines: dict[str, str] | None = None,
                       include_dirs: list[str] | None = None, *,
                       cuda_arch: int | None = get_target(DEFAULT_TARGET).cuda_arch) -> Preprocessed:
    """preprocess(), also naming the user files the main file includes (directly or not)."""
    pp = _CudaPreprocessor(filename, include_dirs)
    pp.add_path(str(Path(filename).resolve().parent))
    for d in include_dirs or []:
        pp.add_path(d)
    # -D comes after the predefined macros so that it can replace them, as with nvcc.
    for name, value in {**nvcc_predefined_macros(cuda_arch), **(defines or {})}.items():
        pp.define(f"{name} {value}")
    _check_conditions(text, filename)
    out = io.StringIO()
    try:
        pp.parse(text, filename)
        pp.write(out)
    except CompileError:
        raise
    except Exception as err:  # noqa: BLE001 - pcpp itself failed on this input (a RecursionError too)
        raise pp.first_error or CompileError(f"the preprocessor could not process this file ({type(err).__name__}: "
                                             f"{str(err)[:200]})", _last_location(pp, filename)) from None
    if pp.first_error:
        raise pp.first_error
    macros = {}
    for name, macro in pp.macros.items():
        if macro.arglist is None and not name.startswith("__") and not getattr(macro, "modelled", False):
            macros[name] = "".join(tok.value for tok in macro.value).strip()
    return Preprocessed(_normalise_line_markers(out.getvalue(), pp), macros, dict(pp.user_files))


def _normalise_line_markers(text: str, pp: _CudaPreprocessor) -> str:
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("#line "):
            parts = line.split(" ", 2)
            if len(parts) == 3:
                named = parts[2].strip().strip('"')
                lines[k] = f'#line {parts[1]} "{pp.user_name(named)}"'
    return "\n".join(lines)
