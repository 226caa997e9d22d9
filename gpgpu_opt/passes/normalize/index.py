"""Canonical thread indices: the spellings of the global index that real kernels use, made the one the passes
recognise (`blockIdx.x * blockDim.x + threadIdx.x`).

Two steps, each a whitelist:

1. Copies of a built-in index (`int bx = blockIdx.x; int tx = threadIdx.x;`), declared once and never
   written again, are replaced by the built-in where they are used. The built-ins are `unsigned int`; an
   `unsigned` copy is the same value of the same type, so it is substituted everywhere. An `int` copy is
   substituted only where the type cannot show: every use sits in a sum or product of non-negative
   terms (built-ins, non-negative integer constants, other such copies) whose value initializes an
   integer variable or subscripts an array. There the unsigned sum equals the int one whenever the int one
   does not overflow (and an int overflow is undefined behaviour). Anywhere else (`bx - 1`,
   `tx < n`, a call) the copy stays.
2. `blockIdx.x * C` (C an integer constant, macros expanded: `bx * NUMBER_THREADS`) becomes
   `blockIdx.x * blockDim.x` only when every launch of the kernel in the file gives blocks of exactly C
   threads along x (likewise y), and the kernel is named nowhere else (a function pointer, a macro): the
   same value at every launch the program makes. A kernel the file does not launch keeps C, with a note.
   What this assumes: the file's launches are all the launches of the kernel (as the rewritten launch
   sites do).
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.ast_util import transform, walk
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext

_BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
#: The types of a copy that holds a built-in's value exactly (same type, or `int`, see step 1).
_UNSIGNED = ({"unsigned"}, {"unsigned", "int"})
_INTEGER_WORDS = {"int", "unsigned", "signed", "long", "short", "char", "size_t"}


def canonical_indices(kernel: Kernel, ctx: PassContext) -> None:
    """Both steps on the kernel's body, in place."""
    substitute_builtin_copies(kernel)
    block_size_products(kernel, ctx)


# -- step 1: copies of built-ins -----------------------------------------------------------------------

def substitute_builtin_copies(kernel: Kernel) -> None:
    body = kernel.body
    parents = _parents(body)
    copies = _builtin_copies(kernel)
    replaced = {name for name, (decl, exact) in copies.items()
                if exact or all(_int_use_is_safe(use, parents, copies) for use in _uses(body, name))}
    if not replaced:
        return

    def replace(n):
        if isinstance(n, c_ast.ID) and n.name in replaced:
            decl = copies[n.name][0]
            return c_ast.StructRef(c_ast.ID(decl.init.name.name, n.coord), ".",
                                   c_ast.ID(decl.init.field.name, n.coord), n.coord)
        return None
    transform(body, replace, skip_member_names=True)
    _drop_declarations(body, {id(copies[name][0]) for name in replaced})


def _builtin_copies(kernel: Kernel) -> dict[str, tuple[c_ast.Decl, bool]]:
    """name -> (its declaration, whether its type is the built-in's own): the locals declared once with a
    built-in as initializer and never written, of `unsigned` (exact) or `int` type."""
    decls = [n for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name]
    counts: dict[str, int] = {}
    for d in decls:
        counts[d.name] = counts.get(d.name, 0) + 1
    written = assigned_names(kernel.body)
    params = {p.name for p in kernel.params}
    items = kernel.body.block_items or []
    found = {}
    for k, d in enumerate(items):   # at the top of the body: every later use is in its scope
        if not isinstance(d, c_ast.Decl) or not d.name:
            continue
        words = _type_words(d)
        if words is None or counts[d.name] != 1 or d.name in written or d.name in params \
                or not _is_builtin(d.init) or d.bitsize is not None \
                or any(_uses(item, d.name) for item in items[:k]):   # (a file-scope name before it)
            continue
        if set(words) in _UNSIGNED:
            found[d.name] = (d, True)
        elif words == ["int"] or set(words) == {"signed", "int"}:
            found[d.name] = (d, False)
    return found


def _type_words(decl: c_ast.Decl) -> list[str] | None:
    """The type's words of a plain scalar declaration (qualifiers apart), else None."""
    t = decl.type
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return list(t.type.names)
    return None


def _is_builtin(node) -> bool:
    return isinstance(node, c_ast.StructRef) and node.type == "." and isinstance(node.name, c_ast.ID) \
        and node.name.name in _BUILTINS and isinstance(node.field, c_ast.ID) and node.field.name in ("x", "y", "z")


def _uses(body: c_ast.Node, name: str) -> list[c_ast.ID]:
    out, stack = [], [body]
    while stack:
        n = stack.pop()
        if isinstance(n, c_ast.StructRef):
            stack.append(n.name)        # `v.x`: the member's name is not a use of a variable x
            continue
        if isinstance(n, c_ast.ID) and n.name == name:
            out.append(n)
        stack.extend(child for _, child in n.children())
    return out


def _int_use_is_safe(use: c_ast.ID, parents: dict[int, c_ast.Node], copies: dict) -> bool:
    """The use sits in a sum/product of non-negative terms that initializes an integer variable or is a
    subscript (step 1's whitelist for an `int` copy)."""
    expr = use
    while isinstance(parents.get(id(expr)), c_ast.BinaryOp) and parents[id(expr)].op in ("+", "*"):
        expr = parents[id(expr)]
    if not _non_negative_terms(expr, copies):
        return False
    parent = parents.get(id(expr))
    if isinstance(parent, c_ast.Decl) and parent.init is expr:
        words = _type_words(parent)
        return words is not None and set(words) <= _INTEGER_WORDS
    return isinstance(parent, c_ast.ArrayRef) and parent.subscript is expr


def _non_negative_terms(expr, copies: dict) -> bool:
    if isinstance(expr, c_ast.BinaryOp) and expr.op in ("+", "*"):
        return _non_negative_terms(expr.left, copies) and _non_negative_terms(expr.right, copies)
    if isinstance(expr, c_ast.ID):
        return expr.name in copies
    if isinstance(expr, (c_ast.Constant, c_ast.Cast)):
        return _integer_constant(expr) is not None
    return _is_builtin(expr)


def _integer_constant(node) -> int | None:
    """A non-negative `int`/`unsigned int` literal's value (not a long one: it would widen the sum), also
    cast to one of those types (a template argument: `(int) 256`)."""
    if isinstance(node, c_ast.Cast):
        to = node.to_type.type
        if isinstance(to, c_ast.TypeDecl) and isinstance(to.type, c_ast.IdentifierType) \
                and set(to.type.names) in ({"int"}, {"unsigned"}, {"unsigned", "int"}):
            return _integer_constant(node.expr)
        return None
    if not (isinstance(node, c_ast.Constant) and node.type in ("int", "unsigned int")):
        return None
    try:
        value = int(node.value.rstrip("uU"), 0)
    except ValueError:
        return None
    return value if 0 <= value < 2 ** 31 else None


def _drop_declarations(body: c_ast.Node, dropped: set[int]) -> None:
    for n in walk(body):
        if isinstance(n, c_ast.Compound) and n.block_items:
            n.block_items = [s for s in n.block_items if id(s) not in dropped]


def _parents(body: c_ast.Node) -> dict[int, c_ast.Node]:
    parents = {}
    for n in walk(body):
        for _, child in n.children():
            parents[id(child)] = n
    return parents


# -- step 2: blockIdx * C as blockIdx * blockDim --------------------------------------------------------

def block_size_products(kernel: Kernel, ctx: PassContext) -> None:
    """`blockIdx.A * C` -> `blockIdx.A * blockDim.A` where every launch has blocks of C along A."""
    told: set[tuple[str, int]] = set()

    def replace(n):
        found = _block_times_constant(n)
        if found is None:
            return None
        axis, value, side = found
        proved = ctx.facts.launch_block[("x", "y").index(axis)] if axis in ("x", "y") else None
        if proved != value:
            if (axis, value) not in told:
                told.add((axis, value))
                ctx.log.skip(f"blockIdx.{axis} * {value}", _why_not(axis, value, proved, ctx.facts.launch_block_where),
                         Location.of(n))
            return None
        if (axis, value) not in told:
            told.add((axis, value))
            ctx.log.diagnostics.note(f"normalize: blockIdx.{axis} * {value} read as blockIdx.{axis} * blockDim.{axis}: "
                                 f"{ctx.facts.launch_block_where} has blocks of {value} threads along {axis}",
                                 Location.of(n), kernel=ctx.kernel_name)
        dim = c_ast.StructRef(c_ast.ID("blockDim", n.coord), ".", c_ast.ID(axis, n.coord), n.coord)
        if side == "right":
            n.right = dim
        else:
            n.left = dim
        return n
    transform(kernel.body, replace, skip_member_names=True)


def _block_times_constant(n) -> tuple[str, int, str] | None:
    """(axis, C, the side C is on) for `blockIdx.A * C` or `C * blockIdx.A`."""
    if not (isinstance(n, c_ast.BinaryOp) and n.op == "*"):
        return None
    for block, constant, side in ((n.left, n.right, "right"), (n.right, n.left, "left")):
        value = _integer_constant(constant)
        if value is not None and _is_builtin(block) and block.name.name == "blockIdx":
            return block.field.name, value, side
    return None


def _why_not(axis: str, value: int, proved: int | None, where: str) -> str:
    if proved is not None:
        return f"left as written: {where} has blocks of {proved} threads along {axis}, not {value}"
    return f"not read as blockIdx.{axis} * blockDim.{axis}: {where.rstrip(',')}"


__all__ = ["block_size_products", "canonical_indices", "substitute_builtin_copies"]
