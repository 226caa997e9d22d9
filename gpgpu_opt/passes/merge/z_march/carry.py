"""The register carry's proof: which reads of iteration z are the reads of iteration z + 1.

A thread marches z = z0, z0 + 1, ... while z < N (the guard's bound), z0 >= 0. A read `a` at iteration
z + 1 takes the value a read `b` made at iteration z when both address the same element of an array the
kernel does not write, wherever both iterations run: 0 <= z and z + 1 < N. That is proved on the exact
addresses (clamps included) with z = t and N = t + 2 + s for nonnegative integers t and s, under which
sympy settles each clamp the range decides (`min(z + 1, nz - 1)` is z + 1, `max(z - 1, 0)` is z - 1 at
iteration z + 1); the difference must then be 0. Reads related so form chains (the plane above -> the
thread's own -> the plane below): the chain's top is loaded every iteration, the rest carried."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.merge.z_march.shape import SCALARS, Exact, Shape, z_symbol
from gpgpu_opt.rewriting.cbuild import Unsupported, text


@dataclass
class Group:
    """The reads of one element: `nodes` (ArrayRefs in the guarded statements), `address` exact."""
    array: str
    address: sympy.Expr
    nodes: list[c_ast.ArrayRef] = field(default_factory=list)


@dataclass
class Chain:
    """Groups of one array, top first: each group's element at iteration z + 1 is the one above it at z."""
    array: str
    element: str
    groups: list[Group]


def carried_chains(kernel: Kernel, shape: Shape, translator: Exact) -> list[Chain]:
    """The chains of two or more reads that marching carries in registers; Unsupported where none is proved,
    or where reads that march together in the interior disagree at an edge."""
    groups = _groups(kernel, shape, translator)
    step = _Step(shape, translator)
    below: dict[int, int] = {}
    for i, upper in enumerate(groups):
        for j, lower in enumerate(groups):
            if i == j or upper.array != lower.array:
                continue
            if step.proved(lower.address, upper.address):
                if j in below.values() or i in below:
                    raise Unsupported(f"the read `{_shown(upper)}` feeds more than one read of the next z")
                below[i] = j
            elif step.in_the_interior(lower.address, upper.address):
                raise Unsupported(f"`{_shown(lower)}` at z + 1 is `{_shown(upper)}` at z only away from the edges: "
                                  "the clamps disagree near them, so nothing is carried")
    tops = [i for i in below if i not in below.values()]
    chains = []
    for top in tops:
        members = [top]
        while members[-1] in below:
            members.append(below[members[-1]])
        array = groups[top].array
        chains.append(Chain(array, _element(kernel, array), [groups[k] for k in members]))
    if not chains:
        raise Unsupported("no read of one z is a read of the next z (nothing to carry in registers, and the "
                          "march alone is not what pays)")
    return chains


def _groups(kernel: Kernel, shape: Shape, translator: Exact) -> list[Group]:
    conditional = {id(n) for s in shape.inside for top in walk(s) if _is_conditional(top)
                   for n in walk(top)}
    store = shape.store.lvalue
    written = store.name.name if isinstance(store.name, c_ast.ID) else None
    groups: list[Group] = []
    for s in shape.inside:
        for n in walk(s):
            if not isinstance(n, c_ast.ArrayRef) or n is store:
                continue
            if not isinstance(n.name, c_ast.ID):
                raise Unsupported(f"`{text(n)}` is not a one-subscript read of a parameter")
            if n.name.name == written:
                raise Unsupported(f"'{written}' is both read and written")
            if id(n) in conditional:
                raise Unsupported(f"`{text(n)}` is read under a condition")
            address = translator.value(n.subscript)
            same = next((g for g in groups if g.array == n.name.name and sympy.expand(g.address - address) == 0), None)
            if same is None:
                same = Group(n.name.name, address)
                groups.append(same)
            same.nodes.append(n)
    return groups


def _is_conditional(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.TernaryOp) or isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||")


def _element(kernel: Kernel, array: str) -> str:
    param = next((p for p in kernel.params if p.name == array and p.is_pointer), None)
    if param is None or param.base_type not in SCALARS or param.indirect or param.inner_dims or param.is_volatile:
        raise Unsupported(f"'{array}' is not a pointer parameter to scalars")
    return param.base_type


def _shown(group: Group) -> str:
    return text(group.nodes[0])


class _Step:
    """Proofs about one step of the march, with z = t and the bound N = t + 2 + s (t, s >= 0)."""

    def __init__(self, shape: Shape, translator: Exact):
        self.t = sympy.Symbol("t__", integer=True, nonnegative=True)
        self.s = sympy.Symbol("s__", integer=True, nonnegative=True)
        bound = shape.bound_value
        parameters = [p for p in bound.free_symbols if p in translator.parameters]
        if len(parameters) != 1 or not (bound - parameters[0]).is_Integer:
            raise Unsupported(f"the bound on z `{text(shape.bound)}` is not a parameter plus a constant")
        self.parameter, offset = parameters[0], bound - parameters[0]
        self.range = {self.parameter: self.t + 2 + self.s - offset}
        self.interior = {self.parameter: self.t + 16 + self.s - offset}
        self._substituted: dict = {}
        self._samples: dict = {}
        self._sample_symbols: dict = {}

    def proved(self, lower: sympy.Expr, upper: sympy.Expr) -> bool:
        """`lower` at iteration z + 1 is `upper` at iteration z wherever both run."""
        return self._equal(lower, upper, self.t, self.range)

    def in_the_interior(self, lower: sympy.Expr, upper: sympy.Expr) -> bool:
        """The same, only for z and N far from the edges (8 <= z, z + 8 < N)."""
        return self._equal(lower, upper, self.t + 8, self.interior)

    def _equal(self, lower, upper, at, bound) -> bool:
        lower_next, upper_here = self._at(lower, at + 1, bound), self._at(upper, at, bound)
        if self._sampled(lower_next) != self._sampled(upper_here):   # a quick refutation spares simplify
            return False
        return sympy.simplify(sympy.expand(lower_next - upper_here)) == 0

    def _at(self, address: sympy.Expr, z_value: sympy.Expr, bound: dict) -> sympy.Expr:
        """`address` at z = `z_value` under `bound`, worked out once per read (every pair of reads asks)."""
        key = (address, z_value, tuple(bound.items()))
        if key not in self._substituted:
            self._substituted[key] = address.subs(z_symbol(), z_value).subs(bound)
        return self._substituted[key]

    def _sampled(self, expr: sympy.Expr) -> sympy.Expr:
        if expr not in self._samples:
            self._samples[expr] = _sample(expr, self._sample_symbols)
        return self._samples[expr]


def _sample(expr: sympy.Expr, values: dict) -> sympy.Expr:
    """`expr` at one point, each symbol a distinct small positive integer (the same one for a symbol in every
    expression sampled with `values`): two different values prove two expressions differ."""
    for symbol in sorted(expr.free_symbols - values.keys(), key=str):
        values[symbol] = 3 + 2 * len(values)
    return expr.subs({symbol: values[symbol] for symbol in expr.free_symbols})
