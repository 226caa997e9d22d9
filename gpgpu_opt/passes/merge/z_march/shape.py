"""The naive 3-D stencil shape z marching takes (z_march/__init__ says why), recognized as a whitelist.

    int z = blockIdx.z * blockDim.z + threadIdx.z;    (any order; the only use of the z builtins)
    ...integer locals, no loads...
    if (x < nx && y < ny && z < nz) {                 (the guard, as merge's early-return form writes it;
                                                       an interior stencil's `z > 0 &&` too: a constant first z)
        ...locals, each defined once...
        out[own element] = value;                     (the one store, last)
    }

Every integer local and every subscript is translated exactly into sympy (`+ - *`, `min`/`max` as
Min/Max, an edge clamp `c ? a : b` as a Piecewise on its comparison): the carry proof (carry.py) compares
the addresses themselves, clamps included, so no interior piece is taken on trust."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.ast_util import call_args, call_name, ids_in, walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting.cbuild import Unsupported, text

#: Calls a naive stencil's value may make: pure math, nothing that talks to other threads or memory.
PURE_CALLS = frozenset({"min", "max", "umin", "umax", "fminf", "fmaxf", "fmin", "fmax", "fabsf", "fabs",
                        "sqrtf", "sqrt", "expf", "exp", "logf", "log", "sinf", "cosf", "powf", "pow"})
#: Element types a carried register may hold.
SCALARS = frozenset({"float", "double", "int", "unsigned int", "unsigned", "long", "long long", "short",
                     "char", "unsigned char"})
_BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
_RELATIONS = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass
class Shape:
    """A recognized kernel: `before` the statements ahead of the guard (the z definition left out), the
    guard's clauses that do not name z (`clauses`) and its bound on z (`bound`: z < bound), `inside` the
    guarded statements, the store, and each local's exact value."""
    z: str
    z_decl: c_ast.Decl
    before: list[c_ast.Node]
    clauses: list[c_ast.Node]
    bound: c_ast.Node
    bound_value: sympy.Expr
    inside: list[c_ast.Node]
    store: c_ast.Assignment
    #: The first z the guard lets run (`z > 0` gives 1), where it bounds z from below; else None.
    first: int | None = None
    values: dict[str, sympy.Expr] = field(default_factory=dict)
    #: Locals whose value depends on z (directly or through another local).
    z_locals: set[str] = field(default_factory=set)


def z_symbol() -> sympy.Symbol:
    return sympy.Symbol("z__", integer=True)


def recognize(kernel: Kernel) -> tuple[Shape, "Exact"]:
    """The kernel's shape, and the translator that read its locals (Unsupported: not the naive shape)."""
    items = list(kernel.body.block_items or [])
    z_decl = _z_definition(items)
    z = z_decl.name
    _check_builtins(kernel, z_decl)
    _check_statements(kernel)
    if not items or not isinstance(items[-1], c_ast.If) or items[-1].iffalse is not None:
        raise Unsupported("the kernel does not end in its guard `if (... z < nz) { ... }` (the bound each "
                          "thread's march stops at)")
    guard = items[-1]
    before = [s for s in items[:-1] if s is not z_decl]
    if not all(isinstance(s, c_ast.Decl) for s in before):
        raise Unsupported("statements other than declarations come before the guard")
    inside = list(guard.iftrue.block_items or []) if isinstance(guard.iftrue, c_ast.Compound) else [guard.iftrue]
    shape = Shape(z, z_decl, before, [], None, None, inside, None)
    translator = Exact(kernel, shape)
    for decl in before:
        translator.define(decl, loads_allowed=False)
    shape.clauses, shape.bound, shape.first = _split_guard(guard.cond, z, shape)
    shape.bound_value = translator.value(shape.bound)
    if shape.bound_value.free_symbols - translator.parameters:
        raise Unsupported(f"the guard's bound on {z} `{text(shape.bound)}` is not made of parameters")
    check_inside(shape, translator)
    return shape, translator


def _z_definition(items: list[c_ast.Node]) -> c_ast.Decl:
    for s in items:
        if isinstance(s, c_ast.Decl) and s.init is not None and _is_z_index(s.init):
            return s
    raise Unsupported("no `z = blockIdx.z * blockDim.z + threadIdx.z` among the kernel's declarations")


def has_z_index(kernel: Kernel) -> bool:
    """Does the kernel define `z = blockIdx.z * blockDim.z + threadIdx.z` (or, for blocks of one z, the
    pipeline's `blockIdx.z * 1 + 0`)?"""
    return any(isinstance(s, c_ast.Decl) and s.init is not None and _is_z_index(s.init)
               for s in kernel.body.block_items or [])


def _is_z_index(node: c_ast.Node) -> bool:
    if not (isinstance(node, c_ast.BinaryOp) and node.op == "+"):
        return False
    for product, thread in ((node.left, node.right), (node.right, node.left)):
        if _is(thread, ("threadIdx", "z"), "0") and isinstance(product, c_ast.BinaryOp) and product.op == "*" and (
                _is(product.left, ("blockIdx", "z"), None) and _is(product.right, ("blockDim", "z"), "1")
                or _is(product.right, ("blockIdx", "z"), None) and _is(product.left, ("blockDim", "z"), "1")):
            return True
    return False


def _is(node: c_ast.Node, member: tuple[str, str], flat: str | None) -> bool:
    """`node` is the builtin `member`, or the constant it is for blocks of one z (`flat`)."""
    return _member(node) == member or flat is not None and isinstance(node, c_ast.Constant) and node.value == flat


def _member(node: c_ast.Node):
    if isinstance(node, c_ast.StructRef) and isinstance(node.name, c_ast.ID) and isinstance(node.field, c_ast.ID):
        return node.name.name, node.field.name
    return None


def _check_builtins(kernel: Kernel, z_decl: c_ast.Decl) -> None:
    inside_z = {id(n) for n in walk(z_decl.init)}
    for n in walk(kernel.body):
        m = _member(n)
        if m and m[0] in _BUILTINS and m[1] == "z" and id(n) not in inside_z:
            raise Unsupported(f"{m[0]}.z is used beyond the z index (line {n.coord.line if n.coord else '?'})")
        if m and m[0] == "gridDim":
            raise Unsupported("the kernel reads gridDim, which marching changes")


def _check_statements(kernel: Kernel) -> None:
    """Naive style: no shared memory, barriers, warp intrinsics or atomics (only pure calls), no loops."""
    for n in walk(kernel.body):
        if isinstance(n, c_ast.Decl) and ("__shared__" in (n.storage or []) or "__shared__" in (n.quals or [])
                                          or isinstance(n.type, c_ast.ArrayDecl)):
            raise Unsupported(f"'{n.name}' is a local array or shared memory")
        if isinstance(n, c_ast.FuncCall) and call_name(n) not in PURE_CALLS:
            raise Unsupported(f"it calls '{call_name(n) or text(n.name)}'")
        if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch, c_ast.Goto, c_ast.Label,
                          c_ast.Return, c_ast.Break, c_ast.Continue)):
            raise Unsupported(f"it has a {type(n).__name__.lower()} (only straight-line statements are marched)")
        if isinstance(n, c_ast.UnaryOp) and n.op in ("&", "++", "--", "p++", "p--"):
            raise Unsupported(f"`{text(n)}`: only locals defined once are followed")


def _split_guard(cond: c_ast.Node, z: str, shape: Shape) -> tuple[list[c_ast.Node], c_ast.Node, int | None]:
    """The clauses that do not name z, N of the one clause `z < N`, and the first z of a clause `z > c` or
    `z >= c` (c an integer constant), if there is one."""
    clauses = conjuncts(cond)
    z_dependent = {z} | shape.z_locals
    mine = [c for c in clauses if ids_in(c) & z_dependent]
    upper = [(c, bound) for c in mine for op, bound in [_compared(c, z, z_dependent)] if op == "<"]
    lower = [(c, op, bound) for c in mine for op, bound in [_compared(c, z, z_dependent)] if op in (">", ">=")]
    firsts = [constant(bound) for _, _, bound in lower]
    if len(upper) != 1 or len(lower) > 1 or len(mine) != len(upper) + len(lower) or None in firsts:
        raise Unsupported(f"the guard `{text(cond)}` does not bound {z} by one clause `{z} < N` (and at most one "
                          f"`{z} > c` with c a constant)")
    first = None
    if lower:
        first = firsts[0] + 1 if lower[0][1] == ">" else firsts[0]
    others = [c for c in clauses if c not in mine]
    return others, upper[0][1], first


def _compared(clause: c_ast.Node, z: str, z_dependent: set[str]) -> tuple[str | None, c_ast.Node | None]:
    """`z OP e` (either way round, OP as seen from z) with e free of z; else (None, None)."""
    if isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", ">", ">="):
        for left, op, right in ((clause.left, clause.op, clause.right), (clause.right, _FLIP[clause.op], clause.left)):
            if _is_id(left, z) and not ids_in(right) & z_dependent:
                return op, right
    if isinstance(clause, c_ast.BinaryOp) and clause.op == "<=" and _is_id(clause.right, z) \
            and not ids_in(clause.left) & z_dependent:
        return ">=", clause.left
    return None, None


def constant(node: c_ast.Node) -> int | None:
    if isinstance(node, c_ast.Constant) and node.type == "int":
        return int(node.value.rstrip("uUlL"), 0)
    if isinstance(node, c_ast.UnaryOp) and node.op == "-" and constant(node.expr) is not None:
        return -constant(node.expr)
    return None


def conjuncts(cond: c_ast.Node) -> list[c_ast.Node]:
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
        return conjuncts(cond.left) + conjuncts(cond.right)
    return [cond]


def _is_id(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def check_inside(shape: Shape, translator: "Exact") -> None:
    stores = [s for s in shape.inside if isinstance(s, c_ast.Assignment)]
    if len(stores) != 1 or shape.inside[-1] is not stores[0] or stores[0].op != "=" \
            or not isinstance(stores[0].lvalue, c_ast.ArrayRef):
        raise Unsupported("the guarded statements are not locals then one store `out[...] = value` at the end")
    shape.store = stores[0]
    for s in shape.inside[:-1]:
        if not isinstance(s, c_ast.Decl) or s.init is None:
            raise Unsupported(f"`{text(s).strip()}` is not a local's definition")
        translator.define(s, loads_allowed=True)


class Exact:
    """Integer expressions as exact sympy: locals by their definitions, z as `z_symbol()`, parameters and
    index builtins as symbols. Anything else (division, a load, a cast to another width) is refused."""

    def __init__(self, kernel: Kernel, shape: Shape):
        self.shape = shape
        self.ints = {p.name for p in kernel.params if not p.is_pointer and p.base_type == "int"}
        self.parameters = {sympy.Symbol(name, integer=True) for name in self.ints}
        self.assigned = {n.lvalue.name for n in walk(kernel.body)
                         if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID)}
        #: Integer locals whose value is not translated, and why.
        self.opaque: dict[str, str] = {}

    def define(self, decl: c_ast.Decl, loads_allowed: bool) -> None:
        if decl.name in self.assigned:
            raise Unsupported(f"'{decl.name}' is assigned after its definition")
        if decl.init is None:
            raise Unsupported(f"'{decl.name}' is declared without a value")
        loads = any(isinstance(n, c_ast.ArrayRef) for n in walk(decl.init))
        if loads and not loads_allowed:
            raise Unsupported(f"'{decl.name}' loads before the guard")
        if ids_in(decl.init) & ({self.shape.z} | self.shape.z_locals):
            self.shape.z_locals.add(decl.name)
        if _type_name(decl) == "int" and not loads:
            try:
                self.shape.values[decl.name] = self.value(decl.init)
            except Unsupported as why:      # refused only where a subscript or the guard's bound needs it
                self.opaque[decl.name] = str(why)

    def value(self, node: c_ast.Node) -> sympy.Expr:
        if isinstance(node, c_ast.Constant) and node.type == "int":
            return sympy.Integer(int(node.value.rstrip("uUlL"), 0))
        if isinstance(node, c_ast.ID):
            return self._name(node.name)
        if _member(node) and _member(node)[0] in _BUILTINS:
            return sympy.Symbol("_".join(_member(node)), integer=True, nonnegative=True)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
            a, b = self.value(node.left), self.value(node.right)
            return a + b if node.op == "+" else a - b if node.op == "-" else a * b
        if isinstance(node, c_ast.UnaryOp) and node.op == "-":
            return -self.value(node.expr)
        if call_name(node) in ("min", "max") and len(call_args(node)) == 2:
            a, b = (self.value(arg) for arg in call_args(node))
            return sympy.Min(a, b) if call_name(node) == "min" else sympy.Max(a, b)
        if isinstance(node, c_ast.TernaryOp) and isinstance(node.cond, c_ast.BinaryOp) \
                and node.cond.op in _RELATIONS:
            relation = _RELATIONS[node.cond.op](self.value(node.cond.left), self.value(node.cond.right))
            return sympy.Piecewise((self.value(node.iftrue), relation), (self.value(node.iffalse), True))
        raise Unsupported(f"`{text(node)}` is not an integer expression of + - *, min/max and edge clamps")

    def _name(self, name: str) -> sympy.Expr:
        if name == self.shape.z:
            return z_symbol()
        if name in self.shape.values:
            return self.shape.values[name]
        if name in self.ints:
            return sympy.Symbol(name, integer=True)
        if name in self.opaque:
            raise Unsupported(f"'{name}': {self.opaque[name]}")
        raise Unsupported(f"'{name}' is not a parameter or an integer local defined once")


def _type_name(decl: c_ast.Decl) -> str:
    t = decl.type
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return " ".join(t.type.names)
    return ""
