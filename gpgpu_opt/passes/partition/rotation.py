"""Rotated loop start for 1-D grids (paper §3.8, Fig. 9): every block walks the loop from its own step.

In mv every block reads the same columns of its rows of A at the same time; rows a partition-multiple
apart then all start in one DRAM partition. With

    const int c0_steps = (cols + 15) / 16;
    for (int c0_step = 0; c0_step < c0_steps; c0_step++) {
        const int c0 = (c0_step + blockIdx.x) % c0_steps * 16;
        ...

block b takes the steps b, b+1, ..., wrapping around: the same iterations in another order (exact at any
trip count, as the modulo is over the number of steps, not over the bound). The steps' trip is computed
once, before the loop, from bounds the loop does not change. `(c0_step + blockIdx.x)` stays below 2^32.

That is only the loop's meaning when its iterations do not depend on each other, which is checked:
- every variable the body assigns is declared in it, or is an accumulator (`acc += e`, `acc -= e`,
  `acc = acc + e`) that nothing else in the loop reads: the terms are then added in another order (exact
  for integers; a float sum rounds differently, which the report says);
- a shared array the body writes is used only in the loop, every write of it comes before a barrier of the
  loop body that comes before every read, and which elements it writes (subscripts, conditions) does not
  depend on the iteration: each iteration then reads only what it wrote itself, or what the loop never
  writes;
- no global store, no call that is not pure (barriers aside), no break out of the loop, no return.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.calls import pure_calls
from gpgpu_opt.analysis.loops import Loop, assigned_names
from gpgpu_opt.analysis.symbolic import iterator_symbol
from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import added_term
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, is_placeholder, parse_statements, text
from gpgpu_opt.templating import render

_BARRIER = "__syncthreads"


@dataclass
class Rotation:
    loop: c_ast.For
    var: str
    type: str
    start: c_ast.Node
    end: c_ast.Node                 # exclusive when `inclusive` is False
    inclusive: bool
    step: int
    accumulators: list[str] = field(default_factory=list)
    steps: str = ""
    counter: str = ""


def loop_to_rotate(access: Access) -> Loop | None:
    """The outermost loop around the access whose iterator moves the access's address."""
    symbols = access.evaluable_index.free_symbols if access.evaluable_index is not None else set()
    return next((l for l in access.loops if iterator_symbol(l.var) in symbols), None)


def plan_rotation(kernel: Kernel, ctx: PassContext, loop: Loop, info: KernelInfo) -> Rotation:
    node = loop.node
    var, start, declared = g.loop_var(node)
    if not declared:
        raise Unsupported(f"'{var}' is declared before the loop (its last value may be used after it)")
    decl = node.init.decls[0]
    type_name = _scalar_type(decl)
    if type_name != "int":
        raise Unsupported(f"the loop's iterator '{var}' is not an int")
    cond = node.cond
    if loop.multiplicative or loop.step <= 0 or not (isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=")
                                                     and isinstance(cond.left, c_ast.ID) and cond.left.name == var):
        raise Unsupported(f"the loop is not of the form 'for (int {var} = start; {var} < end; {var} += step)'")
    bounds = ids_in(start) | ids_in(cond.right)
    changed = assigned_names(node.stmt) & (bounds | {var})
    if changed:
        raise Unsupported(f"the loop body changes {', '.join(sorted(changed))}, which its bounds use")
    if not (g.is_pure(start, calls=info.pure_calls) and g.is_pure(cond.right, calls=info.pure_calls)):
        raise Unsupported("the loop's bounds read memory or have side effects")
    trip = loop.trip_count()
    if trip is not None and trip.is_number and int(trip) < 2:
        raise Unsupported(f"the '{var}' loop has {trip} iteration: there is nothing to rotate")
    accumulators = _check_independent(node, var, info, ctx)
    return Rotation(node, var, type_name, start, cond.right, cond.op == "<=", loop.step, accumulators,
                    info.fresh(f"{var}_steps"), info.fresh(f"{var}_step"))


def _scalar_type(decl: c_ast.Decl) -> str | None:
    t = decl.type
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return " ".join(t.type.names)
    return None


def _check_independent(loop: c_ast.For, var: str, info: KernelInfo, ctx: PassContext) -> list[str]:
    """The accumulators of the loop when its iterations may run in any order, else Unsupported."""
    body = loop.stmt
    local = {n.name for n in walk(body) if isinstance(n, c_ast.Decl) and n.name}
    shared = {n.name for n in walk(info.body) if isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or [])}
    allowed_calls = pure_calls(ctx.facts.device_functions) | {_BARRIER}
    accumulators: dict[str, int] = {}
    shared_writes: list[c_ast.Node] = []
    for n in walk(body):
        if isinstance(n, (c_ast.Return, c_ast.Goto, c_ast.Label)):
            raise Unsupported("the loop body returns or jumps")
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name not in allowed_calls:
            raise Unsupported(f"the loop calls {n.name.name}, which may depend on the order of the iterations")
        target = n.lvalue if isinstance(n, c_ast.Assignment) else \
            n.expr if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") else None
        if target is None:
            continue
        if isinstance(target, c_ast.ID):
            if target.name in local:
                continue
            if isinstance(n, c_ast.Assignment) and added_term(n) is not None:
                accumulators[target.name] = accumulators.get(target.name, 0) + (1 if n.op in ("+=", "-=") else 2)
                continue
            raise Unsupported(f"the loop assigns '{target.name}', declared outside it, other than by adding to it")
        array = target
        while isinstance(array, c_ast.ArrayRef):
            array = array.name
        if isinstance(array, c_ast.ID) and array.name in shared:
            shared_writes.append(n)
            continue
        raise Unsupported(f"the loop stores to {text(target)}, so its iterations may depend on each other")
    _check_breaks(body)
    for name, uses in accumulators.items():
        if sum(1 for n in walk(body) if isinstance(n, c_ast.ID) and n.name == name) != uses:
            raise Unsupported(f"the loop reads the accumulator '{name}' other than to add to it")
        if info.decl_counts.get(name, 0) > 1:
            raise Unsupported(f"'{name}' is declared more than once")
    _check_shared(loop, var, info, shared_writes, local)
    return sorted(accumulators)


def _check_breaks(body: c_ast.Node) -> None:
    """A `break` may leave a loop or switch nested in the body, not the rotated loop."""
    def visit(n: c_ast.Node, nested: bool):
        if isinstance(n, c_ast.Break) and not nested:
            raise Unsupported("the loop body breaks out of the loop")
        inner = nested or isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch))
        for _, child in n.children():
            visit(child, inner)
    visit(body, False)


def _varying(loop: c_ast.For, var: str, local: set[str]) -> set[str]:
    """The names whose value may differ from one iteration of the loop to the next: the iterator, and the
    locals of the body (inner loop iterators included) defined from those."""
    defs: dict[str, set[str]] = {name: set() for name in local}
    for n in walk(loop.stmt):
        if isinstance(n, c_ast.Decl) and n.name in defs and n.init is not None:
            defs[n.name] |= ids_in(n.init)
        elif isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name in defs:
            defs[n.lvalue.name] |= ids_in(n.rvalue) | ({n.lvalue.name} if n.op != "=" else set())
        elif isinstance(n, c_ast.For):
            inner, _, _ = g.loop_var(n)
            if inner in defs and n.cond is not None:
                defs[inner] |= ids_in(n.cond)
    varying = {var}
    grew = True
    while grew:
        grew = False
        for name, uses in defs.items():
            if name not in varying and uses & varying:
                varying.add(name)
                grew = True
    return varying


def _check_shared(loop: c_ast.For, var: str, info: KernelInfo, writes: list[c_ast.Node], local: set[str]) -> None:
    if not writes:
        return
    body = loop.stmt
    items = g.items(body)
    varying = _varying(loop, var, local)
    parents = g.parents_of(body)

    def top_index(node: c_ast.Node) -> int:
        while parents.get(id(node)) is not None and parents[id(node)] is not body:
            node = parents[id(node)]
        return next(k for k, s in enumerate(items) if s is node)

    barriers = [k for k, s in enumerate(items) if isinstance(s, c_ast.FuncCall) and isinstance(s.name, c_ast.ID)
                and s.name.name == _BARRIER]
    for tile in sorted({_array_name(w) for w in writes}):
        if not g.used_only_within(info.body, loop, tile):
            raise Unsupported(f"the shared array '{tile}' is used outside the loop")
        tile_writes = [w for w in writes if _array_name(w) == tile]
        for w in tile_writes:
            moved = _where_written(w, body, parents) & varying
            if moved:
                raise Unsupported(f"which elements of '{tile}' an iteration writes depends on "
                                  f"{', '.join(sorted(moved))}")
        write_ids = {id(n) for w in tile_writes for n in walk(w.lvalue if isinstance(w, c_ast.Assignment) else w.expr)}
        reads = [n for n in walk(body) if isinstance(n, c_ast.ID) and n.name == tile and id(n) not in write_ids]
        last_write = max(top_index(w) for w in tile_writes)
        first_read = min((top_index(r) for r in reads), default=len(items))
        if reads and not any(last_write < b < first_read for b in barriers):
            raise Unsupported(f"the loop reads '{tile}' without a barrier after every write of it")


def _array_name(write: c_ast.Node) -> str:
    target = write.lvalue if isinstance(write, c_ast.Assignment) else write.expr
    while isinstance(target, c_ast.ArrayRef):
        target = target.name
    return target.name


def _where_written(write: c_ast.Node, body: c_ast.Node, parents: dict) -> set[str]:
    """The names that decide which element a write stores to: its subscripts, and the conditions and loop
    headers around it in the loop body."""
    target = write.lvalue if isinstance(write, c_ast.Assignment) else write.expr
    names: set[str] = set()
    while isinstance(target, c_ast.ArrayRef):
        names |= ids_in(target.subscript)
        target = target.name
    node = write
    while node is not body:
        parent = parents[id(node)]
        if isinstance(parent, c_ast.If):
            names |= ids_in(parent.cond)
        elif isinstance(parent, c_ast.For):
            names |= set().union(*(ids_in(p) for p in (parent.init, parent.cond, parent.next) if p is not None))
        elif isinstance(parent, c_ast.TernaryOp) and node is not parent.cond \
                or isinstance(parent, (c_ast.While, c_ast.DoWhile, c_ast.Switch)):
            names.add("(a conditional around the write)")
        node = parent
    return names


def apply_rotation(kernel: Kernel, info: KernelInfo, rotation: Rotation) -> None:
    """Replace the loop (in place) by its rotated form."""
    loop = rotation.loop
    statements = parse_statements(render("partition_rotation.cu.j2", steps=rotation.steps, trip=_trip(rotation),
                                         counter=rotation.counter, type=rotation.type, var=rotation.var,
                                         value=_value(rotation)))
    new_loop = statements[-1]
    new_body = new_loop.stmt
    new_body.block_items = [s for item in new_body.block_items
                            for s in (g.items(loop.stmt) if is_placeholder(item, "__partition_body__") else [item])]
    comment = Comment(f"partition: block b starts the '{rotation.var}' loop at step b (wrapping around), so that "
                      "the blocks running at once read different DRAM partitions")
    replacement = [comment, *statements]
    parent = info.parents[id(loop)]
    if isinstance(parent, c_ast.Compound):
        parent.block_items = [s for item in parent.block_items for s in (replacement if item is loop else [item])]
        return
    wrapped = c_ast.Compound(replacement)
    for attr in ("iftrue", "iffalse", "stmt"):
        if getattr(parent, attr, None) is loop:
            setattr(parent, attr, wrapped)
            return
    raise Unsupported("internal: the loop is not where the kernel's tree says")


def _trip(r: Rotation) -> str:
    """The number of steps, in the iterator's type: a start of `threadIdx.x` is unsigned, and `cols -
    threadIdx.x` would wrap around to billions of steps for a thread past the bound (the loop runs none)."""
    end = f"{_operand(r.end)} + 1" if r.inclusive else text(r.end)
    start = _operand(r.start) if isinstance(r.start, c_ast.Constant) else f"({r.type}) {_operand(r.start)}"
    span = end if _is_zero(r.start) else f"{end} - {start}"
    return span if r.step == 1 else f"({span} + {r.step - 1}) / {r.step}"


def _value(r: Rotation) -> str:
    value = f"({r.counter} + blockIdx.x) % {r.steps}"
    if r.step != 1:
        value += f" * {r.step}"
    return value if _is_zero(r.start) else f"{_operand(r.start)} + {value}"


def _operand(node: c_ast.Node) -> str:
    return text(node) if isinstance(node, (c_ast.ID, c_ast.Constant, c_ast.StructRef)) else f"({text(node)})"


def _is_zero(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Constant) and node.value == "0"


def describe(rotation: Rotation) -> str:
    order = ("the iterations only fill shared tiles and local values, so their order does not matter"
             if not rotation.accumulators else
             f"{', '.join(rotation.accumulators)} adds the same terms in another order (exact for integers; a "
             "float sum rounds differently from the naive kernel's)")
    return (f"'{rotation.var}' loop rotated per block: block b takes its steps from b % {rotation.steps} on, "
            f"wrapping around, a permutation of the same iterations at any trip count; {order}")
