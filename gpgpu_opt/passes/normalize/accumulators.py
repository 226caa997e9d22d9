"""Register promotion of global accumulators (part of normalize).

    c[i * nj + j] *= beta;                        float c_acc = c[i * nj + j];
    for (k = 0; k < nk; k++)              =>      c_acc *= beta;
        c[i * nj + j] += alpha * a[...] * b[...]; for (k = 0; k < nk; k++)
                                                      c_acc += alpha * a[...] * b[...];
                                                  c[i * nj + j] = c_acc;

Safe when the element does not change in the loop, the array is not otherwise touched there, nothing it
might alias is accessed there (it is `__restrict__`, or the loop touches no other array), the update is
unconditional and the loop cannot leave the kernel early. Updates of the same element right before the loop
join the accumulator. When the loop may run zero times, no access is added that the naive kernel would not
make: with such updates before it, the element is read and written anyway; without them, the load, the
loop and the store go under the loop's entry condition (`if (0 < nk) { ... }`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names, canonical_loop
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.ast_util import fresh_name, ids_in, transform, walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.pass_api.context import PassContext

_UPDATES = ("+=", "-=", "*=")


@dataclass
class _Candidate:
    update: c_ast.Assignment        # `a[e] op= f` in the loop body
    array: str
    subject: str                    # `a[e]`, for the report


def promote_accumulators(kernel: Kernel, ctx: PassContext) -> None:
    promoter = _Promoter(kernel, ctx)
    for compound in [n for n in walk(kernel.body) if isinstance(n, c_ast.Compound)]:
        items = list(compound.block_items or [])
        k = 0
        while k < len(items):
            stmt = items[k]
            if isinstance(stmt, c_ast.For):
                replaced = promoter.promote(items, k)
                if replaced is not None:
                    first, new = replaced
                    items[first:k + 1] = new
                    k = first + len(new)
                    continue
            k += 1
        compound.block_items = items


class _Promoter:
    def __init__(self, kernel: Kernel, ctx: PassContext):
        self.kernel = kernel
        self.ctx = ctx
        self.params = {p.name: p for p in kernel.arrays}
        self.env = {p.name: param_symbol(p.name) for p in kernel.scalars}
        self.taken = {n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name} | \
            {p.name for p in kernel.params}
        self.printer = CudaGenerator()

    def promote(self, items: list, at: int) -> tuple[int, list] | None:
        """Promote an accumulator of the loop `items[at]`: returns (first index replaced, new statements)."""
        loop = items[at]
        candidate = self._candidate(loop)
        if candidate is None:
            return None
        where = Location.of(candidate.update)
        why = self._unsafe(loop, candidate)
        if why:
            self.ctx.log.skip(candidate.subject, f"not promoted to a register: {why}", where)
            return None
        first, before = self._updates_before(items, at, candidate)
        runs = self._runs_at_least_once(loop)
        entry = None
        if not before and not runs:
            entry, why = self._entry_condition(loop)
            if entry is None:
                self.ctx.log.skip(candidate.subject, f"not promoted to a register: the loop may run zero times "
                                                 f"and {why}", where)
                return None
        new = self._rewrite(items[first:at], loop, candidate, before, entry)
        how = "with the updates before the loop" if before else \
            "under the loop's entry condition" if entry is not None else "for the loop"
        self.ctx.log.applied(candidate.subject, f"global accumulator promoted to a register {how}", where)
        return first, new

    # -- what may be promoted ------------------------------------------------------------------------
    def _candidate(self, loop: c_ast.For) -> _Candidate | None:
        for stmt in _body_items(loop):
            if isinstance(stmt, c_ast.Assignment) and stmt.op in _UPDATES and _array_of(stmt.lvalue) in self.params:
                array = _array_of(stmt.lvalue)
                if ids_in(stmt.lvalue.subscript) & (assigned_names(loop.stmt) | {g.loop_var(loop)[0]}):
                    continue  # the element changes with the loop: not an accumulator
                return _Candidate(stmt, array, f"{array}[{self.printer.visit(stmt.lvalue.subscript)}]")
        return None

    def _unsafe(self, loop: c_ast.For, c: _Candidate) -> str | None:
        pointers = [n.name for n in walk(loop.stmt) if isinstance(n, c_ast.ID) and n.name in self.params
                    and n is not c.update.lvalue.name]
        if self.params[c.array].is_volatile:
            return "the array is volatile: each of its updates happens as written"
        if c.array in pointers:
            return "the array is used again in the loop"
        if pointers and not self.params[c.array].is_restrict:
            return "it may alias the other arrays the loop uses (declare it __restrict__)"
        if any(isinstance(n, (c_ast.Return, c_ast.Goto, c_ast.Label)) for n in walk(loop.stmt)):
            return "the loop may leave the kernel before the store after it"
        return None

    def _updates_before(self, items: list, at: int, c: _Candidate) -> tuple[int, list[c_ast.Assignment]]:
        """Stores to the same element just before the loop (declarations without initializer may sit between)."""
        element = self.printer.visit(c.update.lvalue)
        first, found = at, []
        for k in range(at - 1, -1, -1):
            stmt = items[k]
            if isinstance(stmt, c_ast.Decl) and stmt.init is None and isinstance(stmt.type, c_ast.TypeDecl):
                continue
            if isinstance(stmt, c_ast.Assignment) and stmt.op in ("=",) + _UPDATES \
                    and _array_of(stmt.lvalue) == c.array and self.printer.visit(stmt.lvalue) == element \
                    and not any(_array_of(n) == c.array for n in walk(stmt.rvalue) if isinstance(n, c_ast.ArrayRef)):
                found.insert(0, stmt)
                first = k
                continue
            break
        return first, found

    def _runs_at_least_once(self, loop: c_ast.For) -> bool:
        info = canonical_loop(loop, self.env)
        trips = info.trip_count() if info else None
        return trips is not None and bool(trips.is_number) and trips > 0

    def _entry_condition(self, loop: c_ast.For) -> tuple[c_ast.Node | None, str]:
        """The loop's first test with the counter at its start value: `0 < nk` for `k = 0; k < nk`."""
        var, start, declared = g.loop_var(loop)
        if var is None or start is None or loop.cond is None:
            return None, "its start is not a plain assignment"
        if not (g.is_pure(loop.cond, allow_memory=True) and g.is_pure(start, allow_memory=True)):
            return None, "its condition has side effects"
        if (ids_in(loop.cond) | ids_in(start)) - {var} & assigned_names(loop.stmt):
            return None, "its bound changes inside it"
        if not declared and not g.used_only_within(self.kernel.body, loop, var):
            return None, f"'{var}' is used outside the loop"
        cond = transform(copy.deepcopy(loop.cond),
                         lambda n: copy.deepcopy(start) if isinstance(n, c_ast.ID) and n.name == var else None)
        return cond, ""

    # -- the rewrite -----------------------------------------------------------------------------------
    def _rewrite(self, prefix: list, loop: c_ast.For, c: _Candidate, before: list, entry) -> list:
        name = fresh_name(f"{c.array}_acc", self.taken)
        element = c.update.lvalue
        elem_type = self.params[c.array].base_type.split()

        def declare(init):
            return c_ast.Decl(name, [], [], [], [], c_ast.TypeDecl(name, [], None, c_ast.IdentifierType(elem_type)),
                              init, None, element.coord)

        untouched = [s for s in prefix if all(s is not b for b in before)]  # declarations in between
        statements = []
        if before and before[0].op == "=":
            statements.append(declare(before[0].rvalue))
            before = before[1:]
        else:
            statements.append(declare(copy.deepcopy(element)))
        for update in before:
            update.lvalue = c_ast.ID(name)
            statements.append(update)
        c.update.lvalue = c_ast.ID(name)
        statements += [loop, c_ast.Assignment("=", copy.deepcopy(element), c_ast.ID(name))]
        if entry is not None:
            return untouched + [c_ast.If(entry, c_ast.Compound(statements), None)]
        return untouched + statements


def _body_items(loop: c_ast.For) -> list:
    return (loop.stmt.block_items or []) if isinstance(loop.stmt, c_ast.Compound) else [loop.stmt]


def _array_of(node) -> str | None:
    return node.name.name if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID) else None
