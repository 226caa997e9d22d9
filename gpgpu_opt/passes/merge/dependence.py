"""Which values of a kernel depend on the merged dimensions of a thread merge (thread_merge.py): the
statement-level dependence analysis of paper §3.5, with the global index of each axis as a symbol."""
from __future__ import annotations

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, NotAffine, to_sympy
from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo

BUILTINS = {"threadIdx", "blockIdx", "blockDim"}
#: The global thread index per axis, and threadIdx written with it (blockIdx * blockDim + threadIdx = G).
G = {a: sympy.Symbol(f"G.{a}", integer=True, nonnegative=True) for a in "xy"}
_TO_GLOBAL = {TID[a]: G[a] - BID[a] * BDIM[a] for a in "xy"}


def global_value(node: c_ast.Node, env: dict) -> sympy.Expr:
    """`node` as an affine expression of the global indices G.x, G.y (NotAffine if it is not one)."""
    return sympy.expand(to_sympy(node, env).subs(_TO_GLOBAL))


def builtin_axis(n: c_ast.Node, axes) -> str | None:
    """The axis of `threadIdx.a` / `blockIdx.a` / `blockDim.a` when a is one of `axes`."""
    if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in BUILTINS \
            and n.field.name in axes:
        return n.field.name
    return None


class Dependence:
    """Per local: the merged dimensions its value depends on. An *index* local (`const int idy = blockIdx.y *
    blockDim.y + threadIdx.y`, or any never-reassigned integer with a constant coefficient on the global
    index) is kept once, as copy 0's value; copy r adds `coefficient * r * blockDim`."""

    def __init__(self, info: KernelInfo, axes: set[str]):
        self.info, self.axes = info, axes
        self.index: dict[str, dict[str, int]] = {}
        self.per_copy: dict[str, set[str]] = {}
        self._find_index_locals()
        self._propagate()

    def deps(self, node: c_ast.Node) -> set[str]:
        found: set[str] = set()
        for n in walk(node):
            axis = builtin_axis(n, self.axes)
            if axis:
                found.add(axis)
        for name in ids_in(node):
            found |= set(self.index.get(name, ())) | self.per_copy.get(name, set())
        return found

    def of_read(self, node: c_ast.Node) -> set[str]:
        """What a read depends on: its subscript and the loop headers it sits under (a loop whose trip count
        moves with a merged dimension runs once per copy, and so does every read in it). Conditions do not
        count: the merge keeps a condition's shared part once, under the first copy's guard."""
        found = self.deps(node)
        path = g.path_to(node, self.info.parents, self.info.body)
        for parent in path:
            if isinstance(parent, c_ast.For):
                found |= set().union(*(self.deps(p) for p in (parent.init, parent.cond, parent.next) if p))
            elif isinstance(parent, (c_ast.While, c_ast.DoWhile)):
                found |= self.deps(parent.cond)
        return found

    def _find_index_locals(self) -> None:
        info = self.info
        env = info.flat_env()
        for n in walk(info.body):
            if not (isinstance(n, c_ast.Decl) and n.init is not None and isinstance(n.type, c_ast.TypeDecl)
                    and n.name not in info.assigned and info.decl_counts[n.name] == 1
                    and isinstance(n.type.type, c_ast.IdentifierType)
                    and not set(n.type.type.names) & {"float", "double"} and g.is_pure(n.init)):
                continue
            try:
                value = global_value(n.init, env)
            except NotAffine:
                continue
            coefficients = {a: value.coeff(G[a]) for a in self.axes}
            rest = value - sum(c * G[a] for a, c in coefficients.items())
            if not any(coefficients.values()) or not all(c.is_Integer for c in coefficients.values()):
                continue
            if any(s.name.startswith("?") or s in TID.values() or s in BID.values() or s in BDIM.values()
                   or s in G.values() and s not in (G[a] for a in "xy" if a not in self.axes)
                   for s in rest.free_symbols):
                continue
            self.index[n.name] = {a: int(c) for a, c in coefficients.items() if c}

    def _propagate(self) -> None:
        """A local depends on what its definitions read and on the conditions and loop headers they sit
        under (unless it is declared inside that if or loop, where all its uses are too)."""
        sites = list(self._definitions())
        changed = True
        while changed:
            changed = False
            for name, reads, site in sites:
                found = set().union(*(self.deps(r) for r in reads)) | self._control(name, site)
                if not found <= self.per_copy.get(name, set()):
                    self.per_copy[name] = self.per_copy.get(name, set()) | found
                    changed = True

    def _definitions(self):
        info = self.info
        for n in walk(info.body):
            if isinstance(n, c_ast.Decl) and n.name and n.init is not None and n.name not in self.index:
                yield n.name, [n.init], n
            elif isinstance(n, c_ast.Assignment):
                base = base_name(n.lvalue)
                if base is not None and base not in info.params:
                    yield base, [n.rvalue, n.lvalue], n
            elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
                base = base_name(n.expr)
                if base is not None and base not in info.params:
                    yield base, [n.expr], n

    def _control(self, name: str, site: c_ast.Node) -> set[str]:
        found: set[str] = set()
        path = g.path_to(site, self.info.parents, self.info.body)
        for parent, child in zip(path, path[1:]):
            declared_inside = any(isinstance(d, c_ast.Decl) and d.name == name for d in walk(parent))
            if declared_inside:
                continue
            if isinstance(parent, c_ast.If) and child is not parent.cond:
                found |= self.deps(parent.cond)
            elif isinstance(parent, c_ast.For):
                found |= set().union(*(self.deps(p) for p in (parent.init, parent.cond, parent.next) if p))
            elif isinstance(parent, (c_ast.While, c_ast.DoWhile)):
                found |= self.deps(parent.cond)
        return found


def is_update(s: c_ast.Node, info: KernelInfo) -> bool:
    """`X[e] op= v` on a global array, v free of side effects."""
    return isinstance(s, c_ast.Assignment) and s.op != "=" and isinstance(s.lvalue, c_ast.ArrayRef) \
        and base_name(s.lvalue) in info.params and g.is_pure(s.rvalue, True, info.pure_calls) \
        and g.is_pure(s.lvalue.subscript, True, info.pure_calls)


def base_name(lvalue: c_ast.Node) -> str | None:
    while isinstance(lvalue, c_ast.ArrayRef):
        lvalue = lvalue.name
    return lvalue.name if isinstance(lvalue, c_ast.ID) else None


