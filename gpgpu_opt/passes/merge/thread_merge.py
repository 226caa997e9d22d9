"""Thread merge (paper §3.5, Fig. 6-7): one thread computes N outputs in y (and/or x).

The N copies of a naive thread are N neighbouring threads of the naive launch, one block row apart:
copy r of a merge in y by N works for the global row `gy + r * blockDim.y` of a block covering
N * blockDim.y rows (in x likewise, which keeps a warp on consecutive outputs). Statements are looked
at one by one (paper §3.5):

- a statement whose value does not depend on the merged dimension (no threadIdx.y / blockIdx.y, no local
  that does) is kept ONCE: the reads that cause sharing (`B[idx]` of vv merged in y), control flow whose
  header is shared, the index variables themselves (`idy`: copy r uses `idy + r * blockDim.y`); what
  depends on what is dependence.py's analysis;
- every other statement (declarations, arithmetic, other memory accesses, stores) is replicated: a
  `#pragma unroll` loop over the copies, each statement in its own loop so that the copies' loads are
  all issued before their uses; a local of such a statement becomes an array, `A_val[r]`;
- a guard `if (idy < n && ...)` stays once where its clauses bound the index from above (copy 0, the
  smallest index, is then in range whenever any copy is) and each replicated statement inside gets its
  copy's clauses; a guard of another form is replicated whole with what it covers.

Why it is right: without barriers or shared memory, N naive threads may run in any interleaving; the
merged thread runs them in lockstep (each statement for every copy, in the copies' own order), and a
statement kept once computes what every copy would at that point. Stores are replicated and must hit
distinct elements for distinct copies (each store's subscript must vary with every merged dimension);
kernels with barriers, shared memory, atomics, jumps or a dependence on the block shape are left alone.

When (paper §3.6, G2R sharing prefers thread merge): a read that varies across a warp (x) is shared by
the outputs in y; with no `--merge`, the merge is in y. N is the smallest power of two that keeps enough
bytes of the per-copy streamed reads in flight per SM to cover the memory's bandwidth x latency product
(Little's law, targets.py), within the registers and the blocks per SM. An unguarded kernel must keep its
blocks tiling the naive ones (its launch covers exactly whole naive blocks); a guarded one gets blocks a
warp wide.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BID, TID, NotAffine
from gpgpu_opt.ast_util import ids_in, transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import NotAccumulation
from gpgpu_opt.passes.merge.dependence import G, Dependence, base_name, builtin_axis, global_value, is_update
from gpgpu_opt.rewriting.cbuild import Unsupported, conj, is_placeholder, parse_expr, parse_statements, text
from gpgpu_opt.templating import render

#: The largest number of outputs per thread the model picks (the paper's Fig. 7 merges 16 rows).
MAX_FACTOR = 16
#: Under load a memory request waits about as long again as its idle latency (queues in front of DRAM).
LOADED_LATENCY = 2
#: Registers a thread needs besides its copies, and per value a copy keeps live (its address and value).
BASE_REGISTERS = 16
REGISTERS_PER_VALUE = 2

_AXES = ("y", "x")                  # the order of a per-copy array's subscripts: [ry][rx]


class NotMergeable(NotAccumulation):
    """Nothing for a thread merge to share and no `--merge` asking for one (no note: most kernels)."""


@dataclass
class ThreadMerge:
    factors: tuple[int, int]            # outputs per thread in (x, y)
    block: tuple[int, int]              # the new block
    why: str
    shared: list[str] = field(default_factory=list)   # the reads kept once, as written
    deps: "Dependence | None" = field(default=None, repr=False)
    covers: tuple[int, int] | None = None   # outputs per block before the merge (a kernel already given a launch)

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        base = self.covers or self.block
        return base[0] * self.factors[0], base[1] * self.factors[1]

    @property
    def axes(self) -> list[str]:
        return [a for a in _AXES if self.factor(a) > 1]

    def factor(self, axis: str) -> int:
        return self.factors[0 if axis == "x" else 1]

    def extent(self, axis: str) -> int:
        return self.block[0 if axis == "x" else 1]


# -- the plan -------------------------------------------------------------------------------------------
def plan_thread_merge(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> ThreadMerge:
    """The thread merge for this kernel, or Unsupported saying why not. Does not change the kernel."""
    used = {builtin_axis(n, "xy") for n in walk(kernel.body)} - {None}
    request = ctx.options.merge_request
    if request is None:
        both = Dependence(info, {"x", "y"} & used)
        shared = _shared_reads(info, both, lambda d: d == {"x"})
        if "y" not in used or not shared:
            raise NotMergeable("no read that varies across a warp is shared by the outputs in y")
        axes = {"y"}
    else:
        axes = {a for a, n in (("x", request.x), ("y", request.y)) if n > 1}
        if not axes:
            raise NotMergeable("--merge asks for one output per thread")
        if axes - used:
            raise Unsupported(f"--merge {request}: the kernel's thread space has no "
                              f"{' or '.join(sorted(axes - used))} dimension")
    info.check_kernel()
    _check_index_uses(info, axes)
    deps = Dependence(info, axes)
    _check_locals(info, deps)
    _check_stores(info, deps, axes)
    shared = _shared_reads(info, deps, lambda d: not d)
    if request is not None:
        factors = (request.x, request.y)
        block, problem = _block(info, ctx, factors)
        if problem:
            raise Unsupported(f"--merge {request}: {problem}")
        why = f"asked for with --merge {request}"
    else:
        factors, block, why = _model(info, ctx, deps)
    return ThreadMerge(factors, block, why, shared, deps)


def _check_index_uses(info: KernelInfo, axes: set[str]) -> None:
    """Every use of a merged dimension's builtins is that dimension's global index itself (what the rewrite
    recomputes per copy)."""
    env = info.flat_env()
    for n in walk(info.body):
        if builtin_axis(n, axes):
            top = info.index_expression(n)
            try:
                value = global_value(top, env)
            except NotAffine:
                value = None
            if value != G[n.field.name]:
                raise Unsupported(f"'{text(top)}' is not the global {n.field.name} index itself")


def _shared_reads(info: KernelInfo, deps: Dependence, keep) -> list[str]:
    return read_names(info, [a for a in info.accesses if a.mode == "read" and keep(deps.of_read(a.node))])


def read_names(info: KernelInfo, reads: list) -> list[str]:
    """The reads as written, for a comment; an array the kernel also reads through a vector pointer (a
    widened kernel's fast path) by its name, as its scalar path's subscript is only one of its forms."""
    vector_read = {n.name for cast in walk(info.body) if isinstance(cast, c_ast.Cast)
                   and isinstance(cast.to_type.type, c_ast.PtrDecl)
                   for n in [cast.expr, *walk(cast.expr)] if isinstance(n, c_ast.ID)}
    return sorted({a.array if a.array in vector_read else f"{a.array}[{a.index_text}]" for a in reads})


def _check_locals(info: KernelInfo, deps: Dependence, shared_arrays: bool = False) -> None:
    """Each per-copy local can become an array (`shared_arrays`: a __shared__ array gets a copy per output)."""
    for n in walk(info.body):
        if isinstance(n, c_ast.Decl) and n.name in deps.per_copy and deps.per_copy[n.name]:
            if info.decl_counts[n.name] != 1:
                raise Unsupported(f"'{n.name}' is declared more than once (a copy per output needs one name)")
            if not isinstance(n.type, c_ast.TypeDecl) and not (shared_arrays and "__shared__" in n.storage
                                                                and n.init is None):
                raise Unsupported(f"the local array '{n.name}' would need a copy per output")


def _check_stores(info: KernelInfo, deps: Dependence, axes: set[str]) -> None:
    """Every store's subscript moves with every merged dimension, so the copies store to distinct elements."""
    env = info.flat_env()
    for a in info.accesses:
        if a.mode != "write":
            continue
        where = f"{a.array}[{a.index_text}]"
        try:
            value = global_value(a.node.subscript, {**env, **a.extra.get("env", {})})
        except NotAffine:
            raise Unsupported(f"the store to {where} cannot be analysed, so the copies' stores are not "
                              "proved distinct") from None
        for axis in sorted(axes):
            step = sympy.diff(value, G[axis])
            if step == 0 or step.free_symbols & (set(G.values()) | set(TID.values()) | set(BID.values())) \
                    or any(s.name.startswith("?") for s in step.free_symbols):
                raise Unsupported(f"the store to {where} does not move with the global {axis} index, so "
                                  "the copies would store to the same element")


def _block(info: KernelInfo, ctx: PassContext, factors: tuple[int, int]) -> tuple[tuple[int, int], str | None]:
    """The new block: a warp wide where the merged blocks may cover more than a naive block (a guard bounds
    every access, or the program states a thread space they tile), else the naive block cut by the factors
    (the launch must stay made of whole naive blocks)."""
    naive, warp = ctx.facts.naive_block, ctx.options.target.warp_size
    wide = (max(naive[0], warp), max(1, naive[0] * naive[1] // max(naive[0], warp)))
    block, tiled = [], []
    for dim in (0, 1):
        stated = ctx.facts.global_space[dim]
        if stated is not None and stated % (wide[dim] * factors[dim]) == 0:
            block.append(wide[dim])
            tiled.append(wide[dim] * factors[dim])       # whole merged blocks: nothing to stop
            continue
        free = info.coverage_problem(naive, tuple(n * 2 if d == dim else n for d, n in enumerate(naive))) is None
        if not free and naive[dim] % factors[dim]:
            return (0, 0), (f"{factors[dim]} outputs per thread do not divide the naive block's "
                            f"{naive[dim]} threads in {'xy'[dim]} (the kernel has no guard to stop the rest)")
        block.append(max(1, wide[dim] if free else naive[dim] // factors[dim]))
        tiled.append(naive[dim])
    if block[0] * block[1] < warp:
        return (0, 0), f"blocks of {block[0]}x{block[1]} would not fill a warp"
    problem = info.coverage_problem((tiled[0], tiled[1]), (block[0] * factors[0], block[1] * factors[1]))
    return (block[0], block[1]), problem


def _model(info: KernelInfo, ctx: PassContext, deps: Dependence) -> tuple[tuple[int, int], tuple[int, int], str]:
    """The smallest power of two N (outputs per thread in y) that keeps the memory busy (module docstring)."""
    t = ctx.options.target
    need = LOADED_LATENCY * t.memory_bandwidth_gbs / t.sm_count * t.memory_latency_cycles / t.clock_ghz
    streamed = [a for a in info.accesses if a.mode == "read" and {"y"} <= deps.deps(a.node)
                and _varies_across_warp(info, a)]
    per_copy = sum(a.element_bytes for a in streamed) or 4
    values = 1 + sum(1 for n in walk(info.body) if isinstance(n, c_ast.Decl) and deps.per_copy.get(n.name))
    best = None
    n = 1
    while n <= MAX_FACTOR:
        block, problem = _block(info, ctx, (1, n))
        if problem:
            break
        if n > 1 and block[0] < t.warp_size and streamed:
            raise Unsupported(f"the merged blocks must stay {block[0]} wide (the kernel has no guard and states no "
                              "thread space that wider ones tile), so each warp's reads stay split over rows; "
                              "more outputs per thread do not make up for that (vv on an H100: 4% slower)")
        registers = BASE_REGISTERS + n * values * REGISTERS_PER_VALUE
        if registers > t.max_registers_per_thread:
            break
        threads = block[0] * block[1]
        resident = min(t.max_threads_per_sm, t.max_blocks_per_sm * threads,
                       t.registers_per_sm // (registers * threads) * threads)
        in_flight = resident * n * per_copy
        best = (n, block, resident, in_flight)
        if in_flight >= need:
            break
        n *= 2
    if best is None or best[0] == 1:
        raise Unsupported("one output per thread already keeps the memory busy, or no larger factor fits "
                          f"the naive {ctx.facts.naive_block[0]}x{ctx.facts.naive_block[1]} block")
    n, block, resident, in_flight = best
    names = ", ".join(f"{a.array}[{a.index_text}]" for a in streamed) or "the per-copy reads"
    why = (f"{resident} resident threads per SM x {n} x {per_copy} B of {names} keep {in_flight} B in flight "
           f"per SM{'' if in_flight >= need else ' (the most that fits)'}; the memory needs {need:.0f} B "
           f"({t.memory_bandwidth_gbs:g} GB/s over {t.sm_count} SMs at {LOADED_LATENCY}x the "
           f"{t.memory_latency_cycles}-cycle latency)")
    return (1, n), block, why


def _varies_across_warp(info: KernelInfo, access) -> bool:
    return access.index is not None and TID["x"] in access.index.free_symbols


# -- the rewrite ------------------------------------------------------------------------------------------
def apply_thread_merge(kernel: Kernel, info: KernelInfo, plan: ThreadMerge) -> None:
    """Rewrite `kernel` (the one planned) in place."""
    rewriter = _Rewriter(info, plan)
    items = rewriter.statements(g.items(kernel.body), [])
    kernel.body.block_items = [Comment(describe_code(plan))] + items
    if kernel.launch is None:
        kernel.launch = LaunchConfig(block=plan.block, outputs_per_block=plan.outputs_per_block)
    else:
        kernel.launch = dataclasses.replace(kernel.launch, outputs_per_block=plan.outputs_per_block)


class _Rewriter:
    def __init__(self, info: KernelInfo, plan: ThreadMerge):
        self.info, self.plan, self.deps = info, plan, plan.deps
        axes = plan.axes
        self.var = {a: info.fresh("r" if len(axes) == 1 else f"r{a}") for a in axes}
        self.lifted: set[str] = set()       # per-copy locals declared where statements are kept once: arrays

    def statements(self, stmts: list[c_ast.Node], guard: list[c_ast.Node]) -> list[c_ast.Node]:
        out: list[c_ast.Node] = []
        for s in stmts:
            out.extend(self.statement(s, guard))
        return out

    def statement(self, s: c_ast.Node, guard: list[c_ast.Node]) -> list[c_ast.Node]:
        deps = self.deps
        if isinstance(s, c_ast.Decl) and s.name in deps.index:
            return [self.copy(s, {})]
        if isinstance(s, c_ast.Compound):
            return [c_ast.Compound(self.statements(g.items(s), guard))]
        if isinstance(s, c_ast.If) and not deps.deps(s.cond):
            return [c_ast.If(self.copy(s.cond, {}), c_ast.Compound(self.statements(g.items(s.iftrue), guard)),
                             c_ast.Compound(self.statements(g.items(s.iffalse), guard)) if s.iffalse else None)]
        if isinstance(s, c_ast.If) and s.iffalse is None and self._shares(s.iftrue):
            upper = [c for c in g.clauses(s.cond) if deps.deps(c)]
            if all(self._bounds_from_above(c) for c in upper):
                # Copy 0 has the smallest index: it is in range whenever any copy is.
                once = [self.copy(c, {}) for c in g.clauses(s.cond)]
                return [c_ast.If(conj(once), c_ast.Compound(self.statements(g.items(s.iftrue), guard + upper)), None)]
        if isinstance(s, (c_ast.For, c_ast.While, c_ast.DoWhile)) and not self._header_deps(s):
            loop = copy.copy(s)
            for part in ("init", "cond", "next"):
                if getattr(loop, part, None) is not None:
                    setattr(loop, part, self.copy(getattr(loop, part), {}))
            loop.stmt = c_ast.Compound(self.statements(g.items(s.stmt), guard))
            return [loop]
        axes = self._axes_of(s)
        if not axes:
            return [self.copy(s, {})]
        if is_update(s, self.info):
            # Every copy's old value is loaded before any copy stores: the loads are all in flight at once.
            old = self.info.fresh(f"{base_name(s.lvalue)}_val")
            self.deps.per_copy[old] = set(axes)
            elem = self.info.params[base_name(s.lvalue)].base_type
            load = parse_statements(f"{elem} {old};")[0]
            load.init = copy.deepcopy(s.lvalue)
            store = c_ast.Assignment("=", s.lvalue, c_ast.BinaryOp(s.op[:-1], c_ast.ID(old), s.rvalue))
            return self.replicate(load, axes, guard) + self.replicate(store, axes, guard)
        return self.replicate(s, axes, guard)

    def _axes_of(self, s: c_ast.Node) -> set[str]:
        axes = self.deps.deps(s)
        if isinstance(s, c_ast.Decl):
            axes |= self.deps.per_copy.get(s.name, set())
        for n in walk(s):
            target = n.lvalue if isinstance(n, c_ast.Assignment) else \
                n.expr if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") else None
            base = base_name(target) if target is not None else None
            if base in self.info.params:
                return set(self.plan.axes)        # a store: one per copy (the plan proved them distinct)
            if base is not None:
                axes |= self.deps.per_copy.get(base, set())
        return axes

    def _header_deps(self, loop: c_ast.Node) -> set[str]:
        parts = [loop.init, loop.cond, loop.next] if isinstance(loop, c_ast.For) else [loop.cond]
        return set().union(*(self.deps.deps(p) for p in parts if p is not None))

    def _shares(self, stmt: c_ast.Node) -> bool:
        """Is anything under `stmt` shared by some of the copies (a read to share)?"""
        return any(isinstance(s, (c_ast.Decl, c_ast.Assignment)) and self._axes_of(s) < set(self.plan.axes)
                   for s in walk(stmt))

    def _bounds_from_above(self, clause: c_ast.Node) -> bool:
        """`e < b`, `e <= b` (or `b > e`, `b >= e`) with e growing with every merged index and b shared."""
        if not (isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=", ">", ">=")):
            return False
        low, high = (clause.left, clause.right) if clause.op in ("<", "<=") else (clause.right, clause.left)
        if self.deps.deps(high) or not g.is_pure(clause):
            return False
        if ids_in(low) & set(self.deps.per_copy):
            return False
        try:
            value = global_value(low, self.info.flat_env())
        except NotAffine:
            return False
        steps = [sympy.diff(value, G[a]) for a in self.plan.axes]
        return all(s.is_number and s >= 0 for s in steps) and any(s > 0 for s in steps)

    # -- copies ---------------------------------------------------------------------------------------
    def replicate(self, s: c_ast.Node, axes: set[str], guard: list[c_ast.Node]) -> list[c_ast.Node]:
        out: list[c_ast.Node] = []
        copies = {a: c_ast.ID(self.var[a]) for a in axes}
        if isinstance(s, c_ast.Decl):
            self.lifted.add(s.name)
            array = copy.deepcopy(s)
            array.init = None
            array.quals = [q for q in array.quals if q != "const"]
            if isinstance(array.type, c_ast.TypeDecl):
                array.type.quals = [q for q in array.type.quals if q != "const"]
            inner = array.type
            for a in reversed([a for a in _AXES if a in self.deps.per_copy[s.name]]):
                inner = c_ast.ArrayDecl(inner, c_ast.Constant("int", str(self.plan.factor(a))), [])
            array.type = inner
            out.append(array)
            if s.init is None:
                return out
            body = c_ast.Assignment("=", self.copy(c_ast.ID(s.name), copies), self.copy(s.init, copies))
        else:
            body = self.copy(s, copies)
        mine = [self.copy(c, copies) for c in guard if self.deps.deps(c) & axes]
        if mine:
            body = c_ast.If(conj(mine), body, None)
        for a in reversed([a for a in _AXES if a in axes]):
            (pragma, loop) = parse_statements(render("merge_thread_copies.cu.j2", var=self.var[a],
                                                     count=self.plan.factor(a)))
            assert is_placeholder(loop.stmt, "__merge_copy__")
            loop.stmt = body
            body = c_ast.Compound([pragma, loop])
        out.extend(g.items(body))
        return out

    def copy(self, node: c_ast.Node, copies: dict[str, c_ast.Node]) -> c_ast.Node:
        """`node` for the copies `copies` (loop variables per axis; none: copy 0, the shared base)."""
        node = copy.deepcopy(node)
        parents = g.parents_of(node)
        tops = {}
        for n in walk(node):
            if builtin_axis(n, self.plan.axes):
                top = n
                while isinstance(parents.get(id(top)), (c_ast.BinaryOp, c_ast.UnaryOp, c_ast.Cast)) \
                        and getattr(parents[id(top)], "op", "+") in ("+", "-", "*", "/", "%", "<<", ">>"):
                    top = parents[id(top)]
                tops[id(top)] = (top, n.field.name)
        plan = self.plan

        def rewrite(n: c_ast.Node):
            if id(n) in tops:
                axis = tops[id(n)][1]
                base = f"blockIdx.{axis} * {plan.extent(axis) * plan.factor(axis)} + threadIdx.{axis}"
                return parse_expr(base + self._offset(axis, 1, copies))
            if isinstance(n, c_ast.ID) and n.name in self.lifted:
                ref: c_ast.Node = c_ast.ID(n.name)
                for a in _AXES:
                    if a in self.deps.per_copy[n.name]:
                        ref = c_ast.ArrayRef(ref, copy.deepcopy(copies[a]))
                return ref
            if isinstance(n, c_ast.ID) and n.name in self.deps.index and copies:
                offset = "".join(self._offset(a, c, copies) for a, c in self.deps.index[n.name].items())
                return parse_expr(f"({n.name}{offset})") if offset else None
            return None

        if id(node) in tops:
            return rewrite(node)
        return transform(node, rewrite, skip_member_names=True)

    def _offset(self, axis: str, coefficient: int, copies: dict[str, c_ast.Node]) -> str:
        if axis not in copies:
            return ""
        step = coefficient * self.plan.extent(axis)
        return f" + {step} * {text(copies[axis])}" if step != 1 else f" + {text(copies[axis])}"


def describe_code(plan: ThreadMerge) -> str:
    shape = " and ".join(f"{plan.factor(a)} outputs in {a}, {plan.extent(a)} apart" for a in plan.axes)
    shared = f"; {', '.join(plan.shared)} read once for all of them" if plan.shared else ""
    return f"merge: each thread computes {shape}{shared}"


def describe(plan: ThreadMerge) -> str:
    shape = " x ".join(f"{plan.factor(a)} outputs in {a}" for a in plan.axes)
    shared = f"{', '.join(plan.shared)} read once for the copies" if plan.shared else "nothing shared"
    return f"thread merge, {shape} per thread ({shared}): {plan.why}"


def describe_launch(plan: ThreadMerge) -> str:
    per = plan.outputs_per_block
    return f"blocks of {plan.block[0]}x{plan.block[1]} threads, each covering {per[0]}x{per[1]} outputs"
