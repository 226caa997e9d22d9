"""The merges, as named records: each is a way to give a thread more work or a block more threads, tried in
the order below on a kernel no earlier pass gave a launch (the package's docstring says what each does).

A strategy whose plan makes a choice the kernel alone does not fix (a register tile's shape, chosen by the
model and confirmed with ptxas) says what it chose (`shape_of(plan)`) and how to make that plan again from
the choice (`replan(kernel, ctx, info, shape)`): the schedule's merge entry carries the choice, so that
lowering replays the decision instead of deciding again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpgpu_opt.passes.merge import (conv_tile, mma_tile, reduction, register_tile, split_loop, stencil_rows,
                                    stencil_window, thread_merge, z_march)


@dataclass(frozen=True)
class MergeStrategy:
    """`plan(kernel, ctx, info)` raises NotAccumulation/NotReduction where the kernel is not of its shape and
    Unsupported where it is but the merge cannot be proved safe or worth it; `apply(kernel, info, plan)`
    rewrites the kernel in place; `describe(plan)`, `describe_launch(plan)` the report's words; `declined`
    what the kernel keeps when this merge declines it."""
    name: str
    plan: Callable
    apply: Callable
    describe: Callable
    describe_launch: Callable
    declined: str = "one output per thread kept"
    shape_of: Callable | None = None
    replan: Callable | None = None


def _tile_shape(tile) -> tuple[int, int]:
    return tile.tm, tile.tn


def _conv_shape(tile) -> tuple[int, int]:
    return tile.rows, tile.cols


REDUCTION = MergeStrategy("reduction", reduction.plan_reduction, reduction.apply_reduction, reduction.describe,
                          reduction.describe_launch, "reduction left as written")
REGISTER_TILE = MergeStrategy("register_tile", register_tile.plan_register_tile, register_tile.apply_register_tile,
                              register_tile.describe, register_tile.describe_launch, shape_of=_tile_shape,
                              replan=register_tile.plan_by_model)
#: Tried before the register tile: a product whose operands and precision the target's tensor cores take.
MMA_TILE = MergeStrategy("mma_tile", mma_tile.plan_mma_tile, mma_tile.apply_mma_tile, mma_tile.describe,
                         mma_tile.describe_launch)
CONV_TILE = MergeStrategy("conv_tile", conv_tile.plan_conv_tile, conv_tile.apply_conv_tile, conv_tile.describe,
                          conv_tile.describe_launch, shape_of=_conv_shape, replan=conv_tile.plan_by_model)
SPLIT_LOOP = MergeStrategy("split_loop", split_loop.plan_split, split_loop.apply_split, split_loop.describe,
                           split_loop.describe_launch, "one thread per output kept")
STENCIL_WINDOW = MergeStrategy("stencil_window", stencil_window.plan_stencil_window,
                               stencil_window.apply_stencil_window, stencil_window.describe,
                               stencil_window.describe_launch)
STENCIL_ROWS = MergeStrategy("stencil_rows", stencil_rows.plan_stencil_rows, stencil_rows.apply_stencil_rows,
                             stencil_rows.describe, stencil_rows.describe_launch)
THREAD_MERGE = MergeStrategy("thread_merge", thread_merge.plan_thread_merge, thread_merge.apply_thread_merge,
                             thread_merge.describe, thread_merge.describe_launch)
#: The one merge for a kernel whose blocks have several z (and the first for one that reads blockIdx.z).
Z_MARCH = MergeStrategy("z_march", z_march.plan_z_march, z_march.apply_z_march, z_march.describe,
                        z_march.describe_launch, "one z per thread kept")

#: A 2-D grid marching its columns through a z loop: the loop split over the grid's z, planes carried.
COLUMN_MARCH = MergeStrategy("column_march", z_march.plan_column_march, z_march.apply_column_march,
                             z_march.describe_column, z_march.describe_column_launch, "the z loop kept")

#: The merges for a kernel no earlier pass gave a launch, in the order they are tried.
UNSTAGED = (REDUCTION, MMA_TILE, REGISTER_TILE, CONV_TILE, COLUMN_MARCH, SPLIT_LOOP, STENCIL_WINDOW, STENCIL_ROWS,
            THREAD_MERGE)

BY_NAME = {s.name: s for s in (*UNSTAGED, Z_MARCH)}

__all__ = ["BY_NAME", "CONV_TILE", "MergeStrategy", "UNSTAGED", "Z_MARCH"]
