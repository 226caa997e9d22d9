"""Induction variables in closed form: a local that a stencil marching along z steps plane by plane is replaced, at each use, by its value there, so that every subscript through it is affine
in the thread and loop indices again (one definition, which the passes may rebuild anywhere). normalize
writes it back (passes/normalize); verify reads a naive kernel's reach from it.

    int c = i + j * nx;                         int c = i + j * nx;
    out[c] = in[c];                             out[c] = in[c];
    c += xy;                            =>
    for (int k = 1; k < nz - 1; ++k) {          for (int k = 1; k < nz - 1; ++k) {
        out[c] = in[c + xy];                        out[c + k * xy] = in[c + k * xy + xy];
        c += xy;                                }
    }                                           if (1 < nz - 1) {
    out[c] = in[c];                                 out[c + (nz - 1) * xy] = in[c + (nz - 1) * xy];
                                                } else {
                                                    out[c + xy] = in[c + xy];
                                                }

A whitelist. An induction variable is an `int` local declared once, with an initializer, at the top of the
kernel body (or of the block of an `if` there: a guard's), and otherwise only stepped by statements
`c += s;`, `c -= s;`, `c++;` (`--` alike), every step by the same `s`: an `int` expression of constants,
scalar parameters and locals declared once and never written, none shadowed (so `s` is the same value
wherever it is read). A step sits at the top level of that block
(straight-line steps add up), or at the end of the body of a `for (int k = a; k < b; k++)` loop (`<=`
too) that is itself at the top level, once, after the body's other statements (only other steps may
follow it), with `a` and `b` never written and no `break`, `continue`, `return` or `goto` in the body:
there `c` is `c_entry + (k - a) * s` at every use. After the loop it is `c_entry + (b - a) * s`, which is
its value only where the loop runs (b >= a): where that is not proved, the statements after the loop are
written twice, under `if (a < b)` and in its `else` (the loop did not run, `c` is `c_entry`), those at
their head that read no stepped local once before the `if`; and only where they declare nothing (a name
declared in both branches would be declared twice). Every other shape (a step under an `if`, in a nested
loop, not at the end of its loop's body, two steps of one variable in one body, a step by something the
kernel writes, a use in a loop header) leaves that local as written, with a note that names it. Each local
is judged alone: its closed form reads only itself, `s` and the iterator.

The closed form computes with `int`s, as the steps do; it differs from them only where they overflow
(undefined behaviour in C).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Protocol

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names, canonical_loop
from gpgpu_opt.analysis.symbolic import NotAffine, cuda_text, to_sympy
from gpgpu_opt.ast_util import ids_in, substitute, walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.frontend.program import parse_expression as parse_expr
from gpgpu_opt.kernel import Kernel

_STEP_SIGN = {"+=": 1, "-=": -1, "++": 1, "p++": 1, "--": -1, "p--": -1}
_JUMPS = (c_ast.Break, c_ast.Continue, c_ast.Return, c_ast.Goto, c_ast.Label)


class DecisionSink(Protocol):
    """Where the rewrites and refusals are said (a pass's decision log)."""
    def applied(self, subject: str, reason: str, location: Location | None = None,
                restatement: bool = False) -> None: ...
    def skip(self, subject: str, reason: str, location: Location | None = None) -> None: ...


def text(node: c_ast.Node) -> str:
    return CudaGenerator().visit(node)


class _Refused(Exception):
    """Why one local is not an induction variable this module rewrites (the note's text)."""


#: What the log says of each local rewritten: a restatement for the analyses, which alone does not make the
#: kernel transformed (pipeline.KernelResult.transformed: such a kernel keeps the user's text).
RESTATED = "induction variable read in closed form"


@dataclass
class _Induction:
    name: str
    step: c_ast.Node                        # s
    steps: list = field(default_factory=list)   # the step statements (c_ast nodes)


def in_closed_form(kernel: Kernel) -> Kernel:
    """A copy of `kernel` with its induction variables in closed form (no notes), or `kernel` itself where it
    has none: the same accesses, each with a subscript the analyses read (verify sizes the arrays of a naive
    kernel that steps its indices from it)."""
    if not _stepped_locals(kernel.body):
        return kernel
    work = kernel.copy()
    return work if closed_form_inductions(work, None) else kernel


def closed_form_inductions(kernel: Kernel, log: DecisionSink | None) -> list[str]:
    """Rewrites the kernel's induction variables in place (the module doc); returns the names rewritten.
    `log`: where the notes go (None: nowhere)."""
    return sorted(_in_blocks(kernel, kernel.body, log))


def _in_blocks(kernel: Kernel, block: c_ast.Compound, log: DecisionSink | None) -> list[str]:
    """The kernel body, then the branches of the `if`s at its top level (a guard's block), recursively."""
    done = _in_block(kernel, block, log)
    for s in block.block_items or []:
        if isinstance(s, c_ast.If):
            for branch in (s.iftrue, s.iffalse):
                if isinstance(branch, c_ast.Compound):
                    done += _in_blocks(kernel, branch, log)
    return done


def _in_block(kernel: Kernel, body: c_ast.Compound, log: DecisionSink | None) -> list[str]:
    """closed_form_inductions for the locals declared at the top level of `body`."""
    def skip(subject: str, why: str, where) -> None:
        if log is not None:
            log.skip(subject, f"not read in closed form: {why}", where)

    items = body.block_items or []
    stepped = _stepped_locals(body)
    inductions: dict[str, _Induction] = {}
    headers = _loop_header_names(body)
    for decl in items:     # a local without a value, or a loop's own counter, is no candidate: no note
        if not (_int_decl(decl) and decl.init is not None and decl.name in stepped - headers):
            continue
        try:
            inductions[decl.name] = _induction(kernel, body, decl)
        except _Refused as why:
            skip(decl.name, str(why), Location.of(decl))
    if not inductions:
        return []
    loops: dict[int, _Loop] = {}
    for name in list(inductions):
        try:
            loops.update(_loops_of(kernel, body, inductions[name]))
        except _Refused as why:
            skip(name, str(why), Location.of(kernel.funcdef))
            del inductions[name]
    if not inductions:
        return []
    steps = {id(s) for v in inductions.values() for s in v.steps}
    try:
        body.block_items = _rewrite(items, inductions, loops, steps, {name: sympy.Integer(0) for name in inductions})
    except _Refused as why:
        skip(", ".join(sorted(inductions)), str(why), Location.of(kernel.funcdef))
        return []
    for name in sorted(inductions) if log is not None else ():
        log.applied(name, f"{RESTATED} (steps of {text(inductions[name].step)})", Location.of(kernel.funcdef),
                    restatement=True)
    return sorted(inductions)


# -- what is an induction variable --------------------------------------------------------------------------

def _stepped_locals(body: c_ast.Compound) -> set[str]:
    return {n.lvalue.name for n in walk(body) if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID)
            and n.op in ("+=", "-=")} | {n.expr.name for n in walk(body) if isinstance(n, c_ast.UnaryOp)
                                         and n.op in _STEP_SIGN and isinstance(n.expr, c_ast.ID)}


def _loop_header_names(body: c_ast.Compound) -> set[str]:
    return set().union(*(assigned_names(p) for n in walk(body) if isinstance(n, c_ast.For)
                         for p in (n.init, n.next) if p is not None))


def _int_decl(decl: c_ast.Node) -> bool:
    return isinstance(decl, c_ast.Decl) and isinstance(decl.type, c_ast.TypeDecl) \
        and isinstance(decl.type.type, c_ast.IdentifierType) and decl.type.type.names in (["int"], ["signed", "int"]) \
        and not (decl.storage or []) and decl.bitsize is None


def _induction(kernel: Kernel, block: c_ast.Compound, decl: c_ast.Decl) -> _Induction:
    name = decl.name
    body = kernel.body
    if sum(isinstance(n, c_ast.Decl) and n.name == name for n in walk(body)) != 1:
        raise _Refused(f"'{name}' is declared more than once")
    found = _Induction(name, None)
    parents = _statement_parents(body)
    for n in walk(body):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name == name:
            if n.op not in ("+=", "-="):
                raise _Refused(f"'{name}' is assigned ('{text(n)}') at line {_line(n)}, not only stepped")
            step = n.rvalue
        elif isinstance(n, c_ast.UnaryOp) and n.op in _STEP_SIGN and isinstance(n.expr, c_ast.ID) \
                and n.expr.name == name:
            step = c_ast.Constant("int", "1")
        elif isinstance(n, c_ast.UnaryOp) and n.op == "&" and isinstance(n.expr, c_ast.ID) and n.expr.name == name:
            raise _Refused(f"the address of '{name}' is taken at line {_line(n)}")
        else:
            continue
        if id(n) not in parents:
            raise _Refused(f"'{name}' is stepped inside an expression at line {_line(n)}")
        if found.step is not None and text(found.step) != text(step):
            raise _Refused(f"'{name}' is stepped by '{text(found.step)}' and by '{text(step)}'")
        found.step = step
        found.steps.append(n)
    _check_invariant(kernel, block, name, found.step)
    return found


def _check_invariant(kernel: Kernel, block: c_ast.Compound, name: str, step: c_ast.Node) -> None:
    """`s` is an `int` expression every read of which gives the same value (see the module doc)."""
    written = assigned_names(kernel.body)
    ints = _int_names(kernel, block)
    for n in walk(step):
        if isinstance(n, c_ast.ID):
            if n.name in written:
                raise _Refused(f"'{name}' is stepped by '{text(step)}', and the kernel writes '{n.name}'")
            if n.name not in ints:
                raise _Refused(f"'{name}' is stepped by '{text(step)}', and '{n.name}' is not an 'int' scalar")
        elif isinstance(n, c_ast.Constant):
            if n.type != "int" or not n.value.isdigit():
                raise _Refused(f"'{name}' is stepped by '{text(step)}', not an 'int' expression")
        elif not (isinstance(n, c_ast.BinaryOp) and n.op in ("+", "-", "*")) \
                and not (isinstance(n, c_ast.UnaryOp) and n.op == "-"):
            raise _Refused(f"'{name}' is stepped by '{text(step)}', not a sum or product of 'int' scalars")


def _int_names(kernel: Kernel, block: c_ast.Compound) -> set[str]:
    """The `int` scalar parameters and the `int` locals declared once, at the top of the kernel body or of
    `block` (their scope is the rest of the block, where every closed form stands)."""
    decls = [n for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name]
    once = {d.name for d in (kernel.body.block_items or []) + (block.block_items or [])
            if _int_decl(d) and sum(e.name == d.name for e in decls) == 1}
    declared = {d.name for d in decls}     # a parameter no local shadows: the same value everywhere
    return once | {p.name for p in kernel.scalars if p.base_type in ("int", "signed int") and p.name not in declared}


def _statement_parents(body: c_ast.Compound) -> dict[int, c_ast.Node]:
    """id(statement) -> the block, branch or loop it is a statement of (statements only)."""
    out = {}
    for n in walk(body):
        if isinstance(n, c_ast.Compound):
            for s in n.block_items or []:
                out[id(s)] = n
        elif isinstance(n, c_ast.If):
            for s in (n.iftrue, n.iffalse):
                out[id(s)] = n
        elif isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)):
            out[id(n.stmt)] = n
    return out


@dataclass
class _Loop:
    """A top-level loop that steps induction variables: its iterator, start and end (past the last)."""
    var: str
    start: c_ast.Node
    end: c_ast.Node          # `b` for `k < b`, `b + 1` for `k <= b`
    trips: sympy.Expr        # end - start, over the names' own symbols


def _loops_of(kernel: Kernel, block: c_ast.Compound, ind: _Induction) -> dict[int, _Loop]:
    """id(loop) -> _Loop for each loop whose body steps `ind`; raises where it is stepped anywhere else
    than the block's top level and such loops' bodies, or used in a loop header."""
    items = block.block_items or []
    top = {id(s) for s in items}
    loops: dict[int, _Loop] = {}
    name = ind.name
    for n in walk(kernel.body):
        if isinstance(n, c_ast.For) and name in set().union(*(ids_in(p) for p in (n.init, n.cond, n.next)
                                                               if p is not None)):
            raise _Refused(f"'{name}' is used in the header of the loop at line {_line(n)}")
    for step in ind.steps:
        if id(step) in top:
            continue
        loop = next((s for s in items if isinstance(s, c_ast.For) and isinstance(s.stmt, c_ast.Compound)
                     and any(t is step for t in s.stmt.block_items or [])), None)
        if loop is None:
            raise _Refused(f"'{name}' is stepped at line {_line(step)} under an 'if' or in a nested or "
                           "'while' loop (only at the top of its block or of a 'for' loop there)")
        loops[id(loop)] = loops.get(id(loop)) or _top_loop(kernel, block, loop)
        _check_step_in_loop(loop, ind, step)
    return loops


def _top_loop(kernel: Kernel, block: c_ast.Compound, loop: c_ast.For) -> _Loop:
    line = _line(loop)
    header = set().union(*(ids_in(p) for p in (loop.init, loop.cond, loop.next) if p is not None))
    info = canonical_loop(loop, {n: sympy.Symbol(n, integer=True) for n in header})
    if info is None or not isinstance(loop.init, c_ast.DeclList) or info.multiplicative or info.step != 1 \
            or info.comparison not in ("<", "<=") or len(loop.init.decls) != 1:
        raise _Refused(f"the loop at line {line} that steps it is not 'for (int k = a; k < b; k++)'")
    start = loop.init.decls[0].init
    bound = loop.cond.right if isinstance(loop.cond.left, c_ast.ID) and loop.cond.left.name == info.var \
        else loop.cond.left
    written = assigned_names(kernel.body)
    ints = _int_names(kernel, block) | {info.var}
    for part in (start, bound):
        for n in walk(part):
            if isinstance(n, c_ast.ID) and (n.name in written or n.name not in ints):
                raise _Refused(f"the loop at line {line} runs to a bound that reads '{n.name}', which is "
                               "written or not an 'int' scalar")
            if not (isinstance(n, (c_ast.ID, c_ast.Constant)) or isinstance(n, c_ast.BinaryOp) and n.op in "+-*"
                    or isinstance(n, c_ast.UnaryOp) and n.op == "-"):
                raise _Refused(f"the loop at line {line} has a bound that is not integer arithmetic")
    if any(isinstance(n, _JUMPS) for n in walk(loop.stmt)):
        raise _Refused(f"the loop at line {line} may leave an iteration early (break, continue, return)")
    end = bound if info.comparison == "<" else c_ast.BinaryOp("+", bound, c_ast.Constant("int", "1"))
    try:
        symbols = {n: sympy.Symbol(n, integer=True) for n in ids_in(start) | ids_in(end)}
        trips = sympy.expand(to_sympy(end, symbols) - to_sympy(start, symbols))
    except NotAffine as why:
        raise _Refused(f"the loop at line {line} has a bound the analysis does not read ({why})")
    return _Loop(info.var, start, end, trips)


def _check_step_in_loop(loop: c_ast.For, ind: _Induction, step: c_ast.Node) -> None:
    items = loop.stmt.block_items or []
    mine = [s for s in items if any(s is t for t in ind.steps)]
    if len(mine) > 1:
        raise _Refused(f"'{ind.name}' is stepped {len(mine)} times in the body of the loop at line {_line(loop)}")
    after = items[next(k for k, s in enumerate(items) if s is step) + 1:]
    if not all(_is_step(s) for s in after):
        raise _Refused(f"'{ind.name}' is stepped at line {_line(step)}, not at the end of its loop's body")


def _is_step(s: c_ast.Node) -> bool:
    return (isinstance(s, c_ast.Assignment) and s.op in ("+=", "-=") and isinstance(s.lvalue, c_ast.ID)) or \
        (isinstance(s, c_ast.UnaryOp) and s.op in _STEP_SIGN and isinstance(s.expr, c_ast.ID))


# -- the rewrite ----------------------------------------------------------------------------------------

def _rewrite(items: list, inductions: dict[str, _Induction], loops: dict[int, _Loop], steps: set[int],
             counts: dict[str, sympy.Expr]) -> list:
    """`items` with every use of an induction variable in closed form and its steps dropped; `counts`: how
    many steps each has made where `items` start."""
    counts = dict(counts)
    out = []
    for k, s in enumerate(items):
        if id(s) in steps:
            name = _stepped_name(s)
            counts[name] = counts[name] + _STEP_SIGN[s.op]
            continue
        if id(s) not in loops:
            out.append(_closed(s, inductions, counts))
            continue
        loop = loops[id(s)]
        k_sym = sympy.Symbol(loop.var, integer=True)
        start = to_sympy(loop.start, {n: sympy.Symbol(n, integer=True) for n in ids_in(loop.start)})
        stepped = {_stepped_name(t) for t in s.stmt.block_items if id(t) in steps}
        inside = {name: counts[name] + (k_sym - start if name in stepped else 0) for name in counts}
        body = [_closed(t, inductions, inside) for t in s.stmt.block_items if id(t) not in steps]
        out.append(c_ast.For(s.init, s.cond, s.next, c_ast.Compound(body, s.stmt.coord), s.coord))
        after = {name: counts[name] + (loop.trips if name in stepped else 0) for name in counts}
        rest = items[k + 1:]
        if loop.trips.is_number and loop.trips >= 0 or not rest:
            counts = after
            continue
        moved = {name for name in stepped if after[name] != counts[name]}
        same = 0        # statements that read none of them are the same both ways: written once, before the `if`
        while same < len(rest) and not (ids_in(rest[same]) & moved) and id(rest[same]) not in loops \
                and id(rest[same]) not in steps:
            same += 1
        out.extend(_closed(t, inductions, counts) for t in rest[:same])
        rest = rest[same:]
        declared = [n.name for t in rest for n in walk(t) if isinstance(n, c_ast.Decl) and n.name]
        if declared:
            raise _Refused(f"the loop at line {_line(s)} may run zero times, and '{declared[0]}', declared after "
                           "it, would be declared in both branches of the test whether it ran")
        if rest:
            ran = c_ast.BinaryOp("<", copy.deepcopy(loop.start), copy.deepcopy(loop.end))
            out.append(c_ast.If(ran, c_ast.Compound(_rewrite(rest, inductions, loops, steps, after)),
                                c_ast.Compound(_rewrite(rest, inductions, loops, steps, counts)), s.coord))
        return out
    return out


def _stepped_name(s: c_ast.Node) -> str:
    return s.lvalue.name if isinstance(s, c_ast.Assignment) else s.expr.name


def _closed(stmt: c_ast.Node, inductions: dict[str, _Induction], counts: dict[str, sympy.Expr]) -> c_ast.Node:
    mapping = {name: _value(name, inductions[name].step, count) for name, count in counts.items() if count != 0}
    return substitute(stmt, mapping) if mapping else stmt


def _value(name: str, step: c_ast.Node, count: sympy.Expr) -> c_ast.Node:
    """`name + count * s` as C (`c + xy`, `c - xy`, `c + k * xy`, `c + (nz - 1) * xy`)."""
    s = text(step)
    s = s if isinstance(step, (c_ast.ID, c_ast.Constant)) else f"({s})"
    sign, magnitude = ("-", -count) if (count.could_extract_minus_sign()) else ("+", count)
    if magnitude == 1:
        return parse_expr(f"{name} {sign} {s}")
    times = cuda_text(magnitude)
    times = times if magnitude.is_Atom or magnitude.is_Mul else f"({times})"
    if s == "1":
        return parse_expr(f"{name} {sign} {times}")
    return parse_expr(f"{name} {sign} {times} * {s}")


def _line(n: c_ast.Node) -> str:
    return str(n.coord.line) if n.coord else "?"


__all__ = ["RESTATED", "DecisionSink", "closed_form_inductions", "in_closed_form"]
