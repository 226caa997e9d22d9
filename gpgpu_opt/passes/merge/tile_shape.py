"""The shape of a register tile (register_tile.py): TM x TN outputs per thread.

The model (`choose_shape`) counts registers: about TM*TN accumulators, TM + TN operand values and some
overhead per thread, which must fit two blocks of 256 threads per SM. Where nvcc is installed,
`confirm_with_ptxas` then builds the tiled kernel as it will be printed, `__launch_bounds__(256, 2)` included,
and keeps the first shape ptxas fits without more than a few spilled words. On an H200 the 4096² gemm
held to 128 registers with 100 bytes of spills ran at 34.4 TF/s, against 24.6 at 163 registers and one block
per SM (bench/RESULTS.md), so a few spills outside the inner loop are worth the second block.
"""
from __future__ import annotations

import math
from typing import Callable

from gpgpu_opt.nvcc import nvcc_available, resource_usage
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.cbuild import Unsupported

#: Threads per block in each direction, and outputs per thread group (one 16-byte vector of floats).
THREADS = 16
GROUP = 4
#: Registers a thread needs besides its accumulators and operand registers (addresses, loop counters).
OVERHEAD_REGISTERS = 40
#: Blocks per SM the tile must leave room for (one block's barrier then overlaps another's loads).
BLOCKS_PER_SM = 2
#: Spill stores ptxas may need for a shape to be kept (measured: 100 bytes cost less than a block per SM).
SPILL_LIMIT = 128


def choose_shape(ctx: PassContext, outputs: tuple[int | None, int | None], element: str) -> tuple[int, int, str]:
    """TM x TN outputs per thread: `--merge` when given, else the largest tile whose registers fit two
    blocks of 256 threads per SM and whose grid still gives every SM a block."""
    target = ctx.options.target
    words = 2 if element == "double" else 1
    budget = min(target.max_registers_per_thread, target.registers_per_sm // (THREADS * THREADS * BLOCKS_PER_SM))

    def registers(tm: int, tn: int) -> int:
        return words * (tm * tn + tm + tn) + OVERHEAD_REGISTERS

    request = ctx.options.merge_request
    if request is not None:
        if request.x not in (GROUP, 2 * GROUP) or request.y not in (GROUP, 2 * GROUP):
            raise Unsupported(f"--merge {request}: a register tile takes 4 or 8 outputs per thread in each "
                              "direction")
        return request.y, request.x, f"--merge {request}"
    fitting = [(tm, tn) for tm, tn in ((8, 8), (4, 4)) if registers(tm, tn) <= budget]
    if not fitting:
        raise Unsupported(f"a 4x4 tile needs about {registers(4, 4)} registers per thread, more than the "
                          f"{budget} the target has for two blocks of {THREADS * THREADS} threads per SM")
    ox, oy = outputs
    for tm, tn in fitting:
        if ox is None or oy is None:
            return tm, tn, (f"{tm}x{tn} outputs per thread (about {registers(tm, tn)} registers of the "
                            f"{budget} a thread can have at two blocks per SM); the sizes are not known, "
                            "so the tile for large matrices")
        blocks = math.ceil(ox / (THREADS * tn)) * math.ceil(oy / (THREADS * tm))
        if blocks >= target.sm_count or (tm, tn) == fitting[-1]:
            return tm, tn, (f"{tm}x{tn} outputs per thread (about {registers(tm, tn)} registers of the "
                            f"{budget} a thread can have at two blocks per SM) give {blocks} blocks of "
                            f"{THREADS * tm}x{THREADS * tn} outputs for {target.sm_count} SMs")
    raise AssertionError("unreachable")


def confirm_with_ptxas(kernel_name: str, ctx: PassContext, shapes: list[tuple[int, int]],
                       build: Callable[[tuple[int, int]], str]) -> tuple[tuple[int, int], str]:
    """The first of `shapes` (the model's, then smaller ones) whose source, `build(shape)`, ptxas compiles with
    at most SPILL_LIMIT bytes of spill stores, and what ptxas reported. Without nvcc, or for a kernel that
    does not compile on its own (it calls functions defined elsewhere), the model's shape."""
    if not nvcc_available():
        return shapes[0], "nvcc not found, so the model's register count stands"
    reported = []
    for shape in shapes:
        usage = (resource_usage(build(shape), ctx.options.target) or {}).get(kernel_name)
        if usage is None:
            return shapes[0], "the kernel does not compile on its own for ptxas, so the model's register count stands"
        spills = usage["spill_store_bytes"]
        reported.append(f"{shape[0]}x{shape[1]} {usage['registers']} registers, {spills} bytes of spills")
        if spills <= SPILL_LIMIT:
            break
    return shape, f"ptxas at {BLOCKS_PER_SM} blocks per SM: " + "; ".join(reported)
