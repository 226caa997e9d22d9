"""Control flow around staged accesses: where an access sits, under which conditions it runs, and sinking a
thread-dependent guard into the statements it covers so that staging loops and barriers can run in
block-uniform control flow.

`if (row < n && col < n) { float sum = 0; for (k...) sum += A[..]; C[..] = sum; }` becomes
`float sum = 0; for (k...) { if (row < n && col < n) ... } if (row < n && col < n) C[..] = sum;`
(the loop itself is then unrolled around its tiles by the coalesce pass).
"""
from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from pycparser import c_ast

import sympy

from gpgpu_opt.analysis.accesses import Access, AccessCollector
from gpgpu_opt.analysis.calls import pure_calls, why_impure
from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import (BDIM, BID, BLOCK_SYMBOLS, GDIM, TID, THREAD_SYMBOLS, NotAffine, iterator_symbol,
                                         opaque, param_symbol, quasi_terms, to_sympy)
from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.checks import _thread_variables
from gpgpu_opt.rewriting.staging import Unsupported, conj, text

_BUILTINS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
BLOCK_DEPENDENT_CALLS = ("__syncthreads", "__syncwarp", "__shfl", "atomic", "__threadfence")

_FLIP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_ARITH = {"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "<", "<=", ">", ">=", "==", "!=", "&&", "||"}


def parents_of(root: c_ast.Node) -> dict[int, c_ast.Node]:
    parents = {}
    for node in walk(root):
        for _, child in node.children():
            parents[id(child)] = node
    return parents


def path_to(node: c_ast.Node, parents: dict, root: c_ast.Node) -> list[c_ast.Node]:
    """Nodes from `root` down to `node`, both included."""
    path = [node]
    while path[-1] is not root:
        parent = parents.get(id(path[-1]))
        if parent is None:
            raise Unsupported("the access is not inside the kernel body")
        path.append(parent)
    return path[::-1]


def negate(cond: c_ast.Node) -> c_ast.Node:
    """`!cond`, written the way a person would (`x >= n` for `!(x < n)`, De Morgan for && and ||)."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op in _FLIP:
        return c_ast.BinaryOp(_FLIP[cond.op], copy.deepcopy(cond.left), copy.deepcopy(cond.right))
    if isinstance(cond, c_ast.BinaryOp) and cond.op in ("&&", "||"):
        return c_ast.BinaryOp("||" if cond.op == "&&" else "&&", negate(cond.left), negate(cond.right))
    if isinstance(cond, c_ast.UnaryOp) and cond.op == "!":
        return copy.deepcopy(cond.expr)
    return c_ast.UnaryOp("!", copy.deepcopy(cond))


def slack(clause: c_ast.Node, env: dict) -> tuple[sympy.Expr, bool] | None:
    """A comparison `a < b` (<=, >, >=) as (s, strict): it holds while s > 0 (strict) or s >= 0; None for
    anything else, or sides that are not affine."""
    if not (isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=", ">", ">=")):
        return None
    try:
        lhs, rhs = to_sympy(clause.left, env), to_sympy(clause.right, env)
    except NotAffine:
        return None
    difference = sympy.expand(rhs - lhs if clause.op in ("<", "<=") else lhs - rhs)
    if quasi_terms(difference, THREAD_SYMBOLS | BLOCK_SYMBOLS):
        return None  # `i / 2 < n`: the thread index moves it, but no coefficient says how
    return difference, clause.op in ("<", ">")


def clauses(cond: c_ast.Node) -> list[c_ast.Node]:
    """The conjuncts of `a && b && ...`."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
        return clauses(cond.left) + clauses(cond.right)
    return [cond]


def is_pure(expr: c_ast.Node, allow_memory: bool = False) -> bool:
    """No side effects, no calls (and, unless allowed, no memory reads): safe to evaluate again or early."""
    for n in walk(expr):
        if isinstance(n, (c_ast.Assignment, c_ast.FuncCall)):
            return False
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
            return False
        if isinstance(n, c_ast.ArrayRef) and not allow_memory:
            return False
        if isinstance(n, c_ast.UnaryOp) and n.op == "*" and not allow_memory:
            return False
    return True


def used_only_within(body: c_ast.Node, node: c_ast.Node, name: str) -> bool:
    """Is every use of the variable `name` in `body` inside `node`?"""
    inside = {id(n) for n in walk(node)}
    return all(id(n) in inside for n in walk(body) if isinstance(n, c_ast.ID) and n.name == name)


def items(stmt: c_ast.Node | None) -> list[c_ast.Node]:
    if stmt is None:
        return []
    if isinstance(stmt, c_ast.Compound):
        return list(stmt.block_items or [])
    return [stmt]


def normalize_early_returns(body: c_ast.Compound) -> bool:
    """`if (c) return; REST` at the top of the kernel becomes `if (!c) { REST }`. True if changed."""
    changed = False
    out = list(body.block_items or [])
    for k, stmt in enumerate(out):
        if isinstance(stmt, c_ast.If) and stmt.iffalse is None and _is_bare_return(stmt.iftrue) \
                and is_pure(stmt.cond, allow_memory=False):
            rest = out[k + 1:]
            inner = c_ast.Compound(rest)
            normalize_early_returns(inner)
            out = out[:k] + ([c_ast.If(negate(stmt.cond), inner, None, stmt.coord)] if rest else [])
            changed = True
            break
    body.block_items = out
    return changed


def _is_bare_return(stmt) -> bool:
    inner = items(stmt)
    return len(inner) == 1 and isinstance(inner[0], c_ast.Return) and inner[0].expr is None


def has_jumps(body: c_ast.Node) -> bool:
    return any(isinstance(n, (c_ast.Return, c_ast.Break, c_ast.Continue, c_ast.Goto, c_ast.Label))
               for n in walk(body))


@dataclass
class Frame:
    """One construct between the kernel body and an access."""
    kind: str                  # 'if' (then-branch), 'else', 'for', 'block'
    node: c_ast.Node


def frames_to(node: c_ast.Node, parents: dict, body: c_ast.Compound) -> list[Frame]:
    """The statements enclosing `node` (an access) from the body down, and a check that the access is
    evaluated whenever its statement runs (not under `?:`, `&&`, `||`, nor in a loop header)."""
    path = path_to(node, parents, body)
    frames: list[Frame] = []
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, c_ast.Compound):
            if parent is not body:
                frames.append(Frame("block", parent))
        elif isinstance(parent, c_ast.If):
            if child is parent.iftrue:
                frames.append(Frame("if", parent))
            elif child is parent.iffalse:
                frames.append(Frame("else", parent))
        elif isinstance(parent, c_ast.For):
            if child is not parent.stmt:
                raise Unsupported("the access is in a loop header")
            frames.append(Frame("for", parent))
        elif isinstance(parent, (c_ast.While, c_ast.DoWhile, c_ast.Switch, c_ast.Case, c_ast.Default,
                                 c_ast.Label)):
            raise Unsupported(f"the access is inside a {type(parent).__name__.lower()} statement")
        elif isinstance(parent, c_ast.TernaryOp) and child is not parent.cond:
            raise Unsupported("the access is evaluated conditionally (inside ?:)")
        elif isinstance(parent, c_ast.BinaryOp) and parent.op in ("&&", "||") and child is parent.right:
            raise Unsupported(f"the access is evaluated conditionally (right of {parent.op})")
    return frames


def frame_condition(frame: Frame) -> c_ast.Node | None:
    if frame.kind == "if":
        return frame.node.cond
    if frame.kind == "else":
        return negate(frame.node.cond)
    return None


def loop_var(loop: c_ast.For) -> tuple[str | None, c_ast.Node | None, bool]:
    """(iterator, start expression, declared in the loop header)."""
    init = loop.init
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1:
        return init.decls[0].name, init.decls[0].init, True
    if isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name, init.rvalue, False
    return None, None, False


# -- sinking ----------------------------------------------------------------------------------------
class Sinker:
    """Rewrites statement lists so that the statements on the way to a staging site (an unrolled loop)
    run for all threads of the block, with each thread-dependent guard moved into the statements it
    covered. `anchors` maps id(loop) to a function that builds that loop's staged form given the guard
    conditions in force; `on_path` holds the ids of every statement that encloses a site."""

    def __init__(self, anchors: dict[int, Callable[[list], list]], on_path: set[int],
                 uniform: Callable[[c_ast.Node], bool]):
        self.anchors = anchors
        self.on_path = on_path
        self.uniform = uniform

    def rewrite(self, stmts: list[c_ast.Node], guards: list[c_ast.Node]) -> list[c_ast.Node]:
        out: list[c_ast.Node] = []
        pending: list[c_ast.Node] = []

        def flush():
            if pending:
                out.append(guarded(list(pending), guards))
                pending.clear()

        for s in stmts:
            if id(s) not in self.on_path:
                if not guards:
                    out.append(s)
                elif isinstance(s, c_ast.Decl):
                    flush()
                    decl, assign = hoist_declaration(s)
                    out.append(decl)
                    if assign is not None:
                        pending.append(assign)
                else:
                    pending.append(s)
                continue
            flush()
            if isinstance(s, c_ast.For) and id(s) in self.anchors:
                out.extend(self.anchors[id(s)](guards))
            elif isinstance(s, c_ast.For):
                s.stmt = c_ast.Compound(self.rewrite(items(s.stmt), guards))
                out.append(s)
            elif isinstance(s, c_ast.If) and self.uniform(s.cond):
                s.iftrue = c_ast.Compound(self.rewrite(items(s.iftrue), guards))
                if s.iffalse is not None:
                    s.iffalse = c_ast.Compound(self.rewrite(items(s.iffalse), guards))
                out.append(s)
            elif isinstance(s, c_ast.If):
                out.extend(self.rewrite(items(s.iftrue), guards + [s.cond]))
                if s.iffalse is not None:
                    out.extend(self.rewrite(items(s.iffalse), guards + [negate(s.cond)]))
            elif isinstance(s, c_ast.Compound):
                out.append(c_ast.Compound(self.rewrite(items(s), guards)))
            else:
                raise Unsupported(f"cannot run a {type(s).__name__} in block-uniform control flow")
        flush()
        return out


def guarded(stmts: list[c_ast.Node], guards: list[c_ast.Node]) -> c_ast.Node:
    cond = conj([copy.deepcopy(g) for g in guards])
    body = stmts[0] if len(stmts) == 1 and not isinstance(stmts[0], (c_ast.Decl, c_ast.If)) \
        else c_ast.Compound(stmts)
    return c_ast.If(cond, body, None)


def hoist_declaration(decl: c_ast.Decl) -> tuple[c_ast.Decl, c_ast.Node | None]:
    """A declaration moved out of a guard: kept whole when its initializer is harmless to evaluate in
    every thread, else split into the declaration and a guarded assignment."""
    if decl.init is None or is_pure(decl.init):
        return decl, None
    if not isinstance(decl.type, c_ast.TypeDecl):
        raise Unsupported(f"cannot move the declaration of '{decl.name}' out of its guard")
    bare = copy.deepcopy(decl)
    bare.init = None
    bare.quals = [q for q in bare.quals if q != "const"]
    bare.type.quals = [q for q in bare.type.quals if q != "const"]
    return bare, c_ast.Assignment("=", c_ast.ID(decl.name), decl.init)


def check_sinkable(path: list[c_ast.Node], uniform: Callable[[c_ast.Node], bool],
                   uniform_header: Callable[[c_ast.Node], bool], all_decls: dict[str, int]) -> None:
    """The statements between the body and a staging site can be made block-uniform."""
    for parent, child in zip(path, path[1:]):
        if isinstance(parent, c_ast.Compound):
            continue
        if isinstance(parent, c_ast.For):
            if child is not parent.stmt:
                raise Unsupported("the staged loop is inside a loop header")
            for part in (parent.init, parent.cond, parent.next):
                if part is not None and not uniform_header(part):
                    raise Unsupported("an enclosing loop's bounds differ between the threads of a block")
            continue
        if isinstance(parent, c_ast.If):
            if uniform(parent.cond):
                continue
            if child is not parent.iftrue:
                raise Unsupported("the staged loop is in the else branch of a thread-dependent if")
            if not is_pure(parent.cond):
                raise Unsupported("the guard around the staged loop has side effects or reads memory")
            assigned = assigned_names(parent)
            if ids_in(parent.cond) & assigned:
                raise Unsupported("the guard's variables change inside the guarded statements")
            for s in items(parent.iftrue):
                if isinstance(s, c_ast.Decl) and all_decls.get(s.name, 0) > 1:
                    raise Unsupported(f"moving the guard would clash with another '{s.name}'")
            continue
        raise Unsupported(f"the staged loop is inside a {type(parent).__name__.lower()} statement")


# -- what the coalesce pass knows about a kernel --------------------------------------------------------
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

    def uniform(self, expr: c_ast.Node) -> bool:
        """The same value in every thread of a block (a condition: also free of side effects)."""
        return not (ids_in(expr) & self.thread_vars) and is_pure(expr, allow_memory=True)

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
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) \
                    and n.name.name.startswith(BLOCK_DEPENDENT_CALLS):
                raise Unsupported(f"the kernel calls {n.name.name}")
            if isinstance(n, c_ast.ID) and n.name == "warpSize":
                raise Unsupported("the kernel uses warpSize")
            if isinstance(n, c_ast.UnaryOp) and n.op == "*":
                raise Unsupported("the kernel dereferences pointers")
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) \
                    and n.name.name not in self.pure_calls:
                why = why_impure(n.name.name, self.ctx.facts.device_functions)
                raise Unsupported(f"the kernel calls {n.name.name}, which may access memory ({why})")
        why = self.block_dependence()
        if why:
            raise Unsupported(f"its meaning depends on the block shape ({why}); the pass changes the block, "
                              "so it leaves the kernel alone")

    def _flat_env(self) -> dict:
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
        env = self._flat_env()
        gsym = {a: sympy.Symbol(f"G.{a}", integer=True) for a in "xyz"}
        subs = {TID[a]: gsym[a] - BID[a] * BDIM[a] for a in "xyz"}
        forbidden = set(TID.values()) | set(BID.values()) | set(BDIM.values()) | set(GDIM.values())
        for n in walk(self.body):
            if not (isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in _BUILTINS):
                continue
            spelled = f"{n.name.name}.{n.field.name}"
            if n.name.name == "gridDim" or n.field.name == "z":
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


__all__ = ["Sinker", "KernelInfo", "frames_to", "negate", "clauses", "normalize_early_returns", "parents_of",
           "path_to", "is_pure", "check_sinkable", "items", "frame_condition", "loop_var"]
