"""The loop prefetch works on: `for (k0 = S; k0 < E; k0 += STEP) { copies; barrier; compute; barrier }`.

The copies are the statements before the first barrier: each stores one global element (a load of a
read-only array, maybe predicated `p ? G[j] : 0`) into a shared tile, alone, under an `if`, or in a loop
of constant bounds (`#pragma unroll for (int r = 0; r < 16; r++) tile[r][tx] = ...`). The register tile's
form, loads into a private array then a second loop storing it (`A_staged[l] = ...; tile[..] = A_staged[l]`),
is read as the copies it makes. The compute part reads the tiles and writes none; nothing outside the loop
touches them; the copies depend on nothing the loop changes but `k0`.

The body may begin with the step's positions, constants computed from the iterator alone, as the
partition pass's rotated loop has (`for (int k0_step = 0; k0_step < k0_steps; k0_step++) { const int k0 =
(k0_step + blockIdx.x) % k0_steps * 16; copies; ...`): a step's copies are made with its positions
computed for that step, under the step's condition (so `% k0_steps` never divides by zero).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from pycparser import c_ast

from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.cbuild import Unsupported, text


class NotStaged(Exception):
    """The kernel has no loop that stages global data in shared tiles: nothing to prefetch."""


@dataclass
class Counter:
    """The header of an unrolled copy loop: `for (int var = start; var < stop; var += step)`."""
    var: str
    start: int
    stop: int
    step: int
    header: c_ast.For            # the loop itself (its statement is replaced when it is printed again)

    @property
    def trips(self) -> int:
        return max(0, -(-(self.stop - self.start) // self.step))


@dataclass
class Copy:
    tile: str
    target: c_ast.ArrayRef       # tile[...][...]
    array: str                   # the global array read
    index: c_ast.Node            # its subscript
    predicate: c_ast.Node | None  # the load happens where this holds, else the element is 0
    zero: c_ast.Node | None
    decls: list[c_ast.Decl]      # the locals the copy computes first (`const int e = ...`)
    counter: Counter | None
    guard: c_ast.Node | None     # an `if` around the copy

    @property
    def value(self) -> c_ast.Node:
        load = c_ast.ArrayRef(c_ast.ID(self.array), copy.deepcopy(self.index))
        if self.predicate is None:
            return load
        return c_ast.TernaryOp(copy.deepcopy(self.predicate), load, copy.deepcopy(self.zero))


@dataclass
class StagedLoop:
    loop: c_ast.For
    parent: c_ast.Compound       # the block the loop is an item of
    var: str
    start: c_ast.Node
    step: int
    copies: list[Copy]
    compute: list[c_ast.Node]    # the items between the two barriers
    tiles: dict[str, c_ast.Decl]  # the shared tiles the copies fill, by name
    notes: list[c_ast.Node]      # the comments on the copies, where they are plain stores of loads
    positions: list[c_ast.Decl] = field(default_factory=list)  # `const int k0 = f(k0_step);` heading the body

    def guarded(self, value: c_ast.Node, stmts: list[c_ast.Node]) -> list[c_ast.Node]:
        """`stmts` under the loop's condition for `var` = value (as they are when it is a constant truth)."""
        cond = self.cond_at(value)
        if isinstance(cond, c_ast.BinaryOp) and all(isinstance(x, c_ast.Constant) and x.value.isdigit()
                                                    for x in (cond.left, cond.right)):
            left, right = int(cond.left.value), int(cond.right.value)
            if left < right or cond.op == "<=" and left == right:
                return stmts if not self.positions else [c_ast.Compound(stmts)]
        return [c_ast.If(cond, c_ast.Compound(stmts), None)]

    def at_step(self, value: c_ast.Node, names: dict[str, str]) -> tuple[list[c_ast.Decl], dict[str, c_ast.Node]]:
        """The positions of the step where `var` = value, declared under `names` (position -> name), and the
        mapping that makes a copy of this loop's step one of that step."""
        from gpgpu_opt.ast_util import substitute

        mapping = {self.var: value}
        decls = []
        for p in self.positions:
            decl = copy.deepcopy(p)
            decl.name = decl.type.declname = names[p.name]
            decl.init = _folded(substitute(p.init, mapping))
            decls.append(decl)
            mapping[p.name] = c_ast.ID(names[p.name])
        return decls, mapping

    def cond_at(self, value: c_ast.Node) -> c_ast.Node:
        """The loop's condition for `var` = value."""
        from gpgpu_opt.ast_util import substitute
        return substitute(self.loop.cond, {self.var: value})


def is_barrier(n: c_ast.Node) -> bool:
    return isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name == "__syncthreads"


def find_staged_loop(kernel: Kernel) -> StagedLoop:
    body = kernel.body
    parents = g.parents_of(body)
    candidates = [n for n in walk(body) if isinstance(n, c_ast.For) and isinstance(n.stmt, c_ast.Compound)
                  and any(is_barrier(s) for s in n.stmt.block_items or [])]
    if not candidates:
        raise NotStaged("no loop stages global data in shared tiles")
    if len(candidates) > 1:
        raise Unsupported("more than one loop stages shared tiles")
    loop = candidates[0]
    parent = parents.get(id(loop))
    if not isinstance(parent, c_ast.Compound):
        raise Unsupported("the staged loop is not a statement of a block")
    var, start, step = _header(loop)
    items = loop.stmt.block_items
    positions = _positions(items)
    barriers = [i for i, s in enumerate(items) if is_barrier(s)]
    if len(barriers) != 2 or barriers[1] != len(items) - 1:
        raise Unsupported("the staged loop is not 'copies; barrier; compute; barrier'")
    shared = {n.name: n for n in walk(body) if isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or [])}
    prefix = items[len(positions):barriers[0]]
    copies = _copies(prefix, shared, kernel)
    if not copies:
        raise NotStaged("the staged loop copies no global data")
    compute = items[barriers[0] + 1:barriers[1]]
    tiles = {c.tile: shared[c.tile] for c in copies}
    fused = any(isinstance(s, c_ast.Decl) for s in prefix)
    notes = [] if fused else [s for s in prefix if type(s).__name__ == "Comment"]
    staged = StagedLoop(loop, parent, var, start, step, copies, compute, tiles, notes, positions)
    _check(staged, body, kernel)
    return staged


def _header(loop: c_ast.For) -> tuple[str, c_ast.Node, int]:
    var, start, _ = g.loop_var(loop)
    cond, nxt = loop.cond, loop.next
    if var is None or start is None or not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=")
                                            and isinstance(cond.left, c_ast.ID) and cond.left.name == var):
        raise Unsupported("the staged loop's header is not 'for (int k = s; k < e; k += step)'")
    step = None
    if isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("++", "p++") and isinstance(nxt.expr, c_ast.ID) \
            and nxt.expr.name == var:
        step = 1
    if isinstance(nxt, c_ast.Assignment) and nxt.op == "+=" and isinstance(nxt.lvalue, c_ast.ID) \
            and nxt.lvalue.name == var and isinstance(nxt.rvalue, c_ast.Constant) and nxt.rvalue.value.isdigit():
        step = int(nxt.rvalue.value)
    if not step:
        raise Unsupported(f"the staged loop's step '{text(nxt)}' is not a positive constant")
    return var, start, step


def _positions(items: list[c_ast.Node]) -> list[c_ast.Decl]:
    """The constant scalars of pure initializers that head the loop body (what `_check` checks of them)."""
    positions = []
    for item in items:
        if not (isinstance(item, c_ast.Decl) and "const" in (item.quals or []) and item.init is not None
                and isinstance(item.type, c_ast.TypeDecl) and g.is_pure(item.init)):
            break
        positions.append(item)
    return positions


def _int(node) -> int | None:
    return int(node.value) if isinstance(node, c_ast.Constant) and node.value.isdigit() else None


def _counter(loop: c_ast.For) -> Counter:
    var, start, _ = g.loop_var(loop)
    cond, nxt = loop.cond, loop.next
    stop = _int(cond.right) if isinstance(cond, c_ast.BinaryOp) and cond.op == "<" \
        and isinstance(cond.left, c_ast.ID) and cond.left.name == var else None
    step = 1 if isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("++", "p++") else \
        _int(nxt.rvalue) if isinstance(nxt, c_ast.Assignment) and nxt.op == "+=" else None
    if var is None or _int(start) is None or stop is None or not step:
        raise Unsupported(f"a copy loop's bounds are not constants ('{text(loop.cond)}')")
    return Counter(var, _int(start), stop, step, loop)


def _copies(prefix: list[c_ast.Node], shared: dict, kernel: Kernel) -> list[Copy]:
    """The copies the statements before the first barrier make, with the register tile's loads fused into
    the stores of what they loaded."""
    registers: dict[str, Copy] = {}
    copies = []
    for stmt in prefix:
        if isinstance(stmt, (c_ast.Pragma,)) or type(stmt).__name__ == "Comment":
            continue
        if isinstance(stmt, c_ast.Decl) and isinstance(stmt.type, c_ast.ArrayDecl) and stmt.init is None \
                and not stmt.storage:
            registers[stmt.name] = None
            continue
        guard, counter, decls = None, None, []
        inner = stmt
        if isinstance(stmt, c_ast.If) and stmt.iffalse is None and len(g.items(stmt.iftrue)) == 1:
            guard, inner = stmt.cond, g.items(stmt.iftrue)[0]
        elif isinstance(stmt, c_ast.For):
            counter = _counter(stmt)
            *decls, inner = g.items(stmt.stmt)
            if not all(isinstance(d, c_ast.Decl) and d.init is not None and "const" in (d.quals or [])
                       for d in decls):
                raise Unsupported(f"a copy loop does more than compute constants and copy: '{text(stmt)}'")
        if not (isinstance(inner, c_ast.Assignment) and inner.op == "=" and isinstance(inner.lvalue, c_ast.ArrayRef)):
            raise Unsupported(f"a statement before the loop's barrier is not a copy: '{text(stmt)}'")
        base = _base(inner.lvalue)
        value = inner.rvalue
        if base in registers:
            registers[base] = _copy(None, None, value, decls, counter, guard, kernel)
            continue
        if base not in shared:
            raise Unsupported(f"'{text(inner.lvalue)}' before the loop's barrier is not a shared tile")
        if isinstance(value, c_ast.ArrayRef) and isinstance(value.name, c_ast.ID) and value.name.name in registers:
            loaded = registers[value.name.name]
            if loaded is None or counter is None or loaded.counter is None \
                    or text(loaded.counter.header.cond) != text(counter.header.cond) \
                    or not (isinstance(value.subscript, c_ast.ID) and value.subscript.name == counter.var):
                raise Unsupported(f"'{text(inner)}' stores a register the loop did not load alike")
            mine = {d.name: text(d) for d in decls}
            theirs = {d.name: text(d) for d in loaded.decls}
            if any(name in mine and mine[name] != t for name, t in theirs.items()):
                raise Unsupported(f"'{text(inner)}' and its load compute their indices differently")
            decls = loaded.decls + [d for d in decls if d.name not in theirs]
            copies.append(_copy(base, inner.lvalue, loaded.value, decls, counter, guard, kernel))
            continue
        copies.append(_copy(base, inner.lvalue, value, decls, counter, guard, kernel))
    return copies


def _copy(tile, target, value, decls, counter, guard, kernel: Kernel) -> Copy:
    predicate, zero = None, None
    if isinstance(value, c_ast.TernaryOp):
        if not (isinstance(value.iffalse, c_ast.Constant) and float(value.iffalse.value.rstrip("fF")) == 0):
            raise Unsupported(f"'{text(value)}' is not a predicated load (p ? a[i] : 0)")
        predicate, zero, value = value.cond, value.iffalse, value.iftrue
    params = {p.name: p for p in kernel.arrays}
    if not (isinstance(value, c_ast.ArrayRef) and isinstance(value.name, c_ast.ID) and value.name.name in params):
        raise Unsupported(f"'{text(value)}' is not a load of a global array")
    array = value.name.name
    if any(isinstance(n, c_ast.ArrayRef) for n in walk(value.subscript)) \
            or predicate is not None and not g.is_pure(predicate):
        raise Unsupported(f"the copy of {array}[{text(value.subscript)}] reads memory for its index or predicate")
    return Copy(tile, target, array, value.subscript, predicate, zero, decls, counter, guard)


def _base(ref: c_ast.Node) -> str | None:
    while isinstance(ref, c_ast.ArrayRef):
        ref = ref.name
    return ref.name if isinstance(ref, c_ast.ID) else None


def _check(staged: StagedLoop, body: c_ast.Compound, kernel: Kernel) -> None:
    loop = staged.loop
    changed = g.assigned_names(loop.stmt) | {n.name for n in walk(loop.stmt) if isinstance(n, c_ast.Decl)}
    if staged.var in changed:
        raise Unsupported(f"the loop changes '{staged.var}' in its body")
    positions = [p.name for p in staged.positions]
    if len(set(positions)) != len(positions) or any(n.name in positions for n in walk(loop.stmt)
                                                    if isinstance(n, c_ast.Decl) and n not in staged.positions):
        raise Unsupported("the loop declares one of its step's positions twice")
    for k, p in enumerate(staged.positions):
        moving = ids_in(p.init) & changed - set(positions[:k]) - {staged.var}
        if moving:
            raise Unsupported(f"'{p.name}' depends on '{sorted(moving)[0]}', which the loop changes")
    changed -= set(positions)
    written = _written_arrays(body)
    params = {p.name: p for p in kernel.arrays}
    stored = sorted(a for a in _written_arrays(loop.stmt) if a in params)
    loaded = {c.array for c in staged.copies}
    if stored and not all(params[a].is_restrict for a in loaded | set(stored)):
        raise Unsupported(f"the loop stores to {stored[0]}, which may alias what it loads, so the next step "
                          "cannot be read before this one's stores")
    for c in staged.copies:
        local = {d.name for d in c.decls} | ({c.counter.var} if c.counter else set())
        parts = [c.value, c.target] + [d.init for d in c.decls] + ([c.guard] if c.guard is not None else [])
        used = set().union(*(ids_in(p) for p in parts)) - local - {staged.var}
        if used & changed:
            raise Unsupported(f"the copy of {c.array}[{text(c.index)}] depends on "
                              f"'{sorted(used & changed)[0]}', which the loop changes")
        if c.array in written:
            raise Unsupported(f"the kernel writes {c.array}, so its next step cannot be read early")
    compute = c_ast.Compound(staged.compute)
    for n in walk(compute):
        if is_barrier(n) or isinstance(n, (c_ast.Return, c_ast.Goto, c_ast.Label)):
            raise Unsupported("the loop's computation has a barrier or a jump of its own")
    if _escapes(compute):
        raise Unsupported("the loop's computation breaks out of the loop or continues it")
    in_loop = {id(n) for n in walk(loop)}
    for n in walk(body):
        if isinstance(n, c_ast.ID) and n.name in staged.tiles and id(n) not in in_loop:
            raise Unsupported(f"'{n.name}' is used outside the staged loop")
    for n in walk(compute):
        if isinstance(n, c_ast.Assignment) and _base(n.lvalue) in staged.tiles \
                or isinstance(n, c_ast.UnaryOp) and n.op == "&" and _base(n.expr) in staged.tiles:
            raise Unsupported("the loop's computation writes a staged tile")


def _escapes(node: c_ast.Node, depth: int = 0) -> bool:
    for _, child in node.children():
        if isinstance(child, (c_ast.Break, c_ast.Continue)) and depth == 0:
            return True
        nested = isinstance(child, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch))
        if _escapes(child, depth + 1 if nested else depth):
            return True
    return False


def _written_arrays(body: c_ast.Node) -> set[str]:
    out = set()
    for n in walk(body):
        if isinstance(n, c_ast.Assignment):
            out.add(_base(n.lvalue))
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
            out.add(_base(n.expr))
        elif isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name.startswith("atomic"):
            arg = n.args.exprs[0]
            out.add(_base(arg.expr) if isinstance(arg, c_ast.UnaryOp) else _base(arg))
    return out


def element_type(decl: c_ast.Decl) -> str:
    t = decl.type
    while isinstance(t, c_ast.ArrayDecl):
        t = t.type
    return " ".join(t.type.names)


def copy_statement(c: Copy, assignment: c_ast.Node, mapping: dict[str, c_ast.Node],
                   decls: list[c_ast.Decl] | None = None) -> list[c_ast.Node]:
    """`assignment` (or statement) made where the copy `c` makes its store: inside its unrolled loop after
    its locals, or under its `if`; with the loop variable replaced as `mapping` says. Locals nothing uses
    are left out."""
    from gpgpu_opt.ast_util import substitute
    from gpgpu_opt.rewriting.per_output import without_unused_locals

    stmt = assignment
    if c.guard is not None:
        stmt = c_ast.If(copy.deepcopy(c.guard), stmt, None)
    if c.counter is None:
        out = [stmt] if not decls else [c_ast.Compound(copy.deepcopy(decls) + [stmt])]
    else:
        h = c.counter.header
        body = c_ast.Compound(copy.deepcopy(c.decls) + copy.deepcopy(decls or []) + [stmt])
        out = [c_ast.Pragma("unroll"), c_ast.For(copy.deepcopy(h.init), copy.deepcopy(h.cond),
                                                 copy.deepcopy(h.next), body)]
    out = without_unused_locals(out)
    for n in out:
        if isinstance(n, c_ast.For) and isinstance(n.stmt, c_ast.Compound) and len(n.stmt.block_items) == 1:
            n.stmt = n.stmt.block_items[0]
    return [_folded(substitute(n, mapping)) for n in out]


def _folded(node: c_ast.Node) -> c_ast.Node:
    """`0 * e` as 0, `0 + e` and `e + 0` as `e` (the first step's copies, where the loop starts at 0)."""
    from gpgpu_opt.ast_util import transform

    def fold(n):
        if isinstance(n, c_ast.BinaryOp) and n.op == "*" and any(
                isinstance(x, c_ast.Constant) and x.value == "0" for x in (n.left, n.right)):
            return c_ast.Constant("int", "0")
        if isinstance(n, c_ast.BinaryOp) and n.op == "+":
            for zero, other in ((n.left, n.right), (n.right, n.left)):
                if isinstance(zero, c_ast.Constant) and zero.value == "0":
                    return other
        return None

    return transform(node, fold)
