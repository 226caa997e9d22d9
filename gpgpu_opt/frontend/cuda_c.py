"""Parsing CUDA kernels with pycparser.

pycparser parses C99. A kernel is C plus CUDA's qualifiers and builtins, so before parsing:
- `__global__ __device__ __host__ __forceinline__ __noinline__ __launch_bounds__(...)` are blanked
  (same width, so columns stay right) and recorded as the function's `funcspec`;
- `__shared__` becomes `_Thread_local` (a C storage class nobody writes in a kernel) and is turned back
  into the storage `__shared__` on the Decl; `__restrict__` becomes C99's `restrict` and `__align__(N)`
  C11's `_Alignas(N)`;
- a prelude declares CUDA's builtin variables, and the types and functions of the environment's tables
  (gpgpu_opt.frontend.environment, .math_api): `bool`, `uint32_t`, `__half`, the vector types, the Math API.
The printer (gpgpu_opt.codegen) restores the CUDA spellings.
"""
from __future__ import annotations

import re

from pycparser import c_ast, c_parser

from gpgpu_opt.diagnostics import CompileError, Location
from gpgpu_opt import cuda_types
from gpgpu_opt.frontend import environment
from gpgpu_opt.frontend.math_api import BY_NAME
from gpgpu_opt.frontend.scanner import tokenize

PRELUDE_FILE = "<cuda-prelude>"

def _type_declarations() -> str:
    """C99 declarations of the environment's types (gpgpu_opt.cuda_types)."""
    lines = [t.declaration for t in cuda_types.SCALAR_TYPES if t.declaration]
    lines += [f"typedef {a.target} {a.name};" for a in cuda_types.TYPE_ALIASES if a.name != "_Bool"]
    fields = "xyzw"
    for v in cuda_types.VECTOR_TYPES:
        lines.append(f"typedef struct {{ {v.base} {', '.join(fields[:v.n])}; }} {v.name};")
        if v.make:
            lines.append(f"{v.name} make_{v.name}({', '.join([v.base] * v.n)});")
    lines += [f"typedef {name} {alias};" for alias, name in cuda_types.VECTOR_ALIASES.items()]
    lines += [f"extern const bool {name};" for name in environment.BOOL_LITERALS]
    return "\n".join(lines)


def _c_type(text: str) -> str:
    """A parameter or return type of the Math API table as C (generic `T`: any declaration parses)."""
    return {"T": "int", "T *": "void *"}.get(text, text)


def _function_declarations() -> str:
    """One prototype per name of the Math API table (pycparser checks no types: the emulator does)."""
    lines = []
    for name, entries in BY_NAME.items():
        f = entries[0]
        lines.append(f"{_c_type(f.returns)} {name}({', '.join(_c_type(p) for p in f.params) or 'void'});")
    return "\n".join(lines)


PRELUDE = f"""
{_type_declarations()}
typedef struct {{ unsigned int x, y, z; }} dim3;
extern uint3 threadIdx; extern uint3 blockIdx; extern dim3 blockDim; extern dim3 gridDim; extern int warpSize;
void __syncthreads(void); void __syncwarp(unsigned int); void __threadfence(void);
int __syncthreads_count(int); int __syncthreads_and(int); int __syncthreads_or(int);
{_function_declarations()}
float atomicAdd(float *, float); int atomicMax(int *, int); int atomicMin(int *, int);
float __shfl_down_sync(unsigned int, float, int); float __shfl_xor_sync(unsigned int, float, int);
float __shfl_sync(unsigned int, float, int); float __shfl_up_sync(unsigned int, float, int);
unsigned int __ballot_sync(unsigned int, int); int __all_sync(unsigned int, int); int __any_sync(unsigned int, int);
int atomicSub(int *, int); int atomicExch(int *, int); int atomicCAS(int *, int, int); int atomicAnd(int *, int);
int atomicOr(int *, int); int atomicXor(int *, int); unsigned int atomicInc(unsigned int *, unsigned int);
unsigned int atomicDec(unsigned int *, unsigned int); void __threadfence_block(void);
"""

_BLANKED = {"__global__", "__device__", "__host__", "__forceinline__", "__noinline__", "__inline__"}
_FUNCSPEC_ORDER = ["__global__", "__host__", "__device__", "__forceinline__", "__noinline__"]


def cuda_to_c(text: str) -> tuple[str, list[str], list[str]]:
    """Rewrite CUDA-only spellings in one function's text (see module doc).
    Returns the C text, the CUDA function qualifiers, and `__launch_bounds__` arguments if any."""
    out = []
    last = 0
    qualifiers: list[str] = []
    launch_bounds: list[str] = []
    tokens = tokenize(text)
    skip_until = -1
    for k, tok in enumerate(tokens):
        if tok.start < skip_until:
            continue
        replacement = None
        if tok.kind == "ident" and tok.text in _BLANKED:
            qualifiers.append(tok.text)
            replacement = " " * len(tok.text)
        elif tok.kind == "ident" and tok.text == "__shared__":
            replacement = "_Thread_local"
        elif tok.kind == "ident" and tok.text == "__align__":
            replacement = "_Alignas "
        elif tok.kind == "ident" and tok.text in ("__restrict__", "__restrict"):
            replacement = "restrict".ljust(len(tok.text))
        elif tok.kind == "ident" and tok.text == "__launch_bounds__":
            close = _close_paren(tokens, k + 1)
            launch_bounds = [text[tokens[k + 2].start:tokens[close - 1].end]] if close > k + 2 else []
            end = tokens[close].end
            out.append(text[last:tok.start])
            out.append(re.sub(r"[^\n]", " ", text[tok.start:end]))
            last = skip_until = end
            continue
        if replacement is not None:
            out.append(text[last:tok.start])
            out.append(replacement)
            last = tok.end
    out.append(text[last:])
    ordered = [q for q in _FUNCSPEC_ORDER if q in qualifiers]
    return "".join(out), ordered, launch_bounds


def _close_paren(tokens, i: int) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].text == "(":
            depth += 1
        elif tokens[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


_PARSE_ERROR = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$", re.DOTALL)


class _Parser(c_parser.CParser):
    """pycparser, with every syntax error placed at the token where parsing stopped, and able to start a
    translation unit in the scope the prelude leaves (its typedef names), so the prelude is parsed once."""

    def __init__(self, scope: dict[str, bool] | None = None):
        super().__init__()
        self._prelude_scope = scope

    def _parse_translation_unit_or_empty(self):
        if self._prelude_scope:
            self._scope_stack[0].update(self._prelude_scope)
        return super()._parse_translation_unit_or_empty()

    def _parse_error(self, msg, coord):
        if coord is None or isinstance(coord, str):
            tok = self._peek()
            if tok is not None:
                coord = self._tok_coord(tok)
                msg = f"{msg} before: {tok.value}" if "before" not in msg else msg
        super()._parse_error(msg, coord)


def _parsed_prelude() -> tuple[tuple[c_ast.Node, ...], dict[str, bool], int]:
    """The prelude's declarations, the scope they leave (name -> whether it is a typedef), and the line the
    text after it starts on. Parsing the prelude (~600 lines) was most of every kernel parse's time."""
    parser = _Parser()
    ast = parser.parse(f'#line 1 "{PRELUDE_FILE}"\n{PRELUDE}\n', filename=PRELUDE_FILE)
    return tuple(ast.ext), dict(parser._scope_stack[0]), PRELUDE.count("\n") + 2


_PRELUDE_DECLARATIONS, _PRELUDE_SCOPE, _TEXT_LINE = _parsed_prelude()


def parse_c(text: str, filename: str) -> c_ast.FileAST:
    """Parse C text that carries its own #line markers; errors become CompileErrors in the user's file.
    The result starts with the prelude's declarations (shared between results: nothing may change them),
    and text before its first #line marker is placed as if it followed the prelude, as it always was."""
    parser = _Parser(_PRELUDE_SCOPE)
    source = f'#line {_TEXT_LINE} "{PRELUDE_FILE}"\n{text}'
    try:
        ast = parser.parse(source, filename=filename)
    except c_parser.ParseError as err:
        m = _PARSE_ERROR.match(str(err))
        if m and not m.group("file").startswith("<"):
            raise CompileError(_describe_parse_error(m.group("msg")),
                               Location(m.group("file"), int(m.group("line")), int(m.group("col")))) from None
        raise CompileError(_describe_parse_error(str(err)), Location(filename, 1, 1)) from None
    ast.ext[:0] = _PRELUDE_DECLARATIONS
    return ast


def _describe_parse_error(msg: str) -> str:
    m = re.match(r"(?:Invalid expression )?before: (.*)", msg.strip())
    if m:
        what = "expression" if msg.startswith("Invalid expression") else "expression or statement"
        return f"expected {what} before '{m.group(1)}'"
    if "At end of input" in msg:
        return "unexpected end of input (unterminated block?)"
    return msg.strip()


def restore_cuda_storage(node: c_ast.Node) -> None:
    """Turn the `_Thread_local` placeholder back into `__shared__`."""
    for _, child in node.children():
        restore_cuda_storage(child)
    if isinstance(node, c_ast.Decl) and "_Thread_local" in node.storage:
        node.storage = ["__shared__" if s == "_Thread_local" else s for s in node.storage]


def prelude_names() -> set[str]:
    ast = c_parser.CParser().parse(PRELUDE, filename=PRELUDE_FILE)
    names = set()
    for ext in ast.ext:
        if isinstance(ext, c_ast.Decl) and ext.name:
            names.add(ext.name)
        elif isinstance(ext, c_ast.Typedef):
            names.add(ext.name)
    return names


PRELUDE_NAMES = frozenset(prelude_names())
