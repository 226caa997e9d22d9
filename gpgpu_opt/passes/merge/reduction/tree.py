"""The paper's reduction: a per-thread sum, then an in-place tree over a global array, a barrier per level.

    partial[i] = sum;                       // i: the global thread index
    __syncthreads();
    for (int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0 && tid + s < blockDim.x)
            partial[i] += partial[i + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = partial[i];

Each level reads and writes global memory. The thread -> segment mapping and the block stay; the tree runs
in registers with the same pairing: at level s, thread t (t % 2s == 0) adds thread t + s's value, by
`__shfl_down_sync` for s < 32 and through a small shared array (one value per warp) beyond. A thread's
`partial[i]` is final at the first level where t % 2s != 0 (the naive tree only reads it from then on), so
it stores its register there, once; thread 0 stores at the end. Every add is the naive's, in its order:
`partial[]` and `out[]` come out bit-exact. Without shuffles (g80), or for a block that is not a power of
two number of warps, the same tree runs on a shared array instead, and partial[] is written once at the end.

Proof obligations, each checked: the tree's loop is `s = 1; s < blockDim.x; s *= 2` with exactly the guarded
update and a barrier in its body; the array is indexed by the global thread index (`i + s` for the partner);
the guard is `tid % (2 * s) == 0` with `tid + s < blockDim.x` (which may be left out only when the block is a
power of two); nothing else touches the array, and the statements after the tree read only `partial[i]`
under `tid == 0`. The tree is specialised to the naive block, which the launch keeps.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, TID, iterator_symbol
from gpgpu_opt.ast_util import transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.cuda_types import size_of
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.merge.reduction.common import (NotReduction, check_block, check_no_block_control, hex_mask,
                                                     is_call, is_global_x, is_power_of_two, is_thread_x,
                                                     unrolled, value_of, UNROLL)
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_statements, text
from gpgpu_opt.templating import render

_SIZES = {t: size_of(t) for t in ("float", "double")}  # the accumulators the tree takes


@dataclass
class TreePlan:
    array: str                      # the global array the naive tree runs over (partial)
    store: c_ast.Assignment         # `partial[i] = sum;`
    acc: str                        # the per-thread sum (sum), the register the tree runs in
    acc_type: str
    before: list[c_ast.Node]        # the statements before the store (the segment sums)
    after: list[c_ast.If]           # `if (tid == 0) ...` after the tree
    block: int                      # the naive block, kept
    guarded: bool                   # the naive tree has `tid + s < blockDim.x`
    shuffles: bool                  # registers and shuffles, else a shared array
    warp: int
    step: str                       # the naive tree's level variable (s), reused for the new tree's levels

    @property
    def warps(self) -> int:
        return self.block // self.warp

    def describe(self) -> str:
        how = (f"in registers: __shfl_down_sync within a warp, {self.warps} per-warp values through shared memory"
               if self.shuffles else f"in a shared array of {self.block} values")
        why = "" if self.shuffles else " (the target has no warp shuffles)" if self.warp_shuffle_missing \
            else f" (a block of {self.block} threads is not a power-of-two number of warps)"
        return (f"the tree over {self.array}[] runs {how}{why}, not in global memory, with the naive pairing: "
                f"every sum and {self.array}[] are bit-exact")

    warp_shuffle_missing: bool = False
    block_assumed: bool = False        # no launch in the program: the block is the assumed default

    def describe_launch(self) -> str:
        kept = f"the naive blocks of {self.block} threads kept: the tree is specialised to them"
        if self.block_assumed:
            kept += (f"; the program does not launch the kernel, so blocks of {self.block} are assumed (each out[] "
                     "is the sum of such a block; a program that launches it with other blocks gets a tree of theirs)")
        return kept

    def apply(self, kernel: Kernel, info: KernelInfo) -> None:
        loop_at = max((k for k, s in enumerate(self.before) if isinstance(s, c_ast.For)), default=None)
        before = list(self.before)
        if loop_at is not None and not (loop_at and isinstance(before[loop_at - 1], c_ast.Pragma)):
            loop = before[loop_at]
            before[loop_at:loop_at + 1] = [Comment(f"merge: {UNROLL} iterations' loads in flight per thread "
                                                   "(the sum still adds them in order)"), *unrolled(loop)]
        store = text(self.store.lvalue)
        names = {k: info.fresh(k) for k in ("lane", "other", "warp_sum", "tree")}
        names["s"] = self.step
        if self.shuffles:
            comment = (f"merge: the tree in registers, threads paired as in the naive tree (bit-exact); {store} "
                       "stored once, when final")
            source = render("merge_reduce_tree_warp.cu.j2", acc=self.acc, type=self.acc_type, store=store,
                            store_warp=f"{self.array}[blockIdx.x * blockDim.x + {self.warp} * {names['lane']}]",
                            warp=self.warp, warps=self.warps, mask=hex_mask(self.warps), **names)
        else:
            comment = (f"merge: the tree in shared memory, threads paired as in the naive tree (bit-exact); {store} "
                       "stored once")
            source = render("merge_reduce_tree_shared.cu.j2", acc=self.acc, type=self.acc_type, store=store,
                            block=self.block, guarded=not is_power_of_two(self.block), **names)
        after = [self._final(stmt) for stmt in self.after]
        if self.shuffles:
            final_store = copy.deepcopy(self.store)
            if after:
                after[0].iftrue = c_ast.Compound([final_store, *g.items(after[0].iftrue)])
            else:
                after = parse_statements(f"if (threadIdx.x == 0) {text(self.store)};")
        kernel.body.block_items = [*before, Comment(comment), *parse_statements(source), *after]
        kernel.launch = LaunchConfig(block=(self.block, 1), outputs_per_block=(self.block, 1))

    def _final(self, stmt: c_ast.If) -> c_ast.If:
        """`partial[i]` read after the tree is the register that holds it."""
        def register(n):
            if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name == self.array:
                return c_ast.ID(self.acc)
            return None
        return transform(stmt, register)


def plan_tree(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> TreePlan:
    items = g.items(kernel.body)
    at = next((k for k, s in enumerate(items) if isinstance(s, c_ast.For) and _tree_update(s, info)), None)
    if at is None:
        raise NotReduction("no in-place tree over a global array")
    loop = items[at]
    update = _tree_update(loop, info)
    array = update.lvalue.name.name
    if at < 2 or not is_call(items[at - 1], "__syncthreads") or not _is_store(items[at - 2], array, info):
        raise Unsupported(f"the tree over {array}[] does not follow 'store {array}[i]; __syncthreads();'")
    store = items[at - 2]
    before, after = items[:at - 2], items[at + 1:]
    check_no_block_control(before, "the code before the tree")
    acc, acc_type = _accumulator(store, before, array, info)
    block = check_block(ctx, "the tree")
    s = _check_header(loop, block)
    guarded = _check_level(loop, update, s, info, block)
    if not guarded and not is_power_of_two(block):
        raise Unsupported(f"the tree has no 'tid + s < blockDim.x' guard and the block of {block} threads is not a "
                          "power of two: the naive tree reads past its block")
    _check_after(after, array, acc, info)
    warp = ctx.options.target.warp_size
    shuffles = ctx.options.target.has_warp_shuffle and is_power_of_two(block) and warp <= block <= warp * warp
    if not shuffles and block * _SIZES[acc_type] > ctx.options.target.shared_per_block:
        raise Unsupported(f"a shared tree of {block} values does not fit the target's shared memory")
    return TreePlan(array, store, acc, acc_type, before, after, block, guarded, shuffles, warp, s,
                    warp_shuffle_missing=not ctx.options.target.has_warp_shuffle, block_assumed=not ctx.facts.naive_block_known)


def _tree_update(loop: c_ast.For, info: KernelInfo) -> c_ast.Assignment | None:
    """The `partial[i] += partial[i + s]` of a loop whose body is that update under an if, then a barrier."""
    body = g.items(loop.stmt)
    if len(body) != 2 or not isinstance(body[0], c_ast.If) or body[0].iffalse is not None \
            or not is_call(body[1], "__syncthreads"):
        return None
    inner = g.items(body[0].iftrue)
    if len(inner) != 1 or not isinstance(inner[0], c_ast.Assignment):
        return None
    a = inner[0]
    target = a.lvalue
    if not (isinstance(target, c_ast.ArrayRef) and isinstance(target.name, c_ast.ID)
            and target.name.name in {p.name for p in info.kernel.arrays}):
        return None
    return a


def _is_store(stmt, array: str, info: KernelInfo) -> bool:
    return isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and isinstance(stmt.lvalue, c_ast.ArrayRef) \
        and isinstance(stmt.lvalue.name, c_ast.ID) and stmt.lvalue.name.name == array \
        and is_global_x(stmt.lvalue.subscript, info)


def _accumulator(store: c_ast.Assignment, before: list, array: str, info: KernelInfo) -> tuple[str, str]:
    value = store.rvalue
    if not isinstance(value, c_ast.ID):
        raise Unsupported(f"the value stored into {array}[] is not a local variable")
    decl = next((s for s in before if isinstance(s, c_ast.Decl) and s.name == value.name), None)
    t = decl.type if decl is not None else None
    if info.decl_counts.get(value.name) != 1 or not (isinstance(t, c_ast.TypeDecl)
                                                     and isinstance(t.type, c_ast.IdentifierType)
                                                     and " ".join(t.type.names) in _SIZES):
        raise Unsupported(f"'{value.name}' is not a float or double local declared before the tree")
    param = info.params[array]
    if param.base_type != " ".join(t.type.names):
        raise Unsupported(f"'{value.name}' and {array}[] have different types")
    if any(isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name == array
           for s in before for n in walk(s)):
        raise Unsupported(f"the code before the tree uses {array}[]")
    return value.name, param.base_type


def _check_header(loop: c_ast.For, block: int) -> str:
    s, start, declared = g.loop_var(loop)
    cond, nxt = loop.cond, loop.next
    if s is None or not declared or text(start) != "1":
        raise Unsupported("the tree's loop does not start at 'int s = 1'")
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and text(cond.left) == s
            and text(cond.right) in ("blockDim.x", str(block))):
        raise Unsupported(f"the tree's loop does not run while '{s} < blockDim.x'")
    doubling = {f"{s} *= 2", f"{s} <<= 1", f"{s} = {s} * 2", f"{s} = 2 * {s}", f"{s} += {s}"}
    if nxt is None or text(nxt) not in doubling:
        raise Unsupported(f"the tree's loop does not double '{s}' each level")
    if s in {n.lvalue.name for n in walk(loop.stmt) if isinstance(n, c_ast.Assignment)
             and isinstance(n.lvalue, c_ast.ID)}:
        raise Unsupported(f"the tree's body changes '{s}'")
    return s


def _check_level(loop: c_ast.For, update: c_ast.Assignment, s: str, info: KernelInfo, block: int) -> bool:
    """The guard is `tid % (2 * s) == 0` (and maybe `tid + s < blockDim.x`, returned) and the update adds the
    partner `partial[i + s]` into `partial[i]`."""
    step = iterator_symbol(s)
    guarded = False
    pairing = False
    for clause in g.clauses(g.items(loop.stmt)[0].cond):
        if isinstance(clause, c_ast.BinaryOp) and clause.op == "==" and text(clause.right) == "0" \
                and isinstance(clause.left, c_ast.BinaryOp) and clause.left.op == "%" \
                and is_thread_x(clause.left.left, info) and value_of(clause.left.right, info, s) == 2 * step:
            pairing = True
        elif isinstance(clause, c_ast.BinaryOp) and clause.op == "<" \
                and value_of(clause.left, info, s) == TID["x"] + step \
                and value_of(clause.right, info) in (BDIM["x"], sympy.Integer(block)):
            guarded = True
        else:
            raise Unsupported(f"the tree's guard has a clause '{text(clause)}' the naive pairing does not")
    if not pairing:
        raise Unsupported(f"the tree's guard does not pair threads by 'tid % (2 * {s}) == 0'")
    array = update.lvalue.name.name
    target = update.lvalue
    if update.op == "+=":
        partner = update.rvalue
    elif update.op == "=" and isinstance(update.rvalue, c_ast.BinaryOp) and update.rvalue.op == "+":
        r = update.rvalue
        partner = r.right if text(r.left) == text(target) else r.left if text(r.right) == text(target) else None
    else:
        partner = None
    if not (is_global_x(target.subscript, info) and isinstance(partner, c_ast.ArrayRef)
            and text(partner.name) == array and is_global_x(partner.subscript, info, plus=step, loop_var=s)):
        raise Unsupported(f"the tree's update is not '{array}[i] += {array}[i + {s}]'")
    return guarded


def _check_after(after: list, array: str, acc: str, info: KernelInfo) -> None:
    for stmt in after:
        if not (isinstance(stmt, c_ast.If) and stmt.iffalse is None and isinstance(stmt.cond, c_ast.BinaryOp)
                and stmt.cond.op == "==" and text(stmt.cond.right) == "0" and is_thread_x(stmt.cond.left, info)):
            raise Unsupported("a statement after the tree is not under 'if (tid == 0)'")
        check_no_block_control([stmt.iftrue], "the code after the tree")
        for n in walk(stmt):
            if isinstance(n, c_ast.ID) and n.name == acc:
                raise Unsupported(f"the code after the tree reads '{acc}', which the tree now holds")
            if isinstance(n, c_ast.ArrayRef) and text(n.name) == array and not is_global_x(n.subscript, info):
                raise Unsupported(f"the code after the tree reads {text(n)}")
        for a in info.accesses:
            if a.array == array and a.mode == "write" and any(n is a.node for n in walk(stmt)):
                raise Unsupported(f"the code after the tree writes {array}[]")
