"""Integer locals assigned more than once: which definition reaches each access.

The access collector used to make every integer local that is assigned anywhere opaque for the whole kernel.
Real kernels assign such locals all the time; this module splits them in two, as a whitelist:

- a *single definition*: `int idx; ... idx = e;` where the declaration has no initializer, the one
  statement `idx = e;` sits in the declaration's own block after it, nothing between them uses `idx`, and
  nothing else assigns it (nor takes its address). That is `int idx = e;` written in two steps: its value
  is `e` everywhere it can be used, and the passes may rely on it (normalize merges the two statements).
- every other assigned local is *redefined*: its value at an access is the reaching definition, tracked
  through straight-line code (`x = e;`, `x += e;`, `x++;` as statements), both branches of an `if` (kept
  where they agree), and canonical loops (an *induction variable*, `c += xy;` once per iteration at the top
  level of the body, with an increment that does not change in the loop, is `c0 + t * xy` at the top of
  iteration t). Anything else makes the local opaque from there on: an assignment inside an expression
  (`a[x++]`, `y = x = 0`), an address taken (`&x`), a `switch`, `goto` or label, a loop that is not
  canonical, the value after a loop. Accesses through redefined locals are analysed (`analyze` reports
  them as `redefined`, or `clamped` through an edge clamp) and left as written by every pass: the passes
  rebuild subscripts from their text at other program points, where a redefined local may hold another value.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import Loop, assigned_names
from gpgpu_opt.analysis.symbolic import NotAffine, is_opaque, iterator_symbol, opaque, to_sympy
from gpgpu_opt.ast_util import ids_in, walk

_UPDATES = {"=", "+=", "-="}
_STEP_OPS = {"++": "+=", "p++": "+=", "--": "-=", "p--": "-="}


@dataclass
class Definitions:
    """What the kernel's statements do to its integer locals (see the module doc)."""
    #: ids of the assignment and `++`/`--` nodes that are whole statements (not the For header's).
    statements: set[int] = field(default_factory=set)
    #: Locals assigned in a way the analysis does not follow: opaque everywhere.
    untracked: set[str] = field(default_factory=set)
    #: Locals declared without an initializer and defined by exactly one dominating statement.
    single: set[str] = field(default_factory=set)
    #: Every other assigned name: its reaching definition is tracked, for the analysis only.
    redefined: set[str] = field(default_factory=set)


def definitions(body: c_ast.Node) -> Definitions:
    # One walk of the body for every question below (the body is not changed meanwhile): each access
    # collection asks, and walking the tree once per question was most of the time.
    nodes = list(walk(body))
    found = Definitions()
    for parent in nodes:
        for stmt in _statements_of(parent):
            if _update_target(stmt) is not None:
                found.statements.add(id(stmt))
    assigned: set[str] = set()      # what assigned_names(body) gives: the same test, node by node
    counts: dict[str, int] = {}
    for n in nodes:
        name = _assigned_name(n)
        if name is None:
            continue
        assigned.add(name)
        counts[name] = counts.get(name, 0) + 1
        if id(n) not in found.statements or (isinstance(n, c_ast.UnaryOp) and n.op == "&"):
            found.untracked.add(name)
    if any(isinstance(n, (c_ast.Goto, c_ast.Label)) for n in nodes):
        found.untracked |= assigned
    for n in nodes:
        if isinstance(n, c_ast.Switch):
            found.untracked |= assigned_names(n)
    # A name declared twice (a block shadowing it): the values are kept by name, not by scope.
    declared = Counter(n.name for n in nodes if isinstance(n, c_ast.Decl) and n.name)
    found.untracked |= {name for name in assigned if declared[name] > 1}
    single = {name for name in single_definition_sites(body) if declared[name] == 1}
    found.single = {name for name in single if counts.get(name) == 1} - found.untracked
    found.redefined = assigned - found.single - found.untracked
    return found


def _statements_of(node: c_ast.Node) -> list[c_ast.Node]:
    if isinstance(node, c_ast.Compound):
        return list(node.block_items or [])
    if isinstance(node, c_ast.If):
        return [s for s in (node.iftrue, node.iffalse) if s is not None]
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)):
        return [node.stmt] if node.stmt is not None else []
    return []


def _assigned_name(n: c_ast.Node) -> str | None:
    if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
        return n.lvalue.name
    if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") and isinstance(n.expr, c_ast.ID):
        return n.expr.name
    return None


def _update_target(stmt: c_ast.Node) -> str | None:
    """The local a statement `x = e;`, `x += e;`, `x -= e;`, `x++;` updates, else None."""
    if isinstance(stmt, c_ast.Assignment) and stmt.op in _UPDATES and isinstance(stmt.lvalue, c_ast.ID):
        return stmt.lvalue.name
    if isinstance(stmt, c_ast.UnaryOp) and stmt.op in _STEP_OPS and isinstance(stmt.expr, c_ast.ID):
        return stmt.expr.name
    return None


def as_update(stmt: c_ast.Node) -> tuple[str, c_ast.Node]:
    """(`=`, `+=` or `-=`, the right-hand side) of an update statement."""
    if isinstance(stmt, c_ast.UnaryOp):
        return _STEP_OPS[stmt.op], c_ast.Constant("int", "1")
    return stmt.op, stmt.rvalue


def single_definition_sites(body: c_ast.Node) -> dict[str, tuple[c_ast.Compound, c_ast.Decl, c_ast.Assignment]]:
    """Per local declared without an initializer and then assigned by a plain `x = e;` later in the same
    block, with no use of it in between: (the block, the declaration, the assignment). The caller checks
    that nothing else assigns it."""
    sites = {}
    for block in walk(body):
        if not isinstance(block, c_ast.Compound):
            continue
        items = block.block_items or []
        for k, decl in enumerate(items):
            if not (isinstance(decl, c_ast.Decl) and decl.name and decl.init is None
                    and isinstance(decl.type, c_ast.TypeDecl) and not (decl.storage or [])):
                continue
            for later in items[k + 1:]:
                if isinstance(later, c_ast.Assignment) and later.op == "=" and isinstance(later.lvalue, c_ast.ID) \
                        and later.lvalue.name == decl.name and decl.name not in ids_in(later.rvalue):
                    sites[decl.name] = (block, decl, later)
                    break
                if decl.name in ids_in(later) or isinstance(later, c_ast.Decl) and later.name == decl.name:
                    break
    return sites


def inductions(loop: Loop, defs: Definitions) -> dict[str, tuple[str, c_ast.Node]]:
    """Induction variables of a canonical loop with step +-1: locals the loop changes only by one statement
    `x += e;` / `x -= e;` / `x++;` at the top level of its body, `e` unchanged by the loop, and a body with
    no jump (a `continue` would skip the increment): name -> (`+=` or `-=`, e)."""
    node = loop.node
    if loop.multiplicative or abs(loop.step) != 1 or not isinstance(node.stmt, c_ast.Compound):
        return {}
    if any(isinstance(n, (c_ast.Break, c_ast.Continue, c_ast.Return, c_ast.Goto)) for n in walk(node.stmt)):
        return {}
    changed = assigned_names(node.stmt) | {n.name for n in walk(node.stmt) if isinstance(n, c_ast.Decl) and n.name}
    changed |= {loop.var}
    steps: dict[str, tuple[str, c_ast.Node]] = {}
    counts: dict[str, int] = {}
    for stmt in node.stmt.block_items or []:
        name = _update_target(stmt)
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
            op, rvalue = as_update(stmt)
            if op != "=" and not ids_in(rvalue) & changed:
                steps[name] = (op, rvalue)
    every = [_assigned_name(n) for n in walk(node.stmt)]
    return {name: step for name, step in steps.items()
            if name in defs.redefined and counts[name] == 1 and every.count(name) == 1}


def trip_index(loop: Loop) -> sympy.Expr:
    """The iteration number t (0 first) of a canonical loop with step +-1, from its iterator."""
    k = iterator_symbol(loop.var)
    return k - loop.start if loop.step > 0 else loop.start - k


class ReachingValues:
    """The value of every integer local where the collector stands, following the definitions in program
    order (the collector calls these hooks as it walks); a local whose value is not one known expression
    maps to its opaque symbol. Only the analysis reads these values (see the module doc)."""

    def __init__(self, env: dict[str, sympy.Expr], defs: Definitions):
        self.values = dict(env)
        self.defs = defs

    def update(self, stmt: c_ast.Node, types: dict[str, str]) -> None:
        name = _update_target(stmt)
        if name is None or name not in types:
            return
        op, rvalue = as_update(stmt)
        expr = rvalue if op == "=" else c_ast.BinaryOp(op[0], c_ast.ID(name), rvalue)
        self.values[name] = self.value_of(expr, types, name)

    def value_of(self, expr: c_ast.Node, types: dict[str, str], name: str) -> sympy.Expr:
        try:
            value = sympy.expand(to_sympy(expr, self.values, types))
        except NotAffine:
            return opaque(name)
        return opaque(name) if any(is_opaque(s) for s in value.free_symbols) else value

    def enter_loop(self, loop: Loop | None, node: c_ast.Node, types: dict[str, str]) \
            -> tuple[dict, dict[str, tuple[str, c_ast.Node]]]:
        """At the top of every iteration: induction variables in closed form, the rest of what the loop
        assigns opaque. Returns the state to restore when the loop is left, and the induction steps."""
        saved = dict(self.values)
        steps = inductions(loop, self.defs) if loop is not None else {}
        for name in assigned_names(node):
            self.values[name] = opaque(name)
        if loop is not None:
            self.values[loop.var] = iterator_symbol(loop.var)
        for name, (op, rvalue) in steps.items():
            if name not in types or is_opaque(saved.get(name, opaque(name))):
                continue
            try:
                step = sympy.expand(to_sympy(rvalue, saved, types))
            except NotAffine:
                continue
            if any(is_opaque(s) for s in step.free_symbols | trip_index(loop).free_symbols):
                continue
            self.values[name] = sympy.expand(saved[name] + (1 if op == "+=" else -1) * trip_index(loop) * step)
        return saved, steps

    def leave_loop(self, saved: dict, node: c_ast.Node) -> None:
        """After the loop: what it assigned is opaque (the exit value is not followed), the rest as before."""
        self.values = saved
        for name in assigned_names(node):
            if name in self.values:
                self.values[name] = opaque(name)

    def branch(self) -> dict:
        return dict(self.values)

    def join(self, before: dict, after_true: dict, after_false: dict) -> None:
        """After an `if`: a local keeps a value both ways agree on, else it is opaque."""
        self.values = {name: (after_true.get(name) if after_true.get(name) == after_false.get(name)
                              else opaque(name)) for name in before}
