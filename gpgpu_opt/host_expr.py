"""Evaluating host C expressions the way the program computes them, e.g. a launch configuration
`dim3 grid((size_t)ceil(((float)NJ) / ((float)block.x)), 1)` or `(n + 255) / 256`.

C semantics where they matter for launch shapes: integer and floating arithmetic are kept apart (int/int
truncates toward zero), casts convert, `ceil`/`floor` work on floating values. Floating values are Python
floats (double precision); a `float` computation that rounds differently in single precision is not
modelled. Names are looked up in given values (`--size`, launch arguments), then object-like macros, then
host variables declared once with an initializer (`const int N = 64;`), and `dim3` variables (`block.x`).
Anything else (a call of `arg_int`, a variable assigned twice, C++ syntax) makes the result None."""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

from pycparser import c_ast, c_parser

from gpgpu_opt.ast_util import call_args, call_name, is_call_to
from gpgpu_opt.cuda_types import size_of

Number = int | float

# Host headers declare these; pycparser needs them as types to parse `(size_t)x` as a cast.
_TYPEDEFS = ("size_t", "ssize_t", "uint", "int32_t", "uint32_t", "int64_t", "uint64_t")
_PRELUDE = "".join(f"typedef int {name};\n" for name in _TYPEDEFS)
_FLOAT_TYPES = {"float", "double"}
_FUNCTIONS = {"ceil": math.ceil, "ceilf": math.ceil, "floor": math.floor, "floorf": math.floor,
              "min": min, "max": max, "fmin": min, "fmax": max, "fminf": min, "fmaxf": max}
_FLOAT_RESULT = {"ceil", "ceilf", "floor", "floorf", "fmin", "fmax", "fminf", "fmaxf"}


class _Unknown(Exception):
    """The expression depends on something the host text does not tell."""


@functools.lru_cache(maxsize=None)
def _parser() -> c_parser.CParser:
    return c_parser.CParser()


@functools.lru_cache(maxsize=4096)
def parse_host_expression(text: str) -> c_ast.Node | None:
    """The expression as c_ast, or None when it is not C (C++ casts, braces, ...)."""
    try:
        ast = _parser().parse(f"{_PRELUDE}int __e = {text};", filename="<host>")
    except Exception:  # noqa: BLE001 - pycparser raises several kinds of errors; all mean "not C"
        return None
    return ast.ext[-1].init


def split_top_level(text: str, keep_spacing: bool = False) -> list[str]:
    """`a, f(b, c)` -> ['a', 'f(b, c)']: split at the commas outside brackets (each part stripped, unless
    `keep_spacing`: then the parts and the commas between them are the whole text, for offsets)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(current if keep_spacing else current.strip())
            current = ""
        else:
            current += ch
    parts.append(current if keep_spacing else current.strip())
    return parts


_SCALAR_DECL = re.compile(r"\b(?:(?:const|static|constexpr)\s+)*(?P<type>unsigned\s+int|unsigned\s+long|unsigned|"
                          r"long\s+long|long|int|short|size_t|float|double)\s+(?P<name>[A-Za-z_]\w*)\s*="
                          r"(?!=)\s*(?P<init>[^;{}]+?)\s*;")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass
class HostDeclarations:
    """Host variables whose value the text fixes at a launch site: declared with an initializer, not assigned
    again before the site (host_scopes.declarations_at finds them)."""
    scalars: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (type, initializer text)
    dim3: dict[str, list[str] | None] = field(default_factory=dict)    # name -> components; None: ambiguous
    reasons: dict[str, str] = field(default_factory=dict)              # name -> why its value is unknown
    #: `cudaDeviceProp` variables that only cudaGetDeviceProperties fills (their members are only read):
    #: their `maxThreadsPerBlock` is the GPU's own.
    device_props: set[str] = field(default_factory=set)


def evaluate_int(text: str, macros: dict[str, str]) -> int | None:
    """Evaluate a host integer expression made of literals and object-like macros; None otherwise."""
    return HostScope(macros).evaluate_int(text)


class HostScope:
    """What host expressions can refer to. `values` (given sizes) win over macros and host declarations."""

    def __init__(self, macros: dict[str, str] | None = None, values: dict[str, Number] | None = None,
                 declarations: HostDeclarations | None = None):
        self.macros = macros or {}
        self.values = dict(values or {})
        self.declarations = declarations or HostDeclarations()
        self._active: set[str] = set()  # names being evaluated, so a cycle is unknown and not a hang

    def evaluate(self, text: str) -> Number | None:
        node = parse_host_expression(text)
        try:
            return None if node is None else self._eval(node)
        except (_Unknown, ArithmeticError, ValueError, TypeError, RecursionError):
            return None

    def evaluate_int(self, text: str) -> int | None:
        """The value converted to an integer, as assigning it to an `int` does."""
        value = self.evaluate(text)
        return None if value is None else math.trunc(value)

    def dim3(self, text: str) -> tuple[int | None, int | None, int | None] | None:
        """A launch configuration argument as (x, y, z): a number, `dim3(...)` or a dim3 variable; a
        component that cannot be evaluated is None. None when `text` is not an expression at all."""
        node = parse_host_expression(text)
        if node is None:
            return None
        if isinstance(node, c_ast.ID) and node.name in self.declarations.dim3 and node.name not in self.values:
            components = self.declarations.dim3[node.name]
        elif is_call_to(node, "dim3"):
            components = split_top_level(text[text.index("(") + 1:text.rindex(")")])
        else:
            components = [text]
        if components is None or not 1 <= len(components) <= 3:
            return None, None, None
        values = [self.evaluate_int(c) for c in components] + [1] * (3 - len(components))
        return values[0], values[1], values[2]

    # -- evaluation -------------------------------------------------------------------------------
    def _eval(self, node: c_ast.Node) -> Number:
        method = getattr(self, f"_eval_{type(node).__name__}", None)
        if method is None:
            raise _Unknown(type(node).__name__)
        return method(node)

    def _eval_Constant(self, node: c_ast.Constant) -> Number:
        text = node.value
        if node.type in ("float", "double", "long double"):
            return float(text.rstrip("fFlL"))
        if node.type == "char":
            raise _Unknown("character constant")
        text = text.rstrip("uUlL")
        return int(text, 8) if len(text) > 1 and text[0] == "0" and text[1].isdigit() else int(text, 0)

    def _eval_ID(self, node: c_ast.ID) -> Number:
        name = node.name
        if name in self.values:
            return self.values[name]
        if name in self._active:
            raise _Unknown(f"'{name}' refers to itself")
        self._active.add(name)
        try:
            if name in self.macros:
                return self._eval_text(self.macros[name])
            if name in self.declarations.scalars:
                type_name, init = self.declarations.scalars[name]
                return _convert(self._eval_text(init), type_name)
        finally:
            self._active.discard(name)
        raise _Unknown(f"no value for '{name}'")

    def _eval_text(self, text: str) -> Number:
        node = parse_host_expression(text)
        if node is None:
            raise _Unknown(text)
        return self._eval(node)

    def _eval_StructRef(self, node: c_ast.StructRef) -> Number:
        """`block.x`: a component of a dim3 variable."""
        axis = "xyz".find(node.field.name)
        if node.type != "." or not isinstance(node.name, c_ast.ID) or axis < 0 or len(node.field.name) != 1:
            raise _Unknown("member access")
        name = node.name.name
        if name not in self.declarations.dim3 or name in self._active:
            raise _Unknown(f"'{name}' is not a known dim3")
        self._active.add(name)
        try:
            value = self.dim3(name)[axis]
        finally:
            self._active.discard(name)
        if value is None:
            raise _Unknown(f"{name}.{node.field.name}")
        return value

    def _eval_Cast(self, node: c_ast.Cast) -> Number:
        to = node.to_type.type
        if not (isinstance(to, c_ast.TypeDecl) and isinstance(to.type, c_ast.IdentifierType)):
            raise _Unknown("pointer cast")
        return _convert(self._eval(node.expr), " ".join(to.type.names))

    def _eval_UnaryOp(self, node: c_ast.UnaryOp) -> Number:
        if node.op == "sizeof":
            return _sizeof(node.expr)
        value = self._eval(node.expr)
        if node.op == "-":
            return -value
        if node.op == "+":
            return value
        if node.op == "!":
            return int(not value)
        if node.op == "~" and isinstance(value, int):
            return ~value
        raise _Unknown(f"operator {node.op}")

    def _eval_BinaryOp(self, node: c_ast.BinaryOp) -> Number:
        if node.op == "&&":
            return int(bool(self._eval(node.left)) and bool(self._eval(node.right)))
        if node.op == "||":
            return int(bool(self._eval(node.left)) or bool(self._eval(node.right)))
        return _arithmetic(node.op, self._eval(node.left), self._eval(node.right))

    def _eval_TernaryOp(self, node: c_ast.TernaryOp) -> Number:
        return self._eval(node.iftrue if self._eval(node.cond) else node.iffalse)

    def _eval_FuncCall(self, node: c_ast.FuncCall) -> Number:
        name = call_name(node)
        capped = self._block_capped_by_device(name, call_args(node))
        if capped is not None:
            return capped
        if name not in _FUNCTIONS:
            raise _Unknown(f"call of {name}")
        args = [self._eval(a) for a in call_args(node)]
        if not args:
            raise _Unknown(f"{name}()")
        result = _FUNCTIONS[name](*args)
        return float(result) if name in _FLOAT_RESULT else result


    def _block_capped_by_device(self, name: str | None, args: list[c_ast.Node]) -> int | None:
        """`min(prop.maxThreadsPerBlock, C)` (either order; prop a cudaDeviceProp that only
        cudaGetDeviceProperties fills) is C where C is at most the max threads per block of every target (512 on
        cc 1.x, 1024 since): whatever GPU runs it, its maximum is not below C. None for any other shape."""
        if name != "min" or len(args) != 2:
            return None
        limits = [a for a in args if isinstance(a, c_ast.StructRef) and a.type == "." and isinstance(a.name, c_ast.ID)
                  and a.name.name in self.declarations.device_props and a.field.name == "maxThreadsPerBlock"]
        if len(limits) != 1:
            return None
        value = self._eval(args[1] if limits[0] is args[0] else args[0])
        return value if isinstance(value, int) and 0 < value <= _SMALLEST_MAX_BLOCK else None


def _smallest_max_block() -> int:
    from gpgpu_opt.targets import TARGETS

    return min(t.max_threads_per_block for t in TARGETS.values())


_SMALLEST_MAX_BLOCK = _smallest_max_block()


def _convert(value: Number, type_name: str) -> Number:
    if type_name in _FLOAT_TYPES:
        return float(value)
    return math.trunc(value)


def _sizeof(node) -> int:
    if isinstance(node, c_ast.Typename):
        if isinstance(node.type, c_ast.PtrDecl):
            return 8
        if isinstance(node.type, c_ast.TypeDecl) and isinstance(node.type.type, c_ast.IdentifierType):
            size = size_of(" ".join(node.type.type.names))
            if size is not None:
                return size
    raise _Unknown("sizeof")


def _arithmetic(op: str, a: Number, b: Number) -> Number:
    floating = isinstance(a, float) or isinstance(b, float)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        if b == 0:
            raise _Unknown("division by zero")
        if floating:
            if op == "%":
                raise _Unknown("% of a floating value")
            return a / b
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncates toward zero
        return quotient if op == "/" else a - b * quotient
    comparisons = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
    if op in comparisons:
        return int(comparisons[op])
    if floating:
        raise _Unknown(f"{op} of a floating value")
    if op == "<<":
        return a << b
    if op == ">>":
        return a >> b
    if op in ("&", "|", "^"):
        return {"&": a & b, "|": a | b, "^": a ^ b}[op]
    raise _Unknown(f"operator {op}")
