"""Recognizing a grid-stride loop, the idiom of modern CUDA, in a kernel's syntax tree:

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) body

with the factors and terms in any order, the start held in a local (`int tid = ...; for (int i = tid; ...)`
or `for (; idx < n; ...)`), the stride in a local (`int stride = gridDim.x * blockDim.x;`), `i = i + S`, any
integer type for i. The loop must be the kernel's work: before it only declarations of scalars, after it
nothing. Whether its iterations are independent is independence.py's question.
"""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import walk

#: Index types wider than the 32-bit `blockIdx.x * blockDim.x + threadIdx.x`: past 2^32 elements the canonical
#: index must be computed in the index's type, as the loop's `i += stride` did.
WIDE_TYPES = {"size_t", "long", "unsigned long", "long long", "unsigned long long", "int64_t", "uint64_t",
              "long int", "unsigned long int", "ptrdiff_t"}
INTEGER_TYPES = {"ptrdiff_t", "int", "unsigned", "unsigned int", "long", "unsigned long", "long long", "unsigned long long",
                 "size_t", "uint", "uint32_t", "int64_t", "uint64_t", "long int", "unsigned long int"}


class NotGridStride(Exception):
    """The kernel has no grid-stride loop (nothing to say)."""


class Declined(Exception):
    """The kernel has a grid-stride loop that is not canonicalized: the message says why (a note)."""


@dataclass
class GridStride:
    loop: c_ast.For
    var: str                    # the loop's index
    bound: c_ast.Node           # n in `i < n`
    ordinal: int                # the loop is the kernel's ordinal-th `for` in source order
    locals_used: set[str]       # locals of the preamble the loop's header names (the start, the stride)
    stride_local: str | None    # a local holding blockDim.x * gridDim.x, deleted with the loop's header
    index_type: str = "int"     # the index's type as written
    start_local: str | None = None  # `for (int i = tid; ...)`: the local holding the global index

    @property
    def wide(self) -> bool:
        return self.index_type in WIDE_TYPES


def builtin(n: c_ast.Node) -> tuple[str, str] | None:
    """('blockIdx', 'x') for `blockIdx.x`, else None."""
    if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and isinstance(n.field, c_ast.ID) \
            and n.name.name in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
        return n.name.name, n.field.name
    return None


def _factors(n: c_ast.Node) -> set | None:
    if isinstance(n, c_ast.BinaryOp) and n.op == "*":
        a, b = builtin(n.left), builtin(n.right)
        return {a, b} if a and b else None
    return None


def is_global_id(n: c_ast.Node) -> bool:
    """blockIdx.x * blockDim.x + threadIdx.x, in any order."""
    if not (isinstance(n, c_ast.BinaryOp) and n.op == "+"):
        return False
    for product, tid in ((n.left, n.right), (n.right, n.left)):
        if builtin(tid) == ("threadIdx", "x") and _factors(product) == {("blockIdx", "x"), ("blockDim", "x")}:
            return True
    return False


def is_grid_size(n: c_ast.Node) -> bool:
    """blockDim.x * gridDim.x, in either order."""
    return _factors(n) == {("blockDim", "x"), ("gridDim", "x")}


def _scalar_decl(item: c_ast.Node) -> c_ast.Decl | None:
    if isinstance(item, c_ast.Decl) and isinstance(item.type, c_ast.TypeDecl) \
            and isinstance(item.type.type, c_ast.IdentifierType):
        return item
    return None


def _type_of(decl: c_ast.Decl) -> str:
    return " ".join(n for n in decl.type.type.names)


def find(body: c_ast.Compound) -> GridStride:
    """The kernel's grid-stride loop, raising NotGridStride when it has none, Declined when it has one of a
    shape this module does not canonicalize (the loop is then kept, with the message as a note)."""
    items = list(body.block_items or [])
    while items and isinstance(items[-1], c_ast.Return) and items[-1].expr is None:
        items.pop()     # a trailing `return;` ends the kernel anyway
    fors = [n for n in walk(body) if isinstance(n, c_ast.For)]
    steps = [f for f in fors if f.next is not None and _strides_by_grid(f.next, _locals(items))]
    if not steps:
        _other_strides(body)
        raise NotGridStride()
    loop = steps[0]
    if not items or items[-1] is not loop:
        raise Declined("the grid-stride loop is not the kernel's last statement (the code around it may "
                       "depend on which elements a thread visits)")
    preamble = items[:-1]
    decls = {}
    for item in preamble:
        decl = _scalar_decl(item)
        if decl is None:
            raise Declined("before the grid-stride loop the kernel does more than declare scalars")
        decls[decl.name] = decl
    var, start, index_type = _index(loop, decls)
    if not (isinstance(loop.cond, c_ast.BinaryOp) and loop.cond.op == "<" and isinstance(loop.cond.left, c_ast.ID)
            and loop.cond.left.name == var):
        raise Declined(f"the grid-stride loop's condition is not '{var} < n'")
    step_local = _step(loop.next, var, decls)
    if not is_global_id(start):
        raise Declined(f"the grid-stride loop's '{var}' does not start at blockIdx.x * blockDim.x + threadIdx.x")
    used = {n.name for n in walk(loop.init) if isinstance(n, c_ast.ID)} if loop.init is not None else set()
    used |= {step_local} if step_local else set()
    init = loop.init.decls[0].init if isinstance(loop.init, c_ast.DeclList) else None
    init = init.expr if isinstance(init, c_ast.Cast) else init
    start_local = init.name if isinstance(init, c_ast.ID) and init.name in decls else None
    return GridStride(loop, var, loop.cond.right, fors.index(loop), used & set(decls), step_local, index_type,
                      start_local)


def _other_strides(body: c_ast.Compound) -> None:
    """Loops that stride by the grid in another way (in y, by whole blocks, a while loop) are kept: a note."""
    for n in walk(body):
        if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)):
            advance = n.next if isinstance(n, c_ast.For) else n.stmt
            if advance is not None and any(builtin(m) and builtin(m)[0] == "gridDim" for m in walk(advance)):
                kind = "while loop" if not isinstance(n, c_ast.For) else "loop"
                raise Declined(f"a {kind} that strides by the grid other than `for (i = blockIdx.x * blockDim.x + "
                               "threadIdx.x; i < n; i += blockDim.x * gridDim.x)` (in y, by whole blocks, or "
                               "advanced in its body) is not canonicalized")


def _locals(items: list) -> dict[str, c_ast.Decl]:
    return {d.name: d for d in map(_scalar_decl, items) if d is not None}


def _strides_by_grid(step: c_ast.Node, decls: dict) -> bool:
    """Is the step `v += S` / `v = v + S` with S the grid's size (or a local set to it)?"""
    stride = _stride_of(step)
    if stride is None:
        return False
    if isinstance(stride, c_ast.ID) and stride.name in decls:
        stride = decls[stride.name].init
    return stride is not None and is_grid_size(stride)


def _stride_of(step: c_ast.Node) -> c_ast.Node | None:
    if isinstance(step, c_ast.Assignment) and isinstance(step.lvalue, c_ast.ID):
        if step.op == "+=":
            return step.rvalue
        r = step.rvalue
        if step.op == "=" and isinstance(r, c_ast.BinaryOp) and r.op == "+" and isinstance(r.left, c_ast.ID) \
                and r.left.name == step.lvalue.name:
            return r.right
    return None


def _index(loop: c_ast.For, decls: dict) -> tuple[str, c_ast.Node, str]:
    """The loop's index and the expression it starts at (a local's initializer followed through)."""
    init = loop.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and _scalar_decl(init.decls[0]):
        decl = init.decls[0]
        var, start = decl.name, decl.init
        kind = _type_of(decl)
    elif init is None and isinstance(loop.next, c_ast.Assignment) and isinstance(loop.next.lvalue, c_ast.ID) \
            and loop.next.lvalue.name in decls:
        decl = decls[loop.next.lvalue.name]
        var, start, kind = decl.name, decl.init, _type_of(decl)
    else:
        raise Declined("the grid-stride loop does not declare its index in its header")
    if kind not in INTEGER_TYPES or start is None:
        raise Declined(f"the grid-stride loop's index '{var}' is not an integer that starts at a thread's index")
    if isinstance(start, c_ast.Cast):
        start = start.expr      # `(size_t)gid`: the cast widens a value below the grid's size
    if isinstance(start, c_ast.ID) and start.name in decls and start.name != var:
        start = decls[start.name].init
        if isinstance(start, c_ast.Cast):
            start = start.expr
    return var, start, kind


def _step(step: c_ast.Node, var: str, decls: dict) -> str | None:
    """The local the step reads its stride from (None: it writes blockDim.x * gridDim.x itself)."""
    if not (isinstance(step, c_ast.Assignment) and isinstance(step.lvalue, c_ast.ID) and step.lvalue.name == var):
        raise Declined("the grid-stride loop's step does not advance its index")
    stride = _stride_of(step)
    return stride.name if isinstance(stride, c_ast.ID) else None


__all__ = ["Declined", "GridStride", "NotGridStride", "builtin", "find", "is_global_id", "is_grid_size"]
