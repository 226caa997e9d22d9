"""Marching z: a naive 3-D stencil on 3-D blocks, each thread computing consecutive z.

A 7-point (or box) stencil over an nx x ny x nz grid launched one thread per element in 3-D blocks reads
every plane three times, once for each of the threads below, at and above it. Marching turns the blocks
into blocks of one z (the naive block's x and y) and gives each thread STEPS consecutive z: it runs the naive
body once per z, and the reads of the plane below and of its own plane at z + 1 are the reads of its own
plane and of the plane above at z, carried in registers instead of loaded again. Measured on an H100 by
hand (L2 flushed, median of 21): 1.12x-1.22x at STEPS = 4 and blocks (32, 4, 1), STEPS 8 and 16 no better.

Safety (each refusal a note):
- the z index is `blockIdx.z * blockDim.z + threadIdx.z`, the z builtins used nowhere else, and every launch
  of the file gives a block whose x, y and z are known when compiling (a kernel the file does not launch:
  any block, under the launch contract, the guard bounding the thread space in z as in x and y; compile's
  check launches the naive kernel over the planes the guard bounds z to);
- naive style: straight-line code, no shared memory, barriers, warp intrinsics or atomics (pure calls
  only), one guard ending in `z < N` with N a parameter plus a constant, one store at the thread's own
  element to an array the kernel does not read and no other pointer aliases;
- every launch of the file starts at least N threads in z (the grid's z rounds up over N), so the threads the new grid
  adds past the naive launch's z stop at the guard, as the naive launch's last threads do;
- a carried value is one the naive thread of the next z reads at the same address, proved on the exact
  addresses with their clamps over the iterations that run (carry.py); the array is never written. Without
  such a carry the kernel is left as it is: the march alone is not what was measured.

A 2-D grid whose threads each march their (x, y) column through a z loop (`for (int z = 1; z < nz - 1; z++)`)
is the column march (loop.py): the same carry, and the loop split over the grid's z (Z_BLOCKS blocks, each
at least LEAST_Z consecutive z) so that enough columns are in flight. Its safety: the loop is the kernel's
one loop and last statement, starting at a constant and stepping by 1 up to a parameter plus a constant, its
body straight-line locals and the one store (as above); the kernel reads no z builtin and no gridDim; each
block's z are its own (z0 = c + blockIdx.z * chunk, up to the next block's z0), so every z of the naive loop
is run by exactly one thread, and the threads with none stop before any load.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.merge.z_march.carry import Chain, carried_chains
from gpgpu_opt.passes.merge.z_march.loop import NotColumnMarch, recognize_loop
from gpgpu_opt.passes.merge.z_march.rewrite import describe_code, describe_loop_code, march, march_loop
from gpgpu_opt.passes.merge.z_march.shape import Exact, Shape, has_z_index, recognize, z_symbol
from gpgpu_opt.rewriting.cbuild import Unsupported, text

#: Consecutive z per thread: 4 measured best (1.13x, 1.22x, 1.12x; 8 and 16 no better).
STEPS = 4
#: The column march: blocks in z, and the fewest z a block marches. H200, 512^3 floats, a 7-point stencil's
#: register queue by hand (bench/stencil3d/probe.cu, L2 flushed, median of 15), as a D2D copy's time over the
#: kernel's: 0.60 marching all of z, 0.66 in chunks of 128, 0.68 of 64, 0.70 of 32, 0.72 of 16 (the naive
#: loop 0.66: the split is what pays); a 27-point one 0.56-0.58 in chunks of 16 to 128 (naive, one thread per
#: point: 0.33). 32 blocks of at least 16: chunks of 16 up to 512 z.
Z_BLOCKS = 32
LEAST_Z = 16
#: The block of a column march whose naive block is not known (32 x 8 and 32 x 4 measured alike).
COLUMN_BLOCK = (32, 8)


@dataclass
class ZMarch:
    shape: Shape
    chains: list[Chain]
    block: tuple[int, int]
    steps: int = STEPS


def plan_z_march(kernel: Kernel, ctx, info) -> ZMarch:
    """A kernel the file launches keeps its naive block's x and y and must be proved to cover the guard's z.
    One it does not launch is under the launch contract (launch/contract.py): its guard bounds the thread
    space in z as in x and y, and the helpers give blocks of COLUMN_BLOCK, the grid's z from the naive one's."""
    launched = ctx.facts.launched_in_file
    block = _known_block(ctx) if launched else COLUMN_BLOCK
    shape, translator = recognize(kernel)
    _check_store(kernel, shape, translator, ctx)
    if launched:
        _check_covered(shape, ctx)
    return ZMarch(shape, carried_chains(kernel, shape, translator), block)


@dataclass
class ColumnMarch:
    shape: Shape
    chains: list[Chain]
    block: tuple[int, int]
    least: int = LEAST_Z
    blocks: int = Z_BLOCKS


def plan_column_march(kernel: Kernel, ctx, info) -> ColumnMarch:
    shape, translator = recognize_loop(kernel)
    _check_store(kernel, shape, translator, ctx)
    chains = carried_chains(kernel, shape, translator)
    (bx, by) = ctx.facts.launch_block
    return ColumnMarch(shape, chains, (bx, by) if bx is not None and by is not None else COLUMN_BLOCK)


def apply_column_march(kernel: Kernel, info, plan: ColumnMarch) -> None:
    march_loop(kernel, plan.shape, plan.chains, plan.least, plan.blocks, plan.block)


def describe_column(plan: ColumnMarch) -> str:
    return describe_loop_code(plan.chains, plan.least).removeprefix("gpgpu-opt: ")


def describe_column_launch(plan: ColumnMarch) -> str:
    return f"blocks of {plan.block[0]}x{plan.block[1]} threads, {plan.blocks} blocks in z"


def apply_z_march(kernel: Kernel, info, plan: ZMarch) -> None:
    march(kernel, plan.shape, plan.chains, plan.steps, plan.block)


def describe(plan: ZMarch) -> str:
    return describe_code(plan.chains, plan.steps).removeprefix("gpgpu-opt: ")


def describe_launch(plan: ZMarch) -> str:
    return (f"blocks of {plan.block[0]}x{plan.block[1]}x1 threads, the grid's z the naive launch's z threads "
            f"over {plan.steps}")


def _known_block(ctx) -> tuple[int, int]:
    (bx, by), bz = ctx.facts.launch_block, ctx.facts.launch_block_z
    if bx is None or by is None or bz is None:
        raise Unsupported(f"the block's x, y and z are not known when compiling ({ctx.facts.launch_block_where})")
    return bx, by


def _check_store(kernel: Kernel, shape: Shape, translator: Exact, ctx) -> None:
    """One store at the thread's own element (its index 0 at thread 0 of block 0, moving with z, no clamp),
    to an array no other pointer aliases."""
    store = shape.store.lvalue
    index = translator.value(store.subscript)
    where = f"the store `{text(store)}`"
    if index.has(sympy.Min, sympy.Max, sympy.Piecewise):
        raise Unsupported(f"{where} is clamped, not at the thread's own element")
    own = {z_symbol(): 0} | {s: 0 for s in index.free_symbols if s.name.startswith(("threadIdx_", "blockIdx_"))}
    if sympy.expand(index.subs(own)) != 0 or not index.has(z_symbol()):
        raise Unsupported(f"{where} is not at the thread's own element (it is not 0 for thread 0 of block 0)")
    array = store.name.name if hasattr(store.name, "name") else None
    param = next((p for p in kernel.params if p.name == array and p.is_pointer), None)
    if param is None:
        raise Unsupported(f"{where} is not through a pointer parameter")
    aliasing = ctx.facts.aliasing
    if not param.is_restrict and not (aliasing is not None and aliasing.restrict):
        raise Unsupported(f"'{array}' may alias the arrays read, whose values are carried across z")


def _check_covered(shape: Shape, ctx) -> None:
    """The guard's N at most a parameter every launch covers in z: the grid's extra threads stop at it."""
    bound = shape.bound_value
    parameter = next(iter(bound.free_symbols), None) if len(bound.free_symbols) == 1 else None
    offset = bound - parameter if parameter is not None else None
    if parameter is None or not offset.is_Integer or offset > 0 or parameter.name not in ctx.facts.launch_covers_z:
        raise Unsupported(f"the launches are not proved to start at least `{text(shape.bound)}` threads in z "
                          "(a grid `(n + B - 1) / B` of blocks of B in z is proof)")


__all__ = ["STEPS", "ColumnMarch", "NotColumnMarch", "ZMarch", "apply_column_march", "apply_z_march", "describe",
           "describe_column", "describe_column_launch", "describe_launch", "has_z_index", "plan_column_march",
           "plan_z_march"]
