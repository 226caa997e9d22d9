"""Reuse between the reads of one array at neighbouring threads and iterations (a 3-D stencil's group reuse).

A 7- or 27-point stencil reads `in[c + dz * plane + dy * nx + dx]` around the thread's own element `c`. On
its own each read touches one element per thread and iteration: the per-read reuse analysis (reuse.py) sees
nothing, and the 2-D footprints (footprint.py) do not take a z that is a loop's iterator or the thread's z.
Together the reads share almost every element: read `a` at thread t and iteration k is read `b` at the
thread t + (mx, my, mz) and the iteration k + mk, for small integers m, when

    index_a - index_b == mx * c_x + my * c_y + mz * c_z + mk * c_k

with c_x, c_y, c_z the coefficients of threadIdx.x, .y, .z and c_k those of the enclosing loops' iterators
(times their steps), both subscripts having the same coefficients (a read and itself, too: the 27-point
stencil's one read in loops over dz, dy and dx). The m are found on one sample of the
parameters (distinct large primes) and then proved on the expressions."""
from __future__ import annotations

import functools
import itertools

import sympy

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.symbolic import BID, GDIM, TID, NotAffine, coefficient, iterator_symbol

#: How far a neighbour may be, in threads or iterations, per axis; the axes looked at, at most.
REACH = 2
MAX_AXES = 6
_SAMPLE_PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069)


def neighbour_reuse(access: Access, accesses: list[Access]) -> list[dict]:
    """One entry for `access` (a read of an array the kernel does not write) when reads of its array (itself
    included, at another thread or iteration) read its elements at neighbouring threads or iterations."""
    if not _readable(access) or any(a.array == access.array and a.mode == "write" for a in accesses):
        return []
    loops = tuple(l.node for l in access.loops)
    axes = _axes(access.index, tuple((l.var, l.step) for l in access.loops if not l.multiplicative))
    if not axes:
        return []
    shared, dimensions = 0, set()
    iterators = frozenset(iterator_symbol(l.var) for l in access.loops)
    for other in accesses:
        if other.array != access.array or not _readable(other) or tuple(l.node for l in other.loops) != loops:
            continue
        if _axes(other.index, tuple((l.var, l.step) for l in other.loops if not l.multiplicative)) != axes:
            continue
        found = _distance(access.index, other.index, axes, iterators)
        if found is not None:
            shared += 1
            dimensions |= {name for (name, _), m in zip(axes, found) if m}
    if not shared:
        return []
    where = ", ".join(name for name, _ in axes if name in dimensions)
    return [{"kind": "group", "scope": "neighbours",
             "dimension": ",".join(_short(name) for name, _ in axes if name in dimensions), "reads": shared,
             "description": f"{shared} read{'s' if shared > 1 else ''} of '{access.array}' read its elements at "
                            f"neighbouring {where}"}]


def _readable(access: Access) -> bool:
    return access.mode == "read" and access.index is not None and access.kind != "unresolved"


@functools.lru_cache(maxsize=4096)
def _axes(index: sympy.Expr, loops: tuple[tuple[str, int], ...]) -> tuple[tuple[str, sympy.Expr], ...] | None:
    """(axis, coefficient) of each axis the subscript moves along: threads in x, y, z, then the enclosing
    loops, innermost first (at most MAX_AXES axes); None where a coefficient is not made of parameters."""
    index = sympy.expand(index)
    iterators = {iterator_symbol(var) for var, _ in loops}
    movers = [(f"threads in {a}", TID[a], 1) for a in "xyz"] + \
        [(f"iterations of '{var}'", iterator_symbol(var), step) for var, step in reversed(loops)]
    found = []
    for name, symbol, step in movers:
        try:
            c = coefficient(index, symbol)
        except NotAffine:
            return None
        if c.free_symbols & (_THREAD_SYMBOLS | iterators):
            return None
        if c != 0 and len(found) < MAX_AXES:
            found.append((name, sympy.expand(c * step)))
    return tuple(found)


@functools.lru_cache(maxsize=16384)
def _distance(index: sympy.Expr, other: sympy.Expr, axes: tuple, iterators: frozenset) -> tuple[int, ...] | None:
    """The small integers m, not all 0, with index - other == sum(m * coefficient), proved; None if there
    are none (or the difference moves with a thread or an iteration)."""
    difference = sympy.expand(index - other)
    if difference.free_symbols & (_THREAD_SYMBOLS | iterators):
        return None
    coefficients = [c for _, c in axes]
    symbols = sorted(difference.free_symbols.union(*(c.free_symbols for c in coefficients)), key=str)
    sample = {s: _SAMPLE_PRIMES[k % len(_SAMPLE_PRIMES)] + 64 * (k // len(_SAMPLE_PRIMES))
              for k, s in enumerate(symbols)}
    try:
        target = int(difference.subs(sample))
        steps = [int(c.subs(sample)) for c in coefficients]
    except TypeError:
        return None
    for m in itertools.product(range(-REACH, REACH + 1), repeat=len(steps)):
        if any(m) and sum(a * b for a, b in zip(m, steps)) == target and \
                sympy.expand(difference - sum(k * c for k, c in zip(m, coefficients))) == 0:
            return m
    return None


def _short(axis: str) -> str:
    """`threads in x` as `x`, `iterations of 'k'` as `k` (the analyze table's column)."""
    return axis.split()[-1].strip("'")


_THREAD_SYMBOLS = {*TID.values(), *BID.values(), *GDIM.values()}


__all__ = ["REACH", "neighbour_reuse"]
