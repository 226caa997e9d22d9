"""Control flow around staged accesses: where an access sits, under which conditions it runs, and sinking a
thread-dependent guard into the statements it covers so that staging loops and barriers can run in
block-uniform control flow.

`if (row < n && col < n) { float sum = 0; for (k...) sum += A[..]; C[..] = sum; }` becomes
`float sum = 0; for (k...) { if (row < n && col < n) ... } if (row < n && col < n) C[..] = sum;`
(the loop itself is then unrolled around its tiles by the coalesce pass).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

from pycparser import c_ast

import sympy

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import BLOCK_SYMBOLS, THREAD_SYMBOLS, NotAffine, quasi_terms, to_sympy
from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.rewriting.cbuild import Unsupported, conj

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


def is_pure(expr: c_ast.Node, allow_memory: bool = False, calls: frozenset[str] = frozenset()) -> bool:
    """No side effects, no calls but to the pure functions `calls` (`KernelInfo.pure_calls`, from the one
    table of `analysis.calls`), and, unless allowed, no memory reads: safe to evaluate again or early."""
    for n in walk(expr):
        if isinstance(n, c_ast.FuncCall) and not (isinstance(n.name, c_ast.ID) and n.name.name in calls):
            return False
        if isinstance(n, c_ast.Assignment):
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


__all__ = ["Sinker", "frames_to", "negate", "clauses", "normalize_early_returns", "parents_of",
           "path_to", "is_pure", "check_sinkable", "items", "frame_condition", "loop_var"]
