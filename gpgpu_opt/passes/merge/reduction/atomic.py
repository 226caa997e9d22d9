"""The atomic reduction: every thread adds its term into one place,

    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(result, a[i] * b[i]);

All the atomics of a launch serialize on one address. Here each thread adds its terms into a register, the
block adds its threads' sums by a warp-shuffle tree (a shared-memory tree where the target has no shuffles),
and one thread per block makes the one atomicAdd.

When the launch provably starts at least n threads (`(n + 255) / 256` blocks of 256 at every launch site:
`PassContext.launch_covers`) and the guard `i < n` bounds all the kernel does, the naive threads' work is
exactly the indices below n; then a grid of at most one wave of blocks walks them with a grid-stride loop,
several loads in flight per thread. Otherwise the naive grid is kept, a thread still adds its own terms, and
only the atomics are merged (one per block).

Safety: the only store of the kernel is the atomicAdd, to an address the same for every thread that nothing
else reads; the term is float or double; every use of the thread index is the global x index (so the block,
pinned to the naive one, does not change what a thread computes); no barriers, shuffles, shared memory or
jumps. The summation order changes (the float sum rounds differently), which the report says.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.reduction.common import (UNROLL, NotReduction, check_block, check_no_block_control,
                                                     is_call, is_global_x, is_power_of_two, unrolled)
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_statements, text
from gpgpu_opt.templating import render

_ZERO = {"float": "0.0f", "double": "0.0"}
_BUILTINS = {"threadIdx", "blockIdx", "blockDim"}


@dataclass
class AtomicPlan:
    atomic: c_ast.FuncCall
    target: c_ast.Node              # the address every thread adds to
    acc_type: str
    block: int
    shuffles: bool
    warp: int
    stride_bound: c_ast.Node | None  # `n` of `i < n`: a grid-stride loop over it (None: the naive grid)
    max_blocks: int

    def describe(self) -> str:
        tree = "a warp-shuffle tree" if self.shuffles else "a shared-memory tree"
        walk_ = (f"each thread sums its elements over a grid-stride loop (at most {self.max_blocks} blocks of "
                 f"{self.block}, one wave; the launch covers '{text(self.stride_bound)}' threads)"
                 if self.stride_bound is not None else
                 f"the naive grid kept (blocks of {self.block}), each thread's terms summed in a register")
        return (f"one atomicAdd to {text(self.target)} per block instead of one per term: {walk_}, then {tree} "
                "per block; the summation order changes (the sum rounds differently from the naive kernel's)")

    def describe_launch(self) -> str:
        if self.stride_bound is not None:
            return (f"blocks of {self.block} threads, at most {self.max_blocks} of them (one wave), each thread "
                    "walking the elements with a grid-stride loop")
        return f"the naive grid and blocks of {self.block} threads kept: the block tree is specialised to them"

    def apply(self, kernel: Kernel, info: KernelInfo) -> None:
        acc = info.fresh("sum")
        decl = parse_statements(f"{self.acc_type} {acc} = {_ZERO[self.acc_type]};")[0]
        names = {k: info.fresh(k) for k in ("offset", "warp_sum", "sums")}
        warps = self.block // self.warp
        tree = render("merge_reduce_atomic.cu.j2", acc=acc, type=self.acc_type, target=text(self.target),
                      shuffles=self.shuffles, warp=self.warp, warps=warps, block=self.block,
                      half=_next_power_of_two(warps) // 2, zero=_ZERO[self.acc_type], **names)

        def term(n):
            if n is self.atomic:
                return c_ast.Assignment("+=", c_ast.ID(acc), self.atomic.args.exprs[1])
            return None
        body = transform(kernel.body, term)
        if self.stride_bound is not None:
            items = [Comment(f"merge: the naive threads' elements walked by a grid-stride loop, {UNROLL} at a time "
                             "(their loads in flight together), summed in a register"), decl, *self._loops(body, info)]
            kernel.launch = LaunchConfig(block=(self.block, 1), outputs_per_block=(self.block, 1),
                                         max_blocks_x=self.max_blocks)
        else:
            items = [Comment("merge: each thread's terms summed in a register, not added atomically one by one"),
                     decl, *g.items(body)]
            kernel.launch = LaunchConfig(block=(self.block, 1), outputs_per_block=(self.block, 1))
        how = "warp shuffles, then one value per warp through shared memory" if self.shuffles else "shared memory"
        kernel.body.block_items = [*items, Comment(f"merge: the block's sums added by {how}; one atomicAdd per "
                                                   "block"), *parse_statements(tree)]

    def _loops(self, body: c_ast.Compound, info: KernelInfo) -> list[c_ast.Node]:
        """A grid-stride walk over the naive thread's work, `i` for its index: UNROLL elements per step while
        all are below n (no exit between their loads), then one at a time."""
        items = g.items(body)
        guard = items[-1]
        bound = next(c for c in g.clauses(guard.cond) if c.right is self.stride_bound)
        var = bound.left.name if isinstance(bound.left, c_ast.ID) else info.fresh("element")
        index = c_ast.ID(var)

        def to_index(n):
            if n is not bound.left and _is_index_top(n, info):
                return copy.deepcopy(index)
            return None
        kept = [s for s in items[:-1] if not (isinstance(s, c_ast.Decl) and s.name == var)]
        rest = [c for c in g.clauses(guard.cond) if c is not bound]
        inner = [*kept, *(g.items(guard.iftrue) if not rest else [g.guarded(g.items(guard.iftrue), rest)])]
        inner = [transform(s, to_index) for s in inner]
        first, stride, k, n = info.fresh("first"), info.fresh("stride"), info.fresh("k"), text(self.stride_bound)
        loops = parse_statements(
            f"int {first} = blockIdx.x * blockDim.x + threadIdx.x;"
            f"const int {stride} = gridDim.x * blockDim.x;"
            f"for (; {first} < {n} - {UNROLL - 1} * {stride}; {first} += {UNROLL} * {stride})"
            f"    for (int {k} = 0; {k} < {UNROLL}; {k}++) {{ const int {var} = {first} + {k} * {stride}; }}"
            f"for (int {var} = {first}; {var} < {n}; {var} += {stride}) ;")
        main, rest_loop = loops[2], loops[3]
        main.stmt.stmt.block_items.extend(copy.deepcopy(inner))
        main.stmt = c_ast.Compound(unrolled(main.stmt))
        rest_loop.stmt = inner[0] if len(inner) == 1 and not isinstance(inner[0], c_ast.Decl) else c_ast.Compound(inner)
        return loops


def plan_atomic(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> AtomicPlan:
    body = kernel.body
    atomics = [n for n in walk(body) if is_call(n, "atomic")]
    if not atomics:
        raise NotReduction("no atomics")
    if any(isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or []) for n in walk(body)):
        raise NotReduction("the kernel already reduces through shared memory")
    if len(atomics) != 1 or atomics[0].name.name != "atomicAdd" or len(atomics[0].args.exprs) != 2:
        raise NotReduction("not one atomicAdd")
    atomic = atomics[0]
    target, array = _target(atomic.args.exprs[0], info)
    if not _is_statement(atomic, info):
        raise Unsupported("the value atomicAdd returns is used")
    param = info.params[array]
    if param.base_type not in _ZERO:
        raise Unsupported(f"the atomicAdd adds {param.base_type}, not float or double")
    uses = sum(1 for n in walk(body) if isinstance(n, c_ast.ID) and n.name == array)
    if uses != 1 or info.written:
        raise Unsupported(f"the kernel stores other than by the atomicAdd to {array}, or reads {array}")
    if g.has_jumps(body):
        raise Unsupported("the kernel returns, breaks or jumps from inside its statements")
    check_no_block_control(g.items(body), "the kernel")
    _check_index_uses(info)
    block = check_block(ctx, "the block tree")
    target_ = ctx.options.target
    shuffles = target_.has_warp_shuffle and block % target_.warp_size == 0
    if not shuffles and not (is_power_of_two(block) and block * 8 <= target_.shared_per_block):
        raise Unsupported(f"a block of {block} threads is neither whole warps (for shuffles on this target) nor "
                          "a power of two (for a shared-memory tree)")
    per_sm = min(target_.max_threads_per_sm // block, target_.max_blocks_per_sm)
    return AtomicPlan(atomic, target, param.base_type, block, shuffles, target_.warp_size,
                      _stride_bound(body, atomic, ctx, info), target_.sm_count * per_sm)


def _target(address: c_ast.Node, info: KernelInfo) -> tuple[c_ast.Node, str]:
    """The address (`result`, `&result[k]`, `result + k`, k the same for every thread) and its array."""
    base, offset = address, None
    if isinstance(address, c_ast.UnaryOp) and address.op == "&" and isinstance(address.expr, c_ast.ArrayRef):
        base, offset = address.expr.name, address.expr.subscript
    elif isinstance(address, c_ast.BinaryOp) and address.op == "+":
        base, offset = address.left, address.right
    if not (isinstance(base, c_ast.ID) and base.name in info.params and info.params[base.name].is_pointer):
        raise NotReduction("the atomicAdd's address is not a pointer parameter")
    if offset is not None and not (info.uniform(offset) and g.is_pure(offset, calls=info.pure_calls)):
        raise NotReduction("the atomicAdd's address differs between threads")
    return address, base.name


def _is_statement(call: c_ast.FuncCall, info: KernelInfo) -> bool:
    parent = info.parents.get(id(call))
    return isinstance(parent, c_ast.Compound) or isinstance(parent, c_ast.If) and call is not parent.cond \
        or isinstance(parent, c_ast.For) and call is parent.stmt


def _is_index_top(n: c_ast.Node, info: KernelInfo) -> bool:
    """The global x index, written out (`blockIdx.x * blockDim.x + threadIdx.x`)."""
    return any(isinstance(b, c_ast.StructRef) and isinstance(b.name, c_ast.ID) and b.name.name in _BUILTINS
               for b in walk(n)) and is_global_x(n, info) and not any(
        isinstance(p, c_ast.BinaryOp) and is_global_x(p, info) for p in [info.parents.get(id(n))])


def _check_index_uses(info: KernelInfo) -> None:
    """Every use of the thread index is the global x index: no block-shape dependence."""
    for n in walk(info.body):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in _BUILTINS | {"gridDim"}:
            top = info.index_expression(n)
            if not is_global_x(top, info):
                raise Unsupported(f"'{text(top)}' is not the global x index (the tree pins the block)")


def _stride_bound(body: c_ast.Compound, atomic, ctx: PassContext, info: KernelInfo) -> c_ast.Node | None:
    """`n` when the kernel is `<local definitions>; if (i < n && ...) { ... atomicAdd ... }` with i the global
    index and n a parameter the launch covers; else None (the naive grid stays)."""
    items = g.items(body)
    if not items or not isinstance(items[-1], c_ast.If) or items[-1].iffalse is not None:
        return None
    guard = items[-1]
    if not all(isinstance(s, c_ast.Decl) and s.init is not None and g.is_pure(s.init, True, info.pure_calls)
               for s in items[:-1]):
        return None
    if any(isinstance(n, c_ast.ID) and n.name in info.assigned for s in items[:-1] for n in walk(s)):
        return None
    for clause in g.clauses(guard.cond):
        if isinstance(clause, c_ast.BinaryOp) and clause.op == "<" and isinstance(clause.right, c_ast.ID) \
                and clause.right.name in ctx.facts.launch_covers and clause.right.name not in info.assigned \
                and is_global_x(clause.left, info) and _index_name_ok(clause.left, items[:-1], info):
            return clause.right
    return None


def _index_name_ok(index: c_ast.Node, decls: list, info: KernelInfo) -> bool:
    """The loop's variable: `i` of `int i = <global x>` (not changed anywhere), or the written-out index."""
    if not isinstance(index, c_ast.ID):
        return True
    decl = next((d for d in decls if d.name == index.name), None)
    return decl is not None and info.decl_counts.get(index.name) == 1 and index.name not in info.assigned \
        and isinstance(decl.type, c_ast.TypeDecl) and decl.type.type.names == ["int"]


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
