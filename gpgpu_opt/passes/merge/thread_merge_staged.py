"""Thread merge in y of a kernel that coalesce already staged (paper Fig. 7: g80 mm merged by 16 rows).

The kernel has a launch (`kernel.launch`, one thread per output in y) and shared tiles with barriers. The
merge is thread_merge.py's rewrite with three differences:
- a __shared__ array that a copy writes with its own values (the A tile of mm, staged from its row) gets a
  copy per merged row, `tile_A[16][16]`; a tile no copy writes differently stays one;
- every `__syncthreads()` must sit under control flow kept once (no condition or loop header depending on
  y), so each barrier is still reached by every thread of the block, once per step as before;
- the launch keeps its block and its outputs per block in x; its outputs per block in y grow by N.
Reads that do not depend on y (`B[k * n + col]`) are loaded once into a register for all N rows.

N: `--merge y=N` when given; else the largest power of two up to 16 (the paper's choice) whose per-copy
registers and shared arrays fit one block of the target (registers per thread, shared memory per block).
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.schedule import remember
from gpgpu_opt.pass_api.schedule import Rows, schedule_of
from gpgpu_opt.passes.merge import thread_merge as tm
from gpgpu_opt.passes.merge.dependence import Dependence, builtin_axis
from gpgpu_opt.rewriting.cbuild import Unsupported

_ALLOWED_CALLS = ("__syncthreads",)


def thread_merge_staged(kernel: Kernel, ctx: PassContext) -> Kernel:
    """`kernel` merged in y (a new kernel, with a note, its rows per thread recorded in the schedule), or
    `kernel` itself with a note saying why not."""
    where = Location.of(kernel.funcdef)
    schedule = schedule_of(ctx, kernel)
    work = kernel.copy()
    g.normalize_early_returns(work.body)
    info = KernelInfo.of(work, ctx)
    try:
        plan = plan_thread_merge_staged(work, ctx, info)
    except tm.NotMergeable:
        return kernel
    except Unsupported as why:
        ctx.log.skip("kernel", f"one output per thread in y kept: {why}", where)
        return kernel
    tm.apply_thread_merge(work, info, plan)
    ctx.log.applied("kernel", tm.describe(plan), where)
    ctx.log.applied("launch", tm.describe_launch(plan), where)
    ctx.schedule = schedule.with_(rows=Rows(plan.factors[1]))
    return remember(ctx.schedule, work)


def lower_rows(kernel: Kernel, ctx: PassContext, factor: int) -> Kernel:
    """A `schedule.Rows` lowered on `kernel` (rewritten in place): planned again as `thread_merge_staged`
    planned it, which must come to the recorded `factor`."""
    g.normalize_early_returns(kernel.body)
    info = KernelInfo.of(kernel, ctx)
    plan = plan_thread_merge_staged(kernel, ctx, info)
    if plan.factors[1] != factor:
        raise Unsupported(f"{plan.factors[1]} rows per thread planned where the schedule says {factor}")
    tm.apply_thread_merge(kernel, info, plan)
    return kernel


def plan_thread_merge_staged(kernel: Kernel, ctx: PassContext, info: KernelInfo) -> tm.ThreadMerge:
    launch = kernel.launch
    if launch is None or launch.fixed_grid:
        raise tm.NotMergeable("no launch of whole outputs to scale")
    request = ctx.options.merge_request
    if request is not None and request.y == 1:
        raise tm.NotMergeable("no rows per thread asked for (`--merge x=N` merges blocks in x)")
    if not any(builtin_axis(n, "y") for n in walk(kernel.body)):
        raise tm.NotMergeable("no y dimension")
    deps = Dependence(info, {"y"})
    shared = _reads_kept_once(info, deps)
    if not shared and request is None:
        raise tm.NotMergeable("no read shared by the rows")
    if launch.outputs_per_block[1] != launch.block[1]:
        raise Unsupported("its blocks already cover more rows than they have threads")
    _check_statements(info)
    tm._check_index_uses(info, {"y"})
    tm._check_locals(info, deps, shared_arrays=True)
    tm._check_stores(info, deps, {"y"})
    _check_barriers(info, deps)
    factor, why = _factor(info, ctx, deps, request)
    covers = (launch.outputs_per_block[0], launch.outputs_per_block[1] * factor)
    # In x the launch covers what an earlier merge made sure of; in y its blocks must still tile the naive ones.
    problem = info.coverage_problem((launch.outputs_per_block[0], ctx.facts.naive_block[1]), covers)
    if problem and not ctx.facts.stated_space_tiled_by(covers):       # a stated space tiled: no extra threads
        raise Unsupported(problem)
    return tm.ThreadMerge((1, factor), launch.block, why, shared, deps, covers=launch.outputs_per_block)


def _reads_kept_once(info: KernelInfo, deps: Dependence) -> list[str]:
    """The global reads in statements that the merge keeps once (a read whose subscript does not depend on
    the row, under a predicate that does, is still made once per row)."""
    tiles = {n.name for n in walk(info.body) if isinstance(n, c_ast.Decl) and "__shared__" in n.storage}
    kept = []
    for a in info.accesses:
        if a.mode != "read" or a.array in tiles:
            continue
        node = a.node
        while not isinstance(info.parents.get(id(node)), (c_ast.Compound, c_ast.If, c_ast.For, type(None))) \
                or _is_header(node, info.parents.get(id(node))):
            node = info.parents[id(node)]
        if not deps.deps(node):
            kept.append(a)
    return tm.read_names(info, kept)


def _is_header(node: c_ast.Node, parent: c_ast.Node) -> bool:
    return isinstance(parent, c_ast.If) and node is parent.cond or \
        isinstance(parent, c_ast.For) and node in (parent.init, parent.cond, parent.next)


def _check_statements(info: KernelInfo) -> None:
    """What check_kernel asks of a kernel, less the shared memory and barriers that staging put there."""
    if g.has_jumps(info.body):
        raise Unsupported("the kernel returns, breaks or jumps from inside its statements")
    for n in walk(info.body):
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) \
                and n.name.name not in _ALLOWED_CALLS and n.name.name not in info.pure_calls:
            raise Unsupported(f"the kernel calls {n.name.name}")
        if isinstance(n, c_ast.UnaryOp) and n.op == "*":
            raise Unsupported("the kernel dereferences pointers")
        if isinstance(n, c_ast.ID) and n.name == "warpSize":
            raise Unsupported("the kernel uses warpSize")


def _check_barriers(info: KernelInfo, deps: Dependence) -> None:
    for n in walk(info.body):
        if not (isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name == "__syncthreads"):
            continue
        path = g.path_to(n, info.parents, info.body)
        for parent, child in zip(path, path[1:]):
            heads = [parent.cond] if isinstance(parent, (c_ast.If, c_ast.While, c_ast.DoWhile)) else \
                [parent.init, parent.cond, parent.next] if isinstance(parent, c_ast.For) else []
            if any(h is not None and deps.deps(h) for h in heads) or isinstance(parent, c_ast.TernaryOp):
                raise Unsupported("a __syncthreads() sits under a condition or loop that depends on the row, "
                                  "so the merged rows could not share it")


def _factor(info: KernelInfo, ctx: PassContext, deps: Dependence, request) -> tuple[int, str]:
    t = ctx.options.target
    values = 1 + sum(1 for n in walk(info.body) if isinstance(n, c_ast.Decl) and deps.per_copy.get(n.name)
                     and "__shared__" not in n.storage)
    tile_bytes = sum(_bytes(n) for n in walk(info.body) if isinstance(n, c_ast.Decl)
                     and "__shared__" in n.storage and deps.per_copy.get(n.name))
    fixed_bytes = sum(_bytes(n) for n in walk(info.body) if isinstance(n, c_ast.Decl)
                      and "__shared__" in n.storage and not deps.per_copy.get(n.name))

    def fits(n: int) -> bool:
        return tm.BASE_REGISTERS + n * values * tm.REGISTERS_PER_VALUE <= t.max_registers_per_thread \
            and fixed_bytes + n * tile_bytes <= t.shared_per_block

    if request is not None:
        if not fits(request.y):
            raise Unsupported(f"--merge {request}: {request.y} copies of the per-row registers and shared "
                              "tiles do not fit a block")
        return request.y, f"asked for with --merge {request}"
    n = tm.MAX_FACTOR
    while n > 1 and not fits(n):
        n //= 2
    if n == 1:
        raise Unsupported("two copies of the per-row registers and shared tiles do not fit a block")
    return n, (f"{n} rows share each read of {', '.join(_reads_kept_once(info, deps))} "
               f"(the most of up to {tm.MAX_FACTOR} whose {values} registers per row and "
               f"{tile_bytes} B of shared tiles per row fit a block)")


def _bytes(decl: c_ast.Decl) -> int:
    count, node = 1, decl.type
    while isinstance(node, c_ast.ArrayDecl):
        if not isinstance(node.dim, c_ast.Constant):
            return 0
        count *= int(node.dim.value, 0)
        node = node.type
    return count * 4
