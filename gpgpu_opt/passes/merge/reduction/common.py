"""What both reduction forms need: recognising the thread indices and the block, and the unroll pragma."""
from __future__ import annotations

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, NotAffine, iterator_symbol, to_sympy
from gpgpu_opt.ast_util import walk
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported

#: Loads of a thread's loop kept in flight by unrolling (the adds stay in order).
UNROLL = 8
GLOBAL_X = BID["x"] * BDIM["x"] + TID["x"]
_CONTROL = ("__syncthreads", "__syncwarp", "__shfl", "__threadfence", "__ballot", "__any", "__all")


class NotReduction(Unsupported):
    """The kernel is not a reduction of a form the pass knows (no note: most kernels are not)."""


def is_call(node: c_ast.Node, prefix: str) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) \
        and node.name.name.startswith(prefix)


def value_of(node: c_ast.Node, info: KernelInfo, loop_var: str | None = None) -> sympy.Expr | None:
    """The affine value of `node`; `loop_var` is a loop's iterator (a symbol, not the opaque variable the
    flat environment makes of a variable the loop assigns)."""
    env = info.flat_env()
    if loop_var is not None:
        env[loop_var] = iterator_symbol(loop_var)
    try:
        return sympy.expand(to_sympy(node, env))
    except NotAffine:
        return None


def is_global_x(node: c_ast.Node, info: KernelInfo, plus: sympy.Expr = sympy.Integer(0),
                loop_var: str | None = None) -> bool:
    """`node` is blockIdx.x * blockDim.x + threadIdx.x (+ `plus`, of the iterator `loop_var`)."""
    value = value_of(node, info, loop_var)
    return value is not None and sympy.expand(value - GLOBAL_X - plus) == 0


def is_thread_x(node: c_ast.Node, info: KernelInfo) -> bool:
    value = value_of(node, info)
    return value is not None and sympy.expand(value - TID["x"]) == 0


def check_block(ctx, what: str) -> int:
    """The naive block's x extent, for a 1-D block; a tree specialised to it pins it in the launch."""
    bx, by = ctx.facts.naive_block.xy
    if by != 1:
        raise Unsupported(f"{what}: the naive block is {bx}x{by}, not 1-D")
    return bx


def check_no_block_control(nodes, where: str) -> None:
    for stmt in nodes:
        for n in walk(stmt):
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name.startswith(_CONTROL):
                raise Unsupported(f"{where} calls {n.name.name}")
            if isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or []):
                raise NotReduction(f"{where} declares shared memory")
            if isinstance(n, (c_ast.Return, c_ast.Break, c_ast.Goto, c_ast.Label)) and where != "the loop":
                raise Unsupported(f"{where} returns or jumps")


def unrolled(loop: c_ast.Node, factor: int = UNROLL) -> list[c_ast.Node]:
    """The loop behind `#pragma unroll N`: N iterations' loads issued before their adds wait."""
    return [c_ast.Pragma(f"unroll {factor}"), loop]


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def hex_mask(lanes: int) -> str:
    return f"{(1 << lanes) - 1:#x}"
