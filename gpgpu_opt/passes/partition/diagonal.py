"""Diagonal block order for 2-D grids (paper §3.8, after NVIDIA's transpose paper).

The blocks that run at once are neighbours in blockIdx.x. When the block at (bx, by) works on the tile
at (bx, by) and tiles are a partition-multiple apart in x, they all queue at one DRAM partition. The
prologue gives each block another tile,

    bid = blockIdx.x + gridDim.x * blockIdx.y;
    block_y = bid % gridDim.y;
    block_x = (bid / gridDim.y + block_y) % gridDim.x;

so that neighbours in launch order work on tiles along a diagonal. On a square grid this is the paper's
newbidy = bidx, newbidx = (bidx + bidy) % gridDim.x; on any grid it is a bijection (bid -> (bid / gy,
bid % gy) is one, and shifting x by a function of y is one), so every tile is still done exactly once.
CUDA promises no order among blocks, so a kernel correct under CUDA's model stays correct when its
blocks trade tiles. Every use of blockIdx in the kernel becomes block_x / block_y; the helpers it calls
must not read blockIdx themselves.
"""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import ids_in, transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.cbuild import Unsupported, is_builtin, parse_statements
from gpgpu_opt.templating import render


@dataclass
class Diagonal:
    block_x: str
    block_y: str
    linear: str


def diagonal_order(bx: int, by: int, gx: int, gy: int) -> tuple[int, int]:
    """The tile (x, y) block (bx, by) of a gx x gy grid works on: what the prologue computes."""
    linear = bx + gx * by
    y = linear % gy
    return (linear // gy + y) % gx, y


def uses_block_y(kernel: Kernel) -> bool:
    return any(is_builtin(n, "blockIdx", "y") for n in walk(kernel.body))


def plan_diagonal(kernel: Kernel, ctx: PassContext) -> Diagonal:
    body = kernel.body
    if any(is_builtin(n, "blockIdx", "z") for n in walk(body)):
        raise Unsupported("the kernel uses blockIdx.z (a 3-D grid)")
    helper = _helper_reading_block_index(body, ctx.facts.device_functions)
    if helper:
        raise Unsupported(f"the helper '{helper}' reads blockIdx itself, so it would not see the remapped block")
    taken = ids_in(body) | {p.name for p in kernel.params} | \
        {n.name for n in walk(body) if isinstance(n, c_ast.Decl) and n.name}
    names = []
    for base in ("block_x", "block_y", "block_id"):
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}{k}"
        taken.add(name)
        names.append(name)
    return Diagonal(*names)


def _helper_reading_block_index(body: c_ast.Node, helpers: dict, seen=None) -> str | None:
    seen = set() if seen is None else seen
    for n in walk(body):
        if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name in helpers \
                and n.name.name not in seen:
            seen.add(n.name.name)
            helper = helpers[n.name.name]
            if any(isinstance(m, c_ast.ID) and m.name == "blockIdx" for m in walk(helper.body)) \
                    or _helper_reading_block_index(helper.body, helpers, seen):
                return n.name.name
    return None


def apply_diagonal(kernel: Kernel, plan: Diagonal) -> None:
    """Rewrite `kernel` in place: the prologue first, then the kernel with blockIdx replaced."""
    def remap(n: c_ast.Node):
        if is_builtin(n, "blockIdx", "x"):
            return c_ast.ID(plan.block_x)
        if is_builtin(n, "blockIdx", "y"):
            return c_ast.ID(plan.block_y)
        return None

    body = kernel.body
    items = [transform(s, remap) for s in body.block_items or []]
    prologue = parse_statements(render("partition_diagonal.cu.j2", linear=plan.linear, block_x=plan.block_x,
                                       block_y=plan.block_y))
    comment = Comment("partition: blocks take their tiles in diagonal order, so that the blocks running at once "
                      "read different DRAM partitions")
    body.block_items = [comment, *prologue, *items]


def describe(plan: Diagonal) -> str:
    return (f"diagonal block order: block (blockIdx.x, blockIdx.y) works on the tile ({plan.block_x}, {plan.block_y}) "
            f"with {plan.linear} = blockIdx.x + gridDim.x * blockIdx.y, {plan.block_y} = {plan.linear} % gridDim.y, "
            f"{plan.block_x} = ({plan.linear} / gridDim.y + {plan.block_y}) % gridDim.x (on a square grid "
            f"{plan.block_y} = blockIdx.x, {plan.block_x} = (blockIdx.x + blockIdx.y) % gridDim.x); a bijection "
            "on any grid, so every tile is done once")
