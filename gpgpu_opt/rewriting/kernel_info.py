"""What a rewriting knows about one kernel (`KernelInfo`): its accesses with the local definitions in force at
each, the parent of every node, its thread variables, declared and assigned names, pure calls and the names
taken (for fresh ones); the kernel-level preconditions of staging (`check_kernel`, `block_dependence`) and
whether a new block still covers the naive thread space (`coverage_problem`)."""
from __future__ import annotations

import copy
from collections import Counter

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import Access, AccessCollector
from gpgpu_opt.analysis.calls import pure_calls, why_impure
from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import BDIM, BID, GDIM, TID, NotAffine, iterator_symbol, opaque, param_symbol, to_sympy
from gpgpu_opt.ast_util import call_name, ids_in, is_member_of, member_of, walk
from gpgpu_opt.check.sanity import _thread_variables
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.rewriting.cbuild import Unsupported, text
from gpgpu_opt.rewriting.guards import (_BUILTINS, BLOCK_DEPENDENT_CALLS, clauses, frames_to, has_jumps, is_pure,
                                        loop_var, parents_of, slack)


class EnvCollector(AccessCollector):
    """The access collector, also keeping the local definitions in force at each access."""

    def _record(self, node, mode):
        before = len(self.accesses)
        super()._record(node, mode)
        if len(self.accesses) > before:
            self.accesses[-1].extra["env"] = dict(self.env)


class KernelInfo:
    def __init__(self, kernel, ctx):
        self.kernel = kernel
        self.body = kernel.body
        self.ctx = ctx
        collector = EnvCollector(kernel)
        collector.visit(kernel.body)
        self.accesses: list[Access] = collector.accesses
        self.by_node = {(id(a.node), a.mode): a for a in self.accesses}
        self.parents = parents_of(self.body)
        self.thread_vars = _thread_variables(kernel.funcdef)
        self.decl_counts = Counter(n.name for n in walk(self.body) if isinstance(n, c_ast.Decl) and n.name)
        self.assigned = assigned_names(self.body)
        self.params = {p.name: p for p in kernel.params}
        self.scalars = {p.name for p in kernel.scalars}
        self.written = {a.array for a in self.accesses if a.mode == "write"}
        #: Calls that behave like arithmetic: pure builtins and pure `__device__` helpers.
        self.pure_calls = pure_calls(ctx.facts.device_functions)
        self.base_taken = set(self.decl_counts) | set(self.params) | {n for n in ids_in(self.body)}
        self.taken = set(self.base_taken)

    @classmethod
    def of(cls, kernel, ctx) -> "KernelInfo":
        """The kernel's analysis, computed once while the kernel stays as it is: the context keeps it, under
        the identity of every node and the kernel's text (a rewrite in place changes one or the other). Each
        caller gets its own copy of the names taken, as a new analysis would give it (the rest is read only)."""
        cache = getattr(ctx, "analyses", None)
        if cache is None:
            return cls(kernel, ctx)
        key = (tuple(map(id, walk(kernel.funcdef))), kernel_source(kernel.funcdef))
        found = cache.get(id(kernel.funcdef))
        if found is not None and found[0] is kernel.funcdef and found[1] == key:
            info = copy.copy(found[2])
            info.taken = set(info.base_taken)
            return info
        info = cls(kernel, ctx)
        cache[id(kernel.funcdef)] = (kernel.funcdef, key, info)
        return info

    def uniform(self, expr: c_ast.Node) -> bool:
        """The same value in every thread of a block (a condition: also free of side effects)."""
        return not (ids_in(expr) & self.thread_vars) and is_pure(expr, True, self.pure_calls)

    def uniform_header(self, expr: c_ast.Node) -> bool:
        """A loop header part (`int k = 0`, `k < n`, `k++`) that every thread of a block runs alike."""
        return not (ids_in(expr) & self.thread_vars) and not any(
            isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall)) for n in walk(expr))

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}{k}"
        self.taken.add(name)
        return name

    # -- kernel-level preconditions --------------------------------------------------------------------
    def check_kernel(self) -> None:
        if has_jumps(self.body):
            raise Unsupported("the kernel returns, breaks or jumps from inside its statements")
        for n in walk(self.body):
            if isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or []):
                raise Unsupported("the kernel already uses shared memory")
            if (call_name(n) or "").startswith(BLOCK_DEPENDENT_CALLS):
                raise Unsupported(f"the kernel calls {call_name(n)}")
            if isinstance(n, c_ast.ID) and n.name == "warpSize":
                raise Unsupported("the kernel uses warpSize")
            if isinstance(n, c_ast.UnaryOp) and n.op == "*":
                raise Unsupported("the kernel dereferences pointers")
            if call_name(n) is not None and call_name(n) not in self.pure_calls:
                why = why_impure(call_name(n), self.ctx.facts.device_functions)
                raise Unsupported(f"the kernel calls {call_name(n)}, which may access memory ({why})")
        why = self.block_dependence()
        if why:
            raise Unsupported(f"its meaning depends on the block shape ({why}); the pass changes the block, "
                              "so it leaves the kernel alone")

    def flat_env(self) -> dict:
        env = {p: param_symbol(p) for p in self.scalars}
        for n in walk(self.body):
            if isinstance(n, c_ast.Decl) and n.name and isinstance(n.type, c_ast.TypeDecl):
                if n.init is None or n.name in self.assigned or self.decl_counts[n.name] > 1:
                    env[n.name] = opaque(n.name)
                    continue
                try:
                    env[n.name] = to_sympy(n.init, env)
                except NotAffine:
                    env[n.name] = opaque(n.name)
            elif isinstance(n, c_ast.For):
                var, _, _ = loop_var(n)
                if var:
                    env.setdefault(var, iterator_symbol(var))
        return env

    def block_dependence(self) -> str | None:
        """Every use of threadIdx/blockIdx/blockDim must reach the result only through the global index
        blockIdx*blockDim + threadIdx of its axis; gridDim and the z axis are not allowed."""
        env = self.flat_env()
        gsym = {a: sympy.Symbol(f"G.{a}", integer=True) for a in "xyz"}
        subs = {TID[a]: gsym[a] - BID[a] * BDIM[a] for a in "xyz"}
        forbidden = set(TID.values()) | set(BID.values()) | set(BDIM.values()) | set(GDIM.values())
        for n in walk(self.body):
            if not is_member_of(n, *_BUILTINS):
                continue
            variable, axis = member_of(n)
            spelled = f"{variable}.{axis}"
            if variable == "gridDim" or axis == "z":
                return f"it uses {spelled}"
            top = self.index_expression(n)
            try:
                value = sympy.expand(to_sympy(top, env).subs(subs))
            except NotAffine:
                return f"{text(top)} cannot be analysed"
            if value.free_symbols & forbidden or any(s.name.startswith("?") for s in value.free_symbols):
                return f"{text(top)} is not a function of the global thread index"
        return None

    def index_expression(self, builtin: c_ast.StructRef) -> c_ast.Node:
        """The arithmetic around a use of threadIdx/blockIdx/blockDim (`blockIdx.x * blockDim.x +
        threadIdx.x`), up to the first node that is not arithmetic."""
        top = builtin
        while True:
            parent = self.parents.get(id(top))
            if isinstance(parent, c_ast.BinaryOp) and parent.op in ("+", "-", "*", "/", "%", "<<", ">>") \
                    or isinstance(parent, c_ast.UnaryOp) and parent.op in ("-", "+") \
                    or isinstance(parent, c_ast.Cast):
                top = parent
                continue
            return top

    # -- the global thread space under a new block -----------------------------------------------------
    def coverage_problem(self, naive: tuple[int, int], block: tuple[int, int]) -> str | None:
        """New grids round up to whole blocks: along an axis where the new block does not divide the naive
        one, the extra threads must be kept from every access by a guard on the global index."""
        for axis, dim in (("x", 0), ("y", 1)):
            if naive[dim] % block[dim] == 0:
                continue
            for a in self.accesses:
                if not self.bounded(a, axis):
                    return (f"a {block[0]}x{block[1]} block does not tile the naive {naive[0]}x{naive[1]} "
                            f"blocks, and {a.array}[{a.index_text}] has no guard bounding the global "
                            f"{axis} index (the rounded-up grid would access out of range)")
        return None

    def bounded(self, a: Access, axis: str) -> bool:
        try:
            frames = frames_to(a.node, self.parents, self.body)
        except Unsupported:
            return False
        env = a.extra.get("env", {})
        G = sympy.Symbol("G", integer=True)
        subs = {TID[axis]: G - BID[axis] * BDIM[axis]}
        for f in frames:
            if f.kind != "if":
                continue
            for clause in clauses(f.node.cond):
                found = slack(clause, env)
                if found is None:
                    continue
                d = sympy.expand(found[0].subs(subs))
                c = d.coeff(G)
                rest = d - c * G
                others = set(TID.values()) | set(BID.values()) | {G}
                if c.is_number and c < 0 and not (rest.free_symbols & others) \
                        and not any(s.name.startswith("?") for s in rest.free_symbols):
                    return True
        return False


__all__ = ["KernelInfo", "EnvCollector"]
