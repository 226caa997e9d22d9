"""Lanes: what widen.py does with per-element control flow, x-dependent statements before the guard and
gathers, each a statement or read that differs between the V x of a thread (its lanes).

- A local whose value depends on x, or that is assigned under a condition that does (`if (c < 0) c = 0;`),
  is a lane local: a V-element vector (`int4 row`, `float4 c`), component c holding lane c's value.
- An `if` whose condition depends on x is lowered once per lane, in lane order: `if (c.x < 0) { c.x = 0; }
  else if (c.x > 1) { c.x = 1; }`, then the same for `.y`, ...: each lane runs its own statements in their
  original order, and lanes (the naive kernel's threads, which nothing orders) follow one another. Its
  branches hold declarations (a scalar of that lane), assignments and nested `if`s only; an access along x
  there is that lane's scalar access (`P[f + idx + 2]`): the vector path runs only where every lane passes
  the guard, so each lane's access is the naive thread's. An `if` whose condition does not depend on x
  stays one `if`, its branches widened like the rest.
- Statements before the guard that depend on x (srad's `row = (ei + 1) % d_Nr - 1;` and its `if`) must be
  pure local arithmetic (no memory, no call); they move into the guard, ahead of both paths: per lane in the
  vector path, per copy (as written) in the scalar one. They write only lane locals, which the guard does
  not read, and no statement they move past writes what they read.
- A gather, a read whose subscript is not affine (`d_I[d_iN[row] + d_Nr * col]`), is read per lane, and
  only from an array the kernel never writes, so that the lanes may read it in any order.
"""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.ast_util import ids_in, substitute, transform, walk
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_expr, text
from gpgpu_opt.rewriting.vector import constructor, lane_field, parse_vector_statements, vector_type

#: The nodes of an x-dependent statement before the guard: local arithmetic, no memory, no call.
_PURE = (c_ast.ID, c_ast.Constant, c_ast.BinaryOp, c_ast.TernaryOp, c_ast.Cast, c_ast.Typename, c_ast.TypeDecl,
         c_ast.IdentifierType, c_ast.Decl, c_ast.Assignment, c_ast.If, c_ast.Compound)
_PURE_UNARY = {"-", "+", "!", "~"}
_STEPS = {"++", "--", "p++", "p--"}


def split_guard(rest: list) -> tuple[list, c_ast.If | None, list]:
    """(statements before the guard, the guard, the statements it guards): the guard is a last `if` with no
    `else`; without one, every statement is guarded by nothing."""
    if rest and isinstance(rest[-1], c_ast.If) and rest[-1].iffalse is None:
        return rest[:-1], rest[-1], g.items(rest[-1].iftrue)
    return [], None, rest


def branches(s: c_ast.If) -> list[list]:
    """The statements of each branch of an `if` (an `else if` is the `else` branch's one statement)."""
    return [g.items(s.iftrue), g.items(s.iffalse)]


def flat(stmts: list) -> list:
    """The statements, and in place of each loop or `if`, the statements of its body or branches
    (recursively)."""
    out = []
    for s in stmts:
        if isinstance(s, c_ast.For):
            out.extend(flat(g.items(s.stmt)))
        elif isinstance(s, c_ast.If):
            out.extend(t for b in branches(s) for t in flat(b))
        else:
            out.append(s)
    return out


def _definitions(stmts: list, conds: tuple = ()):
    """(name, value, the conditions it is under) of each declaration and assignment to a local."""
    for s in stmts:
        if isinstance(s, c_ast.Decl):
            yield s.name, s.init, conds
        elif isinstance(s, c_ast.Assignment) and isinstance(s.lvalue, c_ast.ID):
            yield s.lvalue.name, s.rvalue, conds
        elif isinstance(s, c_ast.For):
            yield from _definitions(g.items(s.stmt), conds)
        elif isinstance(s, c_ast.If):
            for b in branches(s):
                yield from _definitions(b, conds + (s.cond,))


def lane_locals(stmts: list, idx: str) -> set[str]:
    """The locals that differ between lanes: a value, or a condition it is assigned under, that reads x or
    another lane local (a fixed point)."""
    lanes: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, value, conds in _definitions(stmts):
            if name in lanes:
                continue
            read = set().union(*(ids_in(n) for n in (value, *conds) if n is not None))
            if read & (lanes | {idx}):
                lanes.add(name)
                changed = True
    return lanes


def depends(node: c_ast.Node, lanes: set[str], idx: str) -> bool:
    names = ids_in(node)
    return bool((names | ({node.name} if isinstance(node, c_ast.Decl) else set())) & (lanes | {idx}))


def per_lane_nodes(stmts: list, lanes: set[str], idx: str) -> set[int]:
    """The ids of every node inside an `if` lowered per lane (its condition included)."""
    out: set[int] = set()
    for s in stmts:
        if isinstance(s, c_ast.If) and depends(s.cond, lanes, idx):
            out |= {id(n) for n in walk(s)}
        elif isinstance(s, c_ast.If):
            out |= set().union(*(per_lane_nodes(b, lanes, idx) for b in branches(s)))
        elif isinstance(s, c_ast.For):
            out |= per_lane_nodes(g.items(s.stmt), lanes, idx)
    return out


def written(stmts: list) -> set[str]:
    """The locals the statements declare or assign (increments included)."""
    out: set[str] = set()
    for s in stmts:
        for n in walk(s):
            if isinstance(n, c_ast.Decl) and n.name:
                out.add(n.name)
            elif isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
                out.add(n.lvalue.name)
            elif isinstance(n, c_ast.UnaryOp) and n.op in _STEPS and isinstance(n.expr, c_ast.ID):
                out.add(n.expr.name)
    return out


def moved_prefix(prefix: list, lanes: set[str], idx: str) -> tuple[list, list]:
    """(the statements before the guard that stay, those that depend on x and move into the guard)."""
    moved = [s for s in prefix if depends(s, lanes, idx)]
    if not moved:
        return prefix, []
    for s in moved:
        _check_pure(s, lanes)
    for before, s in zip(prefix, prefix[1:]):
        if isinstance(before, c_ast.Pragma) and any(s is m for m in moved):
            raise Unsupported(f"the statement at line {line_of(s)} before the guard depends on x and follows a "
                              "#pragma, which would lose it")
    read: set[str] = set()
    for s in prefix[next(k for k, s in enumerate(prefix) if s is moved[0]):]:
        if any(s is m for m in moved):
            read |= ids_in(s)
            continue
        clash = written([s]) & read
        if clash:
            raise Unsupported(f"the statement at line {line_of(s)} before the guard writes '{sorted(clash)[0]}', "
                              "which a statement before it that depends on x reads, so that one cannot move "
                              "into the guard")
    return [s for s in prefix if not any(s is m for m in moved)], moved


def _check_pure(s: c_ast.Node, lanes: set[str]) -> None:
    for n in walk(s):
        pure = isinstance(n, _PURE) or (isinstance(n, c_ast.UnaryOp) and n.op in _PURE_UNARY)
        if not pure:
            raise Unsupported(f"the statement at line {line_of(s)} before the guard depends on x and is not "
                              f"local arithmetic ({_kind(n)})")
        if isinstance(n, c_ast.Assignment) and not (isinstance(n.lvalue, c_ast.ID) and n.lvalue.name in lanes):
            raise Unsupported(f"the statement at line {line_of(s)} before the guard depends on x and assigns "
                              f"'{text(n.lvalue)}', which is not a local of x")


def _kind(n: c_ast.Node) -> str:
    if isinstance(n, c_ast.ArrayRef):
        return f"it reads {text(n)}"
    if isinstance(n, c_ast.FuncCall):
        return f"it calls {text(n.name)}"
    if isinstance(n, c_ast.UnaryOp):
        return f"a unary '{n.op}'"
    return f"a {type(n).__name__}"


def line_of(stmt: c_ast.Node) -> str:
    """A statement's line for a note ('?' where it has none)."""
    return str(stmt.coord.line) if stmt.coord else "?"


class Lowering:
    """The statements of the vector path. `along_x`: the ids of the accesses read or written as vectors
    (along x one element per thread, outside the `if`s lowered per lane); `types`: each lane local's and
    array's element type."""

    def __init__(self, info, idx: str, lanes: set[str], types: dict, width: int, along_x: set[int]):
        self.info, self.idx, self.lanes, self.types, self.width, self.along_x = \
            info, idx, lanes, types, width, along_x

    def component(self, expr: c_ast.Node, c: int, scalars: frozenset = frozenset()) -> c_ast.Node:
        """`expr` for lane c: x is `idx + c`, a lane local `v` is `v.<c>` (`scalars`: the lane's own
        declarations, plain scalars)."""
        e = substitute(expr, {self.idx: parse_expr(f"{self.idx} + {c}")} if c else {})

        def per_lane(n: c_ast.Node):
            if isinstance(n, c_ast.ID) and n.name in self.lanes and n.name not in scalars:
                return c_ast.StructRef(c_ast.ID(n.name), ".", c_ast.ID(lane_field(self.width, c)))
            return None

        return transform(e, per_lane, skip_member_names=True)

    def make(self, vtype: str, expr: c_ast.Node) -> c_ast.Node:
        call = parse_expr(f"{constructor(vtype)}(0)")
        call.args.exprs = [self.component(expr, c) for c in range(self.width)]
        return call

    def vector_ref(self, array: str, node: c_ast.ArrayRef, const: bool, row: str) -> c_ast.Node:
        vtype = vector_type(self.types[array], self.width)
        return parse_vector_statements(f"__v((({'const ' if const else ''}{vtype} *) {row})"
                                       f"[{self.idx} / {self.width}]);", {vtype})[0].args.exprs[0]

    def statements(self, stmts: list, row) -> list:
        """`row(array, subscript)`: where a vector access's thread's vectors start (widen._row)."""
        out = []
        for s in stmts:
            if not depends(s, self.lanes, self.idx):
                out.append(s)
            elif isinstance(s, c_ast.For):    # the loop stays; its body's accesses along x are vectors
                body = c_ast.Compound(self.statements(g.items(s.stmt), row))
                out.append(c_ast.For(copy.deepcopy(s.init), copy.deepcopy(s.cond), copy.deepcopy(s.next), body,
                                     s.coord))
            elif isinstance(s, c_ast.If) and depends(s.cond, self.lanes, self.idx):
                out.extend(self.lane_if(s, c, frozenset()) for c in range(self.width))
            elif isinstance(s, c_ast.If):     # one condition for every lane: one `if`, its branches widened
                other = self.statements(g.items(s.iffalse), row)
                out.append(c_ast.If(copy.deepcopy(s.cond), c_ast.Compound(self.statements(g.items(s.iftrue), row)),
                                    c_ast.Compound(other) if s.iffalse is not None else None, s.coord))
            elif isinstance(s, c_ast.Decl):
                out.append(self.declaration(s, row))
            else:
                out.extend(self.assignment(s, row))
        return out

    def declaration(self, s: c_ast.Decl, row) -> c_ast.Decl:
        vtype = vector_type(" ".join(s.type.type.names), self.width)
        init = s.init
        if init is None:      # `float v;`, assigned later: a vector declared the same way
            value = None
        elif id(init) in self.along_x:
            value = self.vector_ref(init.name.name, init, True, row(init.name.name, init.subscript))
        else:
            value = self.make(vtype, init)
        decl = parse_vector_statements(f"const {vtype} {s.name} = 0;", {vtype})[0]
        if "const" not in (s.quals or []):
            decl.quals = [q for q in decl.quals if q != "const"]
            decl.type.quals = [q for q in decl.type.quals if q != "const"]
        decl.init = value
        return decl

    def assignment(self, s: c_ast.Assignment, row) -> list:
        target = s.lvalue
        if id(target) in self.along_x:
            array = target.name.name
            vtype = vector_type(self.types[array], self.width)
            where = row(array, target.subscript)
            value = s.rvalue if s.op == "=" else c_ast.BinaryOp(s.op[:-1], copy.deepcopy(target), s.rvalue)
            out = []
            if s.op != "=":
                old = self.info.fresh(f"{array}_old")
                load = parse_vector_statements(f"const {vtype} {old} = 0;", {vtype})[0]
                load.init = self.vector_ref(array, target, False, where)
                out.append(load)
                self.lanes.add(old)
                value = c_ast.BinaryOp(s.op[:-1], c_ast.ID(old), s.rvalue)
            return out + [c_ast.Assignment("=", self.vector_ref(array, target, False, where), self.make(vtype, value))]
        if isinstance(target, c_ast.ID) and target.name in self.lanes:
            vtype = vector_type(self.types[target.name], self.width)     # its own type (a double stays double)
            read = s.rvalue
            if s.op == "=" and id(read) in self.along_x and self.types[read.name.name] == self.types[target.name]:
                array = read.name.name      # `c = img[e];`: one vector load, as a declaration's
                return [c_ast.Assignment("=", c_ast.ID(target.name),
                                         self.vector_ref(array, read, True, row(array, read.subscript)))]
            return [c_ast.Assignment("=", c_ast.ID(target.name), self.make(vtype, s.rvalue if s.op == "=" else
                                     c_ast.BinaryOp(s.op[:-1], c_ast.ID(target.name), s.rvalue)))]
        return [c_ast.Assignment(s.op, self.component(s.lvalue, c), self.component(s.rvalue, c))
                for c in range(self.width)]

    def lane_if(self, s: c_ast.If, c: int, scalars: frozenset) -> c_ast.If:
        """The `if` for lane c alone; `scalars`: the lane's own declarations around it."""
        def branch(stmts: list) -> c_ast.Compound:
            own, out = set(scalars), []
            for t in stmts:
                if isinstance(t, c_ast.Decl):
                    own.add(t.name)
                    decl = copy.deepcopy(t)
                    decl.init = self.component(t.init, c, frozenset(own)) if t.init is not None else None
                    out.append(decl)
                elif isinstance(t, c_ast.Assignment):
                    out.append(c_ast.Assignment(t.op, self.component(t.lvalue, c, frozenset(own)),
                                                self.component(t.rvalue, c, frozenset(own)), t.coord))
                elif isinstance(t, c_ast.If):
                    out.append(self.lane_if(t, c, frozenset(own)))
                else:
                    raise Unsupported(f"{statement_kind(t)} at line {line_of(t)} in a branch on x (its branches are "
                                      "widened lane by lane: declarations, assignments and 'if's only)")
            return c_ast.Compound(out)

        other = None
        if s.iffalse is not None:
            other = branch(g.items(s.iffalse))
            if isinstance(s.iffalse, c_ast.If):     # `else if`: written as such
                other = other.block_items[0]
        return c_ast.If(self.component(s.cond, c, scalars), branch(g.items(s.iftrue)), other, s.coord)


def lane_branch_problem(stmts: list, lanes: set[str], idx: str, info) -> str | None:
    """Why the `if`s lowered per lane cannot be (checked before any rewriting), or None: their branches
    hold declarations, assignments and `if`s only, and a name they declare is declared once in the kernel."""
    for s in stmts:
        if isinstance(s, c_ast.If) and depends(s.cond, lanes, idx):
            for t in flat([s]):
                if not isinstance(t, (c_ast.Decl, c_ast.Assignment)):
                    return (f"{statement_kind(t)} at line {line_of(t)} in a branch on x (its branches are widened lane "
                            "by lane: declarations, assignments and 'if's only)")
                if isinstance(t, c_ast.Decl) and info.decl_counts[t.name] != 1:
                    return f"'{t.name}', declared in a branch on x, is declared more than once"
            loops = [t for t in walk(s) if isinstance(t, (c_ast.For, c_ast.While, c_ast.DoWhile))]
            if loops:
                return f"{statement_kind(loops[0])} at line {line_of(loops[0])} in a branch on x"
        elif isinstance(s, c_ast.If):
            why = next((w for b in branches(s) for w in [lane_branch_problem(b, lanes, idx, info)] if w), None)
            if why:
                return why
        elif isinstance(s, c_ast.For):
            why = lane_branch_problem(g.items(s.stmt), lanes, idx, info)
            if why:
                return why
    return None


def statement_kind(s: c_ast.Node) -> str:
    """"an 'if'", "a 'return'", ... for a note."""
    kinds = {c_ast.If: "an 'if'", c_ast.While: "a 'while' loop", c_ast.DoWhile: "a 'do' loop",
             c_ast.For: "a 'for' loop", c_ast.Return: "a 'return'", c_ast.Break: "a 'break'",
             c_ast.Continue: "a 'continue'", c_ast.FuncCall: "a call statement", c_ast.Switch: "a 'switch'",
             c_ast.Goto: "a 'goto'", c_ast.UnaryOp: "an increment statement", c_ast.Compound: "a nested block"}
    return kinds.get(type(s), f"a {type(s).__name__} statement")


def loop_header_problem(stmts: list, lanes: set[str]) -> str | None:
    """A loop stays one loop for the V lanes: its header must not read a lane local."""
    for s in stmts:
        for n in walk(s):
            if isinstance(n, c_ast.For) and any(ids_in(p) & lanes for p in (n.init, n.cond, n.next) if p is not None):
                return f"the loop at line {line_of(n)} depends on x in its header"
    return None


def effect_problem(stmts: list, info) -> str | None:
    """A write the lanes could not each make to their own copy, or None: an assignment or increment inside
    an expression, the address of a local (`sincosf(v, &s, &c)` writes s and c), a call to one of the
    program's functions that is not pure (it may write through a reference)."""
    helpers = info.ctx.facts.device_functions
    for s in stmts:
        roots, nested = [], []
        if isinstance(s, c_ast.Decl):
            roots = [s.init]
        elif isinstance(s, c_ast.Assignment):
            roots = [s.lvalue, s.rvalue]
        elif isinstance(s, c_ast.If):
            roots, nested = [s.cond], [t for b in branches(s) for t in b]
        elif isinstance(s, c_ast.For):
            roots, nested = [s.cond], g.items(s.stmt)
        for n in (n for r in roots if r is not None for n in walk(r)):
            if isinstance(n, c_ast.Assignment) or (isinstance(n, c_ast.UnaryOp) and n.op in _STEPS):
                return f"an assignment inside an expression at line {line_of(s)}"
            if isinstance(n, c_ast.UnaryOp) and n.op == "&" and isinstance(n.expr, c_ast.ID):
                return f"the address of '{n.expr.name}' is taken at line {line_of(s)}"
            name = n.name.name if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) else None
            if name in helpers and name not in info.pure_calls:
                return f"the call to {name} at line {line_of(s)} is not pure (it may write through its arguments)"
        why = effect_problem(nested, info) if nested else None
        if why:
            return why
    return None
