"""Batched kernels: `blockIdx.z` as an independent batch index, so that every pass that applies to one batch
applies to each.

A kernel whose blocks have one z and that reads `blockIdx.z` only as a batch index is, for the passes, the
kernel of one batch: `start` has the batch index as a scalar parameter (the user's `int b = blockIdx.z;`, or
`blockIdx.z` itself under a fresh name) and each per-batch slice of an array (`const float *a = A + b * M * K;`
at the top of the body) as a pointer parameter of its own. The passes then see a 2-D kernel over uniform
values, and `declared` writes a version back with the user's parameters, the slices bound at the top of the
body as the user bound them, and `blockIdx.z` where the batch index was. The launch helpers keep the naive
grid's z (the kernel reads blockIdx.z), so every batch runs as it did.

That is only valid where the batches are independent: no batch writes an element that another batch reads
or writes (`disjointness`). Each array a kernel writes must be addressed, in every access, as
`z * S + f` (through its slice `A + z * S` or in the subscript), with one stride S per array and each f
proved to lie in [0, S) from the guards and loop bounds around the access: the batch's elements are then
the slice [z * S, (z + 1) * S) and slices of different batches do not meet. Arrays only read may be shared
(a matrix every batch multiplies by). Anything else keeps the kernel as written, with the reason."""
from __future__ import annotations

import copy
from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, NotAffine, iterator_symbol, param_symbol, to_sympy
from gpgpu_opt.analysis.z_axis import is_z
from gpgpu_opt.ast_util import call_args, call_name, fresh_name, ids_in, transform, walk
from gpgpu_opt.check.extents import all_accesses
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting.cbuild import Unsupported, text
from gpgpu_opt.rewriting.guards import clauses, frames_to, normalize_early_returns, parents_of, slack


class AcrossBatches(Unsupported):
    """A batch reads what its neighbours read (the planes of a 3-D stencil): reuse along z, which is the z
    march's, not independent batches."""


@dataclass(frozen=True)
class Slice:
    """`T *local = param + offset;` at the top of the body: the batch's part of a parameter array."""
    local: str
    param: str
    decl: c_ast.Decl        # as the user wrote it (the naive kernel's)
    stride: sympy.Expr      # the offset's coefficient of the batch index


@dataclass(frozen=True)
class Batches:
    naive: Kernel
    start: Kernel                   # the kernel of one batch, as the passes see it
    index: str                      # the scalar parameter that stands for the batch index
    index_decl: c_ast.Decl | None   # the user's `int b = blockIdx.z;` (None: blockIdx.z itself, renamed)
    slices: tuple[Slice, ...]

    @classmethod
    def of(cls, naive: Kernel, kernel: Kernel) -> "Batches | str | None":
        """The batch view of `kernel` (the naive kernel as the passes start from it, its blocks of one z) and
        of `naive` (as written); None when it does not read blockIdx.z; else why its batches are not taken
        as independent."""
        if not any(is_z(n) for n in walk(kernel.body)):
            return None
        try:
            return _view(naive, kernel)
        except AcrossBatches:
            return None
        except Unsupported as why:
            return str(why)

    def declared(self, version: Kernel) -> Kernel:
        """A version of `start` with the user's parameters, the slices bound as the user bound them, and the
        batch index read from blockIdx.z."""
        out = version.copy()
        func = out.funcdef
        taken = {p.name for p in self.naive.params} | ({self.index} if self.index_decl is not None else set())
        clash = next((n.name for n in walk(func.body) if isinstance(n, c_ast.Decl) and n.name in taken
                      and n.name not in {s.local for s in self.slices}), None)
        if clash is not None:
            raise Unsupported(f"a pass declared '{clash}', a name the batched kernel needs")
        passed = {d.name: d for d in func.decl.type.args.params if isinstance(d, c_ast.Decl)}
        params = []
        for decl in self.naive.funcdef.decl.type.args.params:
            if not isinstance(decl, c_ast.Decl):
                params.append(copy.deepcopy(decl))
                continue
            local = next((s.local for s in self.slices if s.param == decl.name), decl.name)
            params.append(_renamed(passed[local], decl.name) if local in passed else copy.deepcopy(decl))
        func.decl.type.args.params = params
        head: list[c_ast.Node] = [copy.deepcopy(self.index_decl)] if self.index_decl is not None else []
        for s in self.slices:
            bound = copy.deepcopy(s.decl)
            bound.type = copy.deepcopy(passed[s.local].type)    # its qualifiers as the passes left them
            bound.quals = list(passed[s.local].quals)
            head.append(bound)
        func.body.block_items = head + list(func.body.block_items or [])
        if self.index_decl is None:
            func.body = transform(func.body, lambda n: _block_z() if isinstance(n, c_ast.ID) and n.name == self.index
                                  else None, skip_member_names=True)
        if self.index_decl is None and self.index in ids_in(func.body):
            raise Unsupported("the batch index is still a name")
        return out

    def renamed_arrays(self) -> dict[str, str]:
        """Parameter array -> the slice that stands for it in `start`."""
        return {s.param: s.local for s in self.slices}


def _block_z() -> c_ast.StructRef:
    return c_ast.StructRef(c_ast.ID("blockIdx"), ".", c_ast.ID("z"))


def _renamed(decl: c_ast.Decl, name: str) -> c_ast.Decl:
    out = copy.deepcopy(decl)
    out.name = name
    node = out.type
    while not isinstance(node, c_ast.TypeDecl):
        node = node.type
    node.declname = name
    return out


def _is_block_z(n: c_ast.Node) -> bool:
    return is_z(n) and n.name.name == "blockIdx"


def _view(naive: Kernel, kernel: Kernel) -> Batches:
    body = kernel.body
    for n in walk(body):
        if is_z(n) and not _is_block_z(n):
            raise Unsupported(f"it reads {n.name.name}.z, not only blockIdx.z")
    items = list(body.block_items or [])
    assigned = assigned_names(body)
    declared_names = [n.name for n in walk(body) if isinstance(n, c_ast.Decl) and n.name]
    scalars = {p.name: param_symbol(p.name) for p in kernel.scalars}
    # the batch index: the user's `int b = blockIdx.z;` (blockIdx.z read nowhere else), or blockIdx.z itself
    index_at = _index_declaration(items, assigned, declared_names)
    reads = sum(1 for n in walk(body) if _is_block_z(n))
    view = kernel.copy()
    vitems = list(view.body.block_items or [])
    naive_items = list(naive.body.block_items or [])
    if index_at is not None and reads == 1:
        index, index_type = items[index_at].name, copy.deepcopy(items[index_at].type)
        index_decl = copy.deepcopy(naive_items[index_at]) if len(naive_items) == len(items) else None
        if index_decl is None or index_decl.name != index:
            raise Unsupported("the batch index's declaration is not where the kernel as written has it")
        index_decl.init = _block_z()    # its value (`blockIdx.z * blockDim.z + threadIdx.z` under blocks of one z)
        del vitems[index_at]
    else:
        taken = set(declared_names) | {p.name for p in kernel.params} | ids_in(body)
        index, index_type, index_decl, index_at = fresh_name("batch", taken), None, None, None
        view.body.block_items = vitems
        transform(view.body, lambda n: c_ast.ID(index) if _is_block_z(n) else None)
        vitems = list(view.body.block_items or [])
    z = param_symbol(index)
    env = {**scalars, index: z}
    # per-batch slices of the parameter arrays: `T *p = P + e(z);` at the top, never reassigned
    arrays = {p.name: p for p in kernel.arrays}
    naive_decls = {d.name: d for d in naive_items if isinstance(d, c_ast.Decl)}
    slices, slice_decls, rest = [], {}, []
    for stmt in vitems:
        found = _slice(stmt, arrays, env, z, assigned, declared_names)
        if found is None:
            rest.append(stmt)
            continue
        local, param, stride = found
        if any(s.param == param for s in slices):
            raise Unsupported(f"'{param}' is sliced twice")
        slices.append(Slice(local, param, copy.deepcopy(naive_decls[local]), stride))
        slice_decls[local] = stmt
    sliced = {s.param for s in slices}
    for name in sorted(ids_in(c_ast.Compound(rest)) & sliced):
        raise Unsupported(f"'{name}' is read both through its batch's slice and as a whole")
    view.body.block_items = rest
    # the kernel of one batch: each slice a parameter in its array's place, the batch index a scalar one
    params = view.funcdef.decl.type.args.params
    for k, decl in enumerate(params):
        s = next((s for s in slices if isinstance(decl, c_ast.Decl) and s.param == decl.name), None)
        if s is not None:
            params[k] = _as_parameter(slice_decls[s.local])
    if index in ids_in(view.body):
        type_ = index_type or c_ast.TypeDecl(declname=index, quals=[], align=None,
                                             type=c_ast.IdentifierType(["unsigned", "int"]))
        params.append(c_ast.Decl(name=index, quals=[], align=[], storage=[], funcspec=[], type=type_, init=None,
                                 bitsize=None))
    disjointness(view, z, {s.local: s.stride for s in slices})
    return Batches(naive, view, index, index_decl, tuple(slices))


def _as_parameter(decl: c_ast.Decl) -> c_ast.Decl:
    out = copy.deepcopy(decl)
    out.init, out.storage = None, []
    return out


def _index_declaration(items, assigned, declared_names) -> int | None:
    """Where the top of the body declares `int b = blockIdx.z;` (blocks of one z: `blockIdx.z * 1 + 0`)."""
    for k, stmt in enumerate(items):
        if isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.TypeDecl) and stmt.init is not None \
                and isinstance(stmt.type.type, c_ast.IdentifierType) and stmt.name not in assigned \
                and declared_names.count(stmt.name) == 1 and any(_is_block_z(n) for n in walk(stmt.init)):
            try:
                value = to_sympy(stmt.init, {})
            except NotAffine:
                return None
            return k if sympy.expand(value - BID["z"]) == 0 else None
    return None


def _slice(stmt, arrays, env, z, assigned, declared_names):
    """(local, parameter, stride) of `T *p = P + e;` / `&P[e]` with e uniform and z * stride its batch term."""
    if not (isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.PtrDecl) and stmt.init is not None):
        return None
    init = stmt.init
    while isinstance(init, c_ast.Cast) and isinstance(init.to_type.type, c_ast.PtrDecl):
        init = init.expr
    if isinstance(init, c_ast.UnaryOp) and init.op == "&" and isinstance(init.expr, c_ast.ArrayRef):
        base, offset = init.expr.name, init.expr.subscript
    elif isinstance(init, c_ast.BinaryOp) and init.op == "+":
        base, offset = (init.left, init.right) if isinstance(init.left, c_ast.ID) else (init.right, init.left)
    else:
        return None
    if not (isinstance(base, c_ast.ID) and base.name in arrays):
        return None
    param = arrays[base.name]
    pointee = stmt.type.type
    if not (isinstance(pointee, c_ast.TypeDecl) and isinstance(pointee.type, c_ast.IdentifierType)
            and " ".join(pointee.type.names) == param.base_type):
        return None
    if stmt.name in assigned or declared_names.count(stmt.name) != 1 or not ids_in(offset) <= set(env):
        return None
    try:
        value = sympy.expand(to_sympy(offset, env))
    except NotAffine:
        return None
    stride = sympy.expand(value.coeff(z))
    if z in stride.free_symbols or sympy.expand(value - stride * z) != 0 or stride == 0:
        raise Unsupported(f"the slice '{stmt.name}' of '{base.name}' is not the batch index times a stride")
    return stmt.name, base.name, stride


def disjointness(kernel: Kernel, z: sympy.Symbol, strides: dict[str, sympy.Expr]) -> None:
    """Raise Unsupported unless no batch touches an element of an array that another batch writes (module
    docstring), and no batch reads what another reads through the batch index (the planes of a 3-D grid,
`in[(z + 1) * plane + i]`, are the z march's). `strides`: the slices' strides, by slice parameter."""
    pointers = {p.name for p in kernel.arrays}
    for n in walk(kernel.body):
        name = call_name(n)
        for arg in call_args(n) if name is not None else []:
            while isinstance(arg, c_ast.Cast):
                arg = arg.expr
            address = isinstance(arg, c_ast.UnaryOp) and arg.op == "&" and not name.startswith(("atomic", "__st", "__ld"))
            pointer = isinstance(arg, c_ast.ID) and arg.name in pointers or isinstance(arg, c_ast.BinaryOp) and \
                arg.op in ("+", "-") and any(isinstance(a, c_ast.ID) and a.name in pointers for a in (arg.left, arg.right))
            if address or pointer:
                raise Unsupported(f"{name} is given {text(arg)}, and what it accesses is not seen")
    work = kernel.copy()
    normalize_early_returns(work.body)     # `if (i >= n) return;` guards what follows like `if (i < n)`
    accesses = all_accesses(work)
    written = {a.array for a in accesses if a.mode == "write"}
    parents = parents_of(work.body)
    env = _straight_line_env(work)
    on_batch = _depending_on(work.body, z.name)
    found: dict[str, sympy.Expr] = dict(strides)
    for a in accesses:
        index = None if a.index is None else sympy.expand(a.index)
        if a.array not in strides and a.array not in written:
            seen = a.evaluable_index
            if seen is not None and z not in seen.free_symbols and \
                    not {s.name.lstrip("?") for s in seen.free_symbols if s.name.startswith("?")} & on_batch:
                continue    # an array every batch reads alike
            if index is None:
                raise AcrossBatches(f"{a.array}[{a.index_text}] may read another batch's elements")
        if index is None:
            raise Unsupported(f"the subscript of {a.array}[{a.index_text}] is not affine, so the batches may "
                              "overlap")
        if a.array in strides:
            stride, within = strides[a.array], index
            if z in index.free_symbols:
                raise Unsupported(f"{a.array}[{a.index_text}] reads the batch index inside its batch's slice")
        else:
            stride = sympy.expand(index.coeff(z))
            within = sympy.expand(index - stride * z)
            if stride == 0 or z in stride.free_symbols or z in within.free_symbols:
                raise Unsupported(f"the batches overlap: every batch accesses {a.array}[{a.index_text}], "
                                  "which one of them writes")
        if found.setdefault(a.array, stride) != stride:
            raise Unsupported(f"{a.array} is addressed with batch strides {found[a.array]} and {stride}")
        problem = _within(a, within, stride, parents, work.body, env)
        if problem and a.array not in written and a.array not in strides:
            raise AcrossBatches(f"{a.array}[{a.index_text}] {problem}")
        if problem:
            raise Unsupported(f"the batches may overlap: {a.array}[{a.index_text}] {problem}")


_G = {a: sympy.Symbol(f"G.{a}", integer=True, nonnegative=True) for a in "xy"}


def _depending_on(body: c_ast.Node, index: str) -> set[str]:
    """The locals whose value may depend on the batch index (a closure over every definition)."""
    definitions = [(n.name, ids_in(n.init)) for n in walk(body) if isinstance(n, c_ast.Decl) and n.init is not None]
    definitions += [(n.lvalue.name, ids_in(n.rvalue)) for n in walk(body)
                    if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID)]
    found, changed = {index}, True
    while changed:
        changed = False
        for target, reads in definitions:
            if target not in found and reads & found:
                found.add(target)
                changed = True
    return found


def _straight_line_env(kernel: Kernel) -> dict:
    """Each local declared once and never assigned, as its definition (scalars and loop iterators as
    themselves): what a guard's names stand for."""
    assigned = assigned_names(kernel.body)
    decls = [n for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name]
    counts = {name: sum(1 for d in decls if d.name == name) for name in {d.name for d in decls}}
    env = {p.name: param_symbol(p.name) for p in kernel.scalars}
    for n in walk(kernel.body):
        if isinstance(n, c_ast.For) and isinstance(n.init, c_ast.DeclList):
            for d in n.init.decls:
                env.setdefault(d.name, iterator_symbol(d.name))
        elif isinstance(n, c_ast.Decl) and n.name and n.init is not None and isinstance(n.type, c_ast.TypeDecl) \
                and n.name not in assigned and counts[n.name] == 1:
            try:
                env[n.name] = to_sympy(n.init, env)
            except NotAffine:
                pass
    return env


def _within(a, within: sympy.Expr, stride: sympy.Expr, parents, body, env: dict) -> str | None:
    """Why `within` (an access's subscript past its batch's start) is not proved to lie in [0, stride)."""
    try:
        frames = frames_to(a.node, parents, body)
    except Unsupported as why:
        return f"is not bounded ({why})"
    to_global = {TID[x]: _G[x] - BID[x] * BDIM[x] for x in "xy"}
    value = sympy.expand(within.subs(to_global))
    ranges: dict[sympy.Symbol, tuple[sympy.Expr, sympy.Expr]] = {}
    for frame in frames:
        if frame.kind != "if":
            continue
        for clause in clauses(frame.node.cond):
            found = slack(clause, env)
            if found is None:
                continue
            room, strict = found
            room = sympy.expand(room.subs(to_global))
            for g in _G.values():   # `g < E`: room = E - g (> 0)
                c = room.coeff(g)
                if c == -1 and not (room + g).free_symbols & {*_G.values(), *TID.values(), *BID.values()}:
                    hi = room + g - (1 if strict else 0)
                    ranges[g] = (sympy.Integer(0), hi)
    for loop in a.loops:
        end = loop.end_exclusive
        if end is None:
            return f"is in loop '{loop.var}', whose range is not known"
        ranges[iterator_symbol(loop.var)] = (loop.start, end - 1)
    positive = {s for lo, hi in ranges.values() if lo.is_number and lo >= 0 for s in _at_least_zero(hi)}
    variables = set(ranges)
    low, high = value.subs({v: 0 for v in variables}), value.subs({v: 0 for v in variables})
    for v in value.free_symbols:
        if v in variables:
            continue
        if v.name.startswith(("?", "tid.", "bid.", "bdim.", "gdim.", "G.")):
            return f"depends on {v.name.lstrip('?')}, which is not bounded"
    for v in variables & value.free_symbols:
        c = sympy.expand(value.coeff(v))
        if c.free_symbols & variables:
            return "is not affine in its thread and loop indices"
        lo, hi = ranges[v]
        if not _nonnegative(c, positive):
            return f"has a coefficient {c} of {v} not known to be positive"
        low, high = low + c * lo, high + c * hi
    if not _nonnegative(low, positive):
        return f"may be below its batch's start ({sympy.expand(low)})"
    if not _nonnegative(stride - 1 - high, positive):
        return f"may reach past its batch's {stride} elements (up to {sympy.expand(high)})"
    return None


def _at_least_zero(hi: sympy.Expr) -> set:
    """`s - c` (c >= 0) as the top of a range that is not empty where an access runs: s >= c >= 0."""
    if len(hi.free_symbols) != 1:
        return set()
    (s,) = hi.free_symbols
    rest = sympy.expand(hi - s)
    return {s} if rest.is_number and rest <= 0 else set()


def _nonnegative(expr: sympy.Expr, bounded: set) -> bool:
    """Surely >= 0 where every symbol of `bounded` is >= 0 (an upper bound of a non-empty range) and the
    others are sizes: a polynomial whose coefficients are all >= 0 once each bounded s is written s' >= 0."""
    expr = sympy.expand(expr)
    if expr.free_symbols - bounded:
        return False
    poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str)) if expr.free_symbols else None
    if poly is None:
        return bool(expr >= 0)
    return all(c >= 0 for c in poly.coeffs())


__all__ = ["Batches", "Slice", "disjointness"]
