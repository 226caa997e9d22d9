"""How the addresses of one memory request map to segments or sectors on a target (paper §3.2)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.loops import in_trip_index, iterator_values, moves_with_thread
from gpgpu_opt.analysis.symbolic import BDIM, BID, GDIM, TID, iterator_symbol, lambdified
from gpgpu_opt.targets import Target

#: Value used for a size parameter that nothing binds: a multiple of every tile and segment, as the
#: paper assumes for unresolved symbols. Reported as an assumption.
DEFAULT_SIZE = 2048


@dataclass
class Coalescing:
    coalesced: bool
    transactions_per_request: float     # segments (g80/gt200) or sectors (sm_xx), averaged
    ideal_transactions: float
    efficiency: float                   # bytes requested / bytes transferred, in 0..1
    broadcast: bool                     # the threads of a row of the request read one address
    unit: str                           # 'segments' or 'sectors'
    assumptions: list[str]

    def as_dict(self) -> dict:
        return {"coalesced": self.coalesced, "sectors_per_request": round(self.transactions_per_request, 3),
                "ideal_per_request": round(self.ideal_transactions, 3), "efficiency": round(self.efficiency, 4),
                "broadcast": self.broadcast, "unit": self.unit}


def substitutions(access: Access, block: tuple[int, int], bindings: dict[str, int]) -> tuple[dict, list[str]]:
    """Values for everything but the thread ids and the innermost loop iterator."""
    subs: dict = {BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: 1,
                  BID["x"]: 1, BID["y"]: 1, BID["z"]: 0, GDIM["x"]: 64, GDIM["y"]: 64, GDIM["z"]: 1}
    assumptions = []
    inner = {iterator_symbol(l.var) for l in access.loops}
    # The starts of the loops that move with the thread bring their own sizes (`for (k = row * n; ...)`).
    trip_form = in_trip_index(access.evaluable_index, access.loops)
    for sym in sorted((trip_form if trip_form is not None else access.evaluable_index).free_symbols, key=str):
        if sym in subs or sym in inner or sym in TID.values():
            continue
        if sym.name in bindings:
            subs[sym] = bindings[sym.name]
        else:
            subs[sym] = DEFAULT_SIZE
            assumptions.append(f"{sym.name} is a multiple of the request width (taken as {DEFAULT_SIZE})")
    return subs, assumptions


def analyse_request(access: Access, target: Target, block: tuple[int, int],
                    bindings: dict[str, int]) -> Coalescing | None:
    if access.evaluable_index is None or access.kind == "unresolved":
        return None
    trip_form = in_trip_index(access.evaluable_index, access.loops)
    if trip_form is None:
        return None
    subs, assumptions = substitutions(access, block, bindings)
    expr = trip_form.subs(subs)
    width = target.request_threads
    lanes = np.arange(min(width, block[0] * block[1]))
    tx, ty = lanes % block[0], lanes // block[0]
    loops = access.loops
    iter_syms = [iterator_symbol(l.var) for l in loops]
    fn = lambdified([TID["x"], TID["y"], TID["z"], *iter_syms], expr, "numpy")
    # The innermost loop walks its first `width` iterations (paper §3.2: the pattern then repeats);
    # outer loops stay at their first iteration.
    iterations = [[]]
    if loops:
        moves = moves_with_thread(loops)
        starts = []
        for l, m in zip(loops[:-1], moves):
            start = l.start.subs(subs)
            starts.append(0 if m or start.free_symbols else int(start))
        inner = loops[-1]
        s = inner.start.subs(subs)
        s = int(s) if not s.free_symbols else 0
        iterations = [starts + [v] for v in iterator_values(inner, moves[-1], s, width)]
    actual, ideal, requested, broadcast = [], [], [], True
    for it in iterations:
        index = np.broadcast_to(np.asarray(fn(tx, ty, 0, *it), dtype=np.int64), lanes.shape)
        addresses = index * access.element_bytes
        a, i = _transactions(addresses, access.element_bytes, target)
        actual.append(a)
        ideal.append(i)
        requested.append(len(addresses) * access.element_bytes)
        broadcast &= np.unique(addresses).size <= np.unique(ty).size
    total_actual, total_ideal = float(sum(actual)), float(sum(ideal))
    efficiency = min(1.0, sum(requested) / (total_actual * target.transaction_bytes))
    return Coalescing(efficiency > 0.999, total_actual / len(actual),
                      total_ideal / len(ideal), efficiency, broadcast,
                      "segments" if target.coalescing_rule in ("strict", "segments") else "sectors", assumptions)


def _transactions(addresses: np.ndarray, element_bytes: int, target: Target) -> tuple[int, int]:
    size = target.transaction_bytes
    # The fewest transactions that could carry the distinct bytes requested.
    ideal = -(-np.unique(addresses).size * element_bytes // size)
    if target.coalescing_rule == "strict":
        base = addresses[0]
        in_order = np.array_equal(addresses, base + np.arange(len(addresses)) * element_bytes)
        aligned = base % (len(addresses) * element_bytes) == 0
        return (max(1, (len(addresses) * element_bytes) // size) if in_order and aligned else len(addresses)), ideal
    touched = np.unique(addresses // size).size
    return int(touched), ideal
