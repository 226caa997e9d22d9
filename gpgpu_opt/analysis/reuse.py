"""Data reuse and sharing (paper §3.4): across loop iterations, neighbouring threads and blocks."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import sympy

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.coalescing import substitutions
from gpgpu_opt.analysis.footprint import Footprint
from gpgpu_opt.analysis.loops import Loop, in_trip_index, iterator_values, moves_with_thread
from gpgpu_opt.analysis.symbolic import BID, TID, NotAffine, coefficient, iterator_symbol, lambdified
from gpgpu_opt.targets import Target

_MAX_ITERATIONS = 48


def _footprint(access: Access, subs: dict, block: tuple[int, int], threads=None,
               block_id=(1, 1)) -> frozenset[int]:
    """The elements the given threads (default: the whole block) read over the enclosing loops."""
    loops = tuple((l.var, l.start, l.bound, l.comparison, l.step, l.multiplicative) for l in access.loops)
    return _elements_read(access.evaluable_index, loops, frozenset(subs.items()), tuple(block),
                          None if threads is None else tuple(tuple(t) for t in threads), tuple(block_id))


@functools.lru_cache(maxsize=128)
def _elements_read(index: sympy.Expr, loop_fields: tuple, subs_items: frozenset, block: tuple[int, int],
                   threads: tuple | None, block_id: tuple[int, int]) -> frozenset[int]:
    """`_footprint` of the values it reads, and of nothing else: the subscript, each enclosing loop's
    fields (rebuilt as a `Loop` without its node, which no step here reads), the substitutions (a dict's
    order does not matter to `subs`) and the threads. The analyses ask for the same footprint again and
    again (each pass, each candidate block, each kernel compiled again), so it is enumerated once."""
    loops = [Loop(None, *fields) for fields in loop_fields]
    subs = dict(subs_items)
    syms = [iterator_symbol(l.var) for l in loops]
    expr = in_trip_index(index, loops)
    if expr is None:
        return frozenset()
    expr = expr.subs({k: v for k, v in subs.items() if k not in (BID["x"], BID["y"])})
    expr = expr.subs({TID["z"]: 0, BID["z"]: 0})  # z is one plane per block: the footprint's shape is x/y
    fn = lambdified([TID["x"], TID["y"], BID["x"], BID["y"], *syms], expr, "numpy")
    if threads is None:
        threads = [(x, y) for y in range(block[1]) for x in range(block[0])]
    tx = np.array([t[0] for t in threads])
    ty = np.array([t[1] for t in threads])
    ranges = []
    for l, moves in zip(loops, moves_with_thread(loops)):
        start = l.start.subs(subs)
        start = int(start) if not start.free_symbols else 0
        trip = l.trip_count()
        count = _MAX_ITERATIONS
        if trip is not None:
            t = trip.subs(subs)
            if t.is_number:
                count = max(0, min(_MAX_ITERATIONS, int(t)))
        ranges.append(iterator_values(l, moves, start, count))
    combos = list(itertools.product(*ranges)) if ranges else [()]
    if len(combos) > 1:
        try:  # every iteration at once (the same elements as one call per iteration, far fewer calls)
            columns = [np.array([c[j] for c in combos], dtype=np.int64)[None, :] for j in range(len(ranges))]
            idx = np.broadcast_to(np.asarray(fn(tx[:, None], ty[:, None], block_id[0], block_id[1], *columns),
                                             dtype=np.int64), (tx.shape[0], len(combos)))
            return frozenset(idx.ravel().tolist())
        except (ValueError, TypeError):
            pass  # a function numpy does not broadcast: one iteration at a time
    out: set[int] = set()
    for values in combos:
        idx = np.broadcast_to(np.asarray(fn(tx, ty, block_id[0], block_id[1], *values), dtype=np.int64), tx.shape)
        out.update(idx.tolist())
    return frozenset(out)


def analyse_reuse(access: Access, target: Target, block: tuple[int, int], bindings: dict[str, int],
                  axes: tuple[str, ...] = ("x", "y")) -> list[dict]:
    """Reuse entries: {'kind', 'scope', 'description'} (plus the loop or dimension concerned)."""
    if access.evaluable_index is None or access.kind == "unresolved":
        return []
    expr = in_trip_index(access.evaluable_index, access.loops)
    if expr is None:
        return []
    subs, _ = substitutions(access, block, bindings)
    reuse: list[dict] = []
    for depth, loop in enumerate(access.loops):
        # An inner loop that starts where this one is (a tiled `for (c = c0; ...)`) reads new elements.
        inner_starts = set()
        for inner in access.loops[depth + 1:]:
            inner_starts |= inner.start.free_symbols
        if iterator_symbol(loop.var) not in expr.free_symbols | inner_starts:
            reuse.append({"kind": "temporal", "scope": "loop", "loop": loop.var,
                          "description": f"the same element in every iteration of loop '{loop.var}'"})
    if access.loops:
        inner = access.loops[-1]
        c = _coefficient_or_none(expr, iterator_symbol(inner.var), subs)
        if c is not None and c != 0 and c.is_number and not inner.multiplicative:
            # In the trip-index form a loop moving with the thread has its step in the coefficient.
            step = 1 if moves_with_thread(access.loops)[-1] else inner.step
            stride = abs(int(c) * step) * access.element_bytes
            if stride < target.transaction_bytes:
                per = target.transaction_bytes // stride
                reuse.append({"kind": "spatial", "scope": "loop", "loop": inner.var,
                              "description": f"each {target.transaction_bytes}-byte "
                                             f"{'segment' if target.coalescing_rule != 'sectors' else 'sector'} "
                                             f"holds {per} iterations of '{inner.var}': neighbouring threads can "
                                             f"load the next iterations' data with coalesced requests"})
    for axis, dim in (("x", 0), ("y", 1)):
        if block[dim] < 2:
            continue
        c_num = _coefficient_or_none(expr, TID[axis], subs)
        t0 = (0, 0)
        t1 = (1, 0) if axis == "x" else (0, 1)
        if TID[axis] not in expr.free_symbols:
            reuse.append({"kind": "shared", "scope": "threads", "dimension": axis,
                          "description": f"threads of a block that differ in {axis} read the same element"})
        elif axis == "y" and c_num is not None and c_num != 0 and c_num.is_number \
                and abs(int(c_num)) * access.element_bytes < target.transaction_bytes:
            reuse.append({"kind": "spatial", "scope": "threads", "dimension": axis,
                          "description": f"neighbouring threads in y read neighbouring elements of the same "
                                         f"{target.transaction_bytes}-byte segment in other requests"})
        elif access.loops and _footprint(access, subs, block, [t0]) & _footprint(access, subs, block, [t1]):
            reuse.append({"kind": "shared", "scope": "threads-over-loop", "dimension": axis,
                          "description": f"neighbouring threads in {axis} read the same elements in other "
                                         "iterations"})
    for axis in axes:
        if BID[axis] not in expr.free_symbols:
            reuse.append({"kind": "shared", "scope": "blocks", "dimension": axis,
                          "description": f"neighbouring blocks in {axis} read the same elements"})
            continue
        here = _footprint(access, subs, block, block_id=(1, 1))
        there = _footprint(access, subs, block, block_id=(2, 1) if axis == "x" else (1, 2))
        common = here & there
        if common:
            reuse.append({"kind": "overlap", "scope": "blocks", "dimension": axis,
                          "description": f"neighbouring blocks in {axis} overlap by {len(common)} of "
                                         f"{len(here)} elements (a halo)"})
    return reuse


def _coefficient_or_none(expr: sympy.Expr, var: sympy.Symbol, subs: dict) -> sympy.Expr | None:
    """The coefficient of `var` with the sizes substituted; None for a quasi-affine subscript, where
    `var` moves the element through a division or remainder (no constant stride)."""
    try:
        return coefficient(expr, var).subs(subs)
    except NotAffine:
        return None


def footprint_reuse(fp: Footprint, block: tuple[int, int]) -> dict:
    """The reuse of a read that belongs to a footprint across statements: on its own each element may be
    read by one thread, but the footprint's reads together read each element several times."""
    rows, cols = fp.extent(block)
    up, down, left, right = fp.reach
    return {"kind": "footprint", "scope": "statements", "array": fp.array, "reads": len(fp.reads),
            "offsets": len(fp.offsets), "tile": [rows, cols], "reach": {"up": up, "down": down, "left": left,
                                                                         "right": right},
            "elements": fp.elements(block), "block_reads": fp.reads_per_thread() * block[0] * block[1],
            "description": fp.describe(block)}

