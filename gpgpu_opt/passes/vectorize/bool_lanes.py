"""`bool` locals widened as `int` lanes: CUDA has no vector of bool, so widen (which holds each x-dependent
local as a vector of its type) could not widen a kernel with a flag like `bool negative = v < 0.0f;`.

A bool holds 0 or 1, and so does an int assigned only 0/1 values; where the flag is only tested, the two
read alike. So, before widening, a bool local is declared `int` when (a whitelist, else it stays bool and
widen says why it cannot widen):
- every value it is given (its initializer, each assignment) is one C makes 0 or 1: a comparison, `!`,
  `&&`, `||`, `true`/`false`, 0 or 1, another such flag, or a `?:` of those;
- every use of it is a test: the condition of an `if`, a `?:`, a loop, an operand of `!`, `&&`, `||`, or of
  `==`/`!=` against another such value, or the value given to another such flag (never arithmetic, a call,
  `&`, `sizeof` or a store to memory, where bool's own conversions or overloads could differ).
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import walk

_TESTS = ("<", ">", "<=", ">=", "==", "!=", "&&", "||")


def bool_locals_as_int(body: c_ast.Node) -> list[str]:
    """Declare the flags of `body` (the kernel's, rewritten in place) `int` where the module doc allows;
    returns their names."""
    decls = {d.name: d for d in walk(body) if isinstance(d, c_ast.Decl) and _is_bool(d)}
    counts: dict[str, int] = {}
    for d in walk(body):
        if isinstance(d, c_ast.Decl) and d.name:
            counts[d.name] = counts.get(d.name, 0) + 1
    flags = {name for name in decls if counts[name] == 1}
    changed = True
    while changed:      # a flag given another flag's value is one only if that one is
        changed = False
        for name in sorted(flags):
            if not _values_are_flags(body, name, decls[name], flags) or not _uses_are_tests(body, name, flags):
                flags.discard(name)
                changed = True
    for name in flags:
        decls[name].type.type.names = ["int"]
    return sorted(flags)


def _is_bool(decl: c_ast.Decl) -> bool:
    t = decl.type
    return isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType) and t.type.names == ["bool"]


def _flag_valued(e, flags: set[str]) -> bool:
    if isinstance(e, c_ast.BinaryOp):
        return e.op in _TESTS
    if isinstance(e, c_ast.UnaryOp):
        return e.op == "!"
    if isinstance(e, c_ast.ID):
        return e.name in flags or e.name in ("true", "false")
    if isinstance(e, c_ast.Constant):
        return e.value in ("0", "1", "true", "false")
    if isinstance(e, c_ast.TernaryOp):
        return _flag_valued(e.iftrue, flags) and _flag_valued(e.iffalse, flags)
    return False


def _values_are_flags(body, name: str, decl: c_ast.Decl, flags: set[str]) -> bool:
    if decl.init is not None and not _flag_valued(decl.init, flags):
        return False
    for n in walk(body):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name == name:
            if n.op != "=" or not _flag_valued(n.rvalue, flags):
                return False
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") and \
                isinstance(n.expr, c_ast.ID) and n.expr.name == name:
            return False
    return True


def _uses_are_tests(body, name: str, flags: set[str]) -> bool:
    parents = {}
    for n in walk(body):
        for attr, child in n.children():
            parents[id(child)] = (n, attr)
    for n in walk(body):
        if not (isinstance(n, c_ast.ID) and n.name == name):
            continue
        parent, attr = parents.get(id(n), (None, None))
        if isinstance(parent, c_ast.Assignment) and attr == "lvalue":
            continue            # a value given to it (checked by _values_are_flags)
        if isinstance(parent, (c_ast.If, c_ast.TernaryOp, c_ast.While, c_ast.DoWhile, c_ast.For)) and attr == "cond":
            continue
        if isinstance(parent, c_ast.UnaryOp) and parent.op == "!":
            continue
        if isinstance(parent, c_ast.BinaryOp) and parent.op in ("&&", "||"):
            continue
        if isinstance(parent, c_ast.BinaryOp) and parent.op in ("==", "!=") and \
                _flag_valued(parent.right if attr == "left" else parent.left, flags):
            continue
        if isinstance(parent, c_ast.Assignment) and attr == "rvalue" and isinstance(parent.lvalue, c_ast.ID) \
                and parent.lvalue.name in flags:
            continue
        if isinstance(parent, c_ast.Decl) and attr == "init" and parent.name in flags:
            continue
        return False
    return True
