"""Several threads per output: a long accumulation loop split over a warp or a block column.

A kernel with one output per thread in a 1-D thread space,

    int i = <global x index>;
    if (guard) { float acc = init; for (int k = s; k < e; k++) acc += f(k); out[i] = g(acc); }

has too few threads for a modern GPU when there are few outputs (mv with 16384 rows: 16384 threads, a
sixteenth of what an H100 keeps in flight), and each thread walks a long loop alone. Here each output gets
a group of T threads, thread t of a group takes the iterations s + t, s + t + T, ... and the partial sums
are added at the end. Two forms, chosen by how the loop reads memory:

- rows (`A[i*cols + k]`: contiguous along k, not coalesced across outputs): one warp per output, lane l
  takes every 32nd iteration, so the warp reads 32 consecutive words of the row at a time (coalesced);
  the lanes' sums are added by `__shfl_down_sync` and lane 0 runs the statements after the loop.
- columns (`A[k*W + i]`: already coalesced across outputs): 32 outputs in x, T threads in y per output;
  threadIdx.y splits the loop, the partial sums go through a small shared array, and threadIdx.y == 0
  adds them and runs the statements after the loop.

Threads whose output is out of range still take part in the shuffles and the barrier: the guard moves
onto the loop and onto the statements after it. Every accumulator starts from `init` in the thread that
finishes the sum and from 0 in the others.

When: the loop is long (at least 8 iterations per thread when its length is known) and the outputs are few
(at most a quarter of the target's resident threads; the number of outputs is the guard's bound when the
sizes are known, else about the loop's length, as for a square matrix). A row-wise loop of unknown length
is split whatever the sizes, as the split also makes its reads coalesced. Splitting changes the summation
order (floating-point sums round differently), which the report says.

Safety: the loop is canonical (`k < e` or `k <= e`, step 1) and is the kernel's only loop; its body only
declares private temporaries and adds to a float/double accumulator that nothing else in the loop reads;
the statements before the loop only define local variables; and the kernel keeps to what `KernelInfo`
allows for a new block (no shared memory, barriers or block-shape dependence).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import in_trip_index
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, NotAffine, iterator_symbol, to_sympy
from gpgpu_opt.ast_util import walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import (NotAccumulation, accumulation, accumulator, canonical_header,
                                              check_path, known, trip_count)
from gpgpu_opt.rewriting.cbuild import Unsupported, conj, is_placeholder, parse_expr, parse_statements, text
from gpgpu_opt.templating import render

#: Iterations each thread must keep for the split to pay off.
MIN_ITERATIONS_PER_THREAD = 8
#: Outputs per block in the row form (warps per block) and the largest y extent of the column form.
WARPS_PER_BLOCK = 8
MAX_COLUMN_THREADS = 16

_G = sympy.Symbol("G.x", integer=True, nonnegative=True)
_INDEX_BUILTINS = {"threadIdx", "blockIdx", "blockDim"}


@dataclass
class Split:
    loop: c_ast.For
    var: str
    acc: c_ast.Decl
    after: list[c_ast.Node]         # the statements after the loop in its block: run once per output
    rows: bool                      # the row form (a warp per output) or the column form
    threads: int                    # T, threads per output
    why: str                        # why this form and this T
    warp: int                       # the target's warp: the row form's lanes, the column form's outputs

    @property
    def block(self) -> tuple[int, int]:
        return (self.warp, WARPS_PER_BLOCK) if self.rows else (self.warp, self.threads)

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return (WARPS_PER_BLOCK, 1) if self.rows else (self.warp, 1)

    @property
    def part(self) -> str:
        """Which thread of its output's group a thread is."""
        return "threadIdx.x" if self.rows else "threadIdx.y"

    @property
    def output_index(self) -> str:
        """The naive thread (output) a thread works for."""
        return f"blockIdx.x * {WARPS_PER_BLOCK} + threadIdx.y" if self.rows else \
            f"blockIdx.x * {self.warp} + threadIdx.x"


# -- is the kernel of the shape, and is it worth it -------------------------------------------------------
def plan_split(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> Split:
    """The split for this kernel, or Unsupported saying why not. Does not change the kernel."""
    body = kernel.body
    _check_one_dimensional(body)
    loops = [n for n in walk(body) if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile))]
    if len(loops) != 1 or not isinstance(loops[0], c_ast.For):
        raise NotAccumulation("the kernel does not have exactly one loop")
    loop = loops[0]
    acc_name = accumulation(loop, info.pure_calls)
    info.check_kernel()
    var, start = canonical_header(loop, body)
    path = g.path_to(loop, info.parents, body)
    after = check_path(path, loop)
    # The guard moves onto the loop and the statements after it, so it is evaluated again there.
    g.check_sinkable(path, info.uniform, info.uniform_header, info.decl_counts)
    acc = accumulator(body, loop, acc_name, path, info)
    _check_index_uses(info)
    trip = trip_count(loop, start, info, ctx)
    rows, why_form = _form(loop, var, info)
    threads, why_size = _threads(rows, trip, _outputs(path, info, ctx), ctx)
    split = Split(loop, var, acc, after, rows, threads, f"{why_form}; {why_size}", ctx.options.target.warp_size)
    problem = info.coverage_problem(ctx.facts.naive_block, split.outputs_per_block)
    if problem:
        raise Unsupported(problem)
    return split


def _check_one_dimensional(body: c_ast.Node) -> None:
    for n in walk(body):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in _INDEX_BUILTINS \
                and n.field.name != "x":
            raise NotAccumulation(f"the thread space is not 1-D (it uses {n.name.name}.{n.field.name})")


def _check_index_uses(info: KernelInfo) -> None:
    """Every use of the thread index is the global x index itself, which the split recomputes."""
    env = info.flat_env()
    to_global = {TID["x"]: _G - BID["x"] * BDIM["x"]}
    for n in walk(info.body):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in _INDEX_BUILTINS:
            top = info.index_expression(n)
            try:
                value = sympy.expand(to_sympy(top, env).subs(to_global))
            except NotAffine:
                value = None
            if value != _G:
                raise Unsupported(f"'{text(top)}' is not the global thread index")


def _form(loop: c_ast.For, var: str, info: KernelInfo) -> tuple[bool, str]:
    """Rows (a warp per output) when some read is not coalesced across outputs but every read is
    contiguous along the loop; columns when every read is already coalesced across outputs."""
    k = iterator_symbol(var)
    in_loop = {id(n) for n in walk(loop.stmt)}
    across, along = [], []
    for a in info.accesses:
        if id(a.node) not in in_loop or a.mode != "read":
            continue
        # The iterator written from its start (`for (k = row * W; ...)`: k moves with the output).
        trip_form = in_trip_index(a.index, a.loops) if a.index is not None else None
        if trip_form is None:
            raise Unsupported(f"the read {a.array}[{a.index_text}] cannot be analysed")
        index = sympy.expand(trip_form.subs(TID["x"], _G - BID["x"] * BDIM["x"]))
        across.append((a, sympy.diff(index, _G)))
        along.append(sympy.diff(index, k))
    strided = [a for a, d in across if d not in (0, 1)]
    if not strided:
        return False, "the loop's reads are already coalesced across outputs, so threadIdx.y splits the loop"
    if all(d in (0, 1) for d in along):
        names = ", ".join(sorted({f"{a.array}[{a.index_text}]" for a in strided}))
        return True, f"{names} runs along the loop, so a warp per output reads it coalesced"
    raise Unsupported("a read in the loop is neither coalesced across outputs nor contiguous along the loop")


def _outputs(path, info: KernelInfo, ctx: PassContext) -> int | None:
    """The number of outputs where a guard `i < n` bounds the global index and n is known."""
    env = info.flat_env()
    for node in path:
        if not isinstance(node, c_ast.If):
            continue
        for clause in g.clauses(node.cond):
            if not (isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=")):
                continue
            try:
                lhs = sympy.expand(to_sympy(clause.left, env).subs(TID["x"], _G - BID["x"] * BDIM["x"]))
                bound = known(to_sympy(clause.right, env), ctx)
            except NotAffine:
                continue
            if lhs == _G and bound.is_Integer:
                return int(bound) + (1 if clause.op == "<=" else 0)
    return None


def _threads(rows: bool, trip: int | None, outputs: int | None, ctx: PassContext) -> tuple[int, str]:
    target = ctx.options.target
    resident = target.resident_threads
    estimate = outputs if outputs is not None else trip
    how = f"{estimate} outputs" if outputs is not None else \
        f"about {estimate} outputs (taken as the loop's length: the launch does not say)"
    if estimate is not None and estimate > resident // 4:
        raise Unsupported(f"{how} keep the target busy with one thread each (it keeps {resident} threads "
                          "resident)")
    if rows:
        if not target.has_warp_shuffle:
            raise Unsupported("a warp per output needs warp shuffles, which the target does not have")
        threads = target.warp_size
    else:
        if estimate is None:
            raise Unsupported("the number of outputs is not known (give the sizes with --bind)")
        threads = min(MAX_COLUMN_THREADS, 1 << max(1, math.ceil(math.log2(resident / estimate))))
        if trip is not None:
            while threads > 2 and trip < MIN_ITERATIONS_PER_THREAD * threads:
                threads //= 2
    if trip is not None and trip < MIN_ITERATIONS_PER_THREAD * threads:
        raise Unsupported(f"the loop's {trip} iterations are too few to split over {threads} threads")
    if estimate is None:
        return threads, "the sizes are not known (a row-wise loop is split whatever they are)"
    return threads, f"{how} x {threads} threads per output use more of the {resident} threads the target " \
                    "keeps resident"


# -- the rewrite ------------------------------------------------------------------------------------------
def apply_split(kernel: Kernel, info: KernelInfo, split: Split) -> None:
    """Rewrite `kernel` (the one planned) in place."""
    body = kernel.body
    _recompute_index(info, split)
    if not _is_zero(split.acc.init):
        # Only the thread that finishes the sum starts from the start value.
        split.acc.init = parse_expr(f"{split.part} == 0 ? {text(split.acc.init)} : 0")
    loop = split.loop
    _, start, declared = g.loop_var(loop)
    first = parse_expr(split.part if _is_zero(start) else f"{text(start)} + {split.part}")
    if declared:
        loop.init.decls[0].init = first
    else:  # `int j;` before the loop, used nowhere else (the plan checked)
        loop.init.rvalue = first
    loop.next = parse_expr(f"{split.var} += {split.threads}")
    holder = info.parents[id(loop)]
    holder.block_items = [s for s in holder.block_items if all(s is not a for a in split.after)]
    path = g.path_to(loop, info.parents, body)
    on_path = {id(n) for n in path[1:]}
    partial = info.fresh(f"partial_{split.acc.name}")
    sinker = g.Sinker({id(loop): lambda guards: _split_loop(split, info, partial, guards)}, on_path, info.uniform)
    items = sinker.rewrite(g.items(body), [])
    if not split.rows:
        items.insert(0, parse_statements(f"__shared__ {_type(split.acc)} {partial}[{split.threads}][{split.warp}];")[0])
    body.block_items = items
    kernel.launch = LaunchConfig(block=split.block, outputs_per_block=split.outputs_per_block)


def _recompute_index(info: KernelInfo, split: Split) -> None:
    tops = {}
    for n in walk(info.body):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in _INDEX_BUILTINS:
            top = info.index_expression(n)
            tops[id(top)] = top
    for top in tops.values():
        _replace_child(info.parents[id(top)], top, parse_expr(split.output_index))


def _replace_child(parent: c_ast.Node, old: c_ast.Node, new: c_ast.Node) -> None:
    for attr in parent.__slots__:
        value = getattr(parent, attr, None)
        if value is old:
            setattr(parent, attr, new)
            return
        if isinstance(value, list) and any(v is old for v in value):
            setattr(parent, attr, [new if v is old else v for v in value])
            return
    raise Unsupported("internal: the thread index is not where the kernel's tree says")


def _split_loop(split: Split, info: KernelInfo, partial: str, guards: list) -> list[c_ast.Node]:
    """The split loop under the guards in force, the combining of the partial sums, and the statements
    after the loop for the one thread that holds the total."""
    t, acc, var = split.threads, split.acc.name, split.var
    finish = conj([copy.deepcopy(c) for c in guards] + [parse_expr(f"{split.part} == 0")])
    if split.rows:
        how = (f"merge: one warp per output; lane {split.part} takes one iteration of '{var}' in {t} "
               "(the row is read coalesced)")
        done = "merge: the lanes' partial sums added by shuffles; lane 0 holds the total"
        source = render("merge_warp_combine.cu.j2", offset=info.fresh("offset"), half=t // 2, acc=acc,
                        cond=text(finish))
    else:
        how = f"merge: {t} threads per output; {split.part} takes one iteration of '{var}' in {t}"
        done = f"merge: the {t} partial sums added through shared memory by threadIdx.y == 0"
        source = render("merge_block_combine.cu.j2", partial=partial, part=info.fresh("part"), threads=t,
                        acc=acc, cond=text(finish))
    combine = parse_statements(source)
    for n in walk(combine[-1]):
        if isinstance(n, c_ast.Compound):
            n.block_items = [a for s in n.block_items for a in (split.after if is_placeholder(s, "__merge_after__")
                                                                else [s])]
    loop = g.guarded([split.loop], guards) if guards else split.loop
    return [Comment(how), loop, Comment(done), *combine]


def _is_zero(expr: c_ast.Node) -> bool:
    if not isinstance(expr, c_ast.Constant):
        return False
    try:
        return float(expr.value.rstrip("fFlLuU")) == 0.0
    except ValueError:
        return False


def _type(decl: c_ast.Decl) -> str:
    return " ".join(decl.type.type.names)


def describe_launch(split: Split) -> str:
    return (f"blocks of {split.block[0]}x{split.block[1]} threads, each covering {split.outputs_per_block[0]} "
            f"outputs ({split.threads} threads per output)")


def describe(split: Split) -> str:
    shape = (f"one warp of {split.threads} lanes per output, partial sums added by __shfl_down_sync"
             if split.rows else
             f"{split.threads} threads per output in y (blocks of {split.warp} outputs), partial sums added through "
             "shared memory")
    return (f"'{split.var}' loop split over {shape}: {split.why}; the summation order changes (the sum rounds "
            "differently from the naive kernel's)")
