"""Sharing between thread blocks (paper §3.4): which global reads neighbouring blocks make too.

For each global read, and each axis of the thread space (x, y), the question is whether block b and block
b+1 along that axis read the same data:

- `yes`: the subscript does not depend on the block index of that axis (through the global index or
  otherwise), so the two blocks read exactly the same elements (mm's `A[row*n + k]` in x, `B[k*n + col]`
  in y; mv's `x[k]` in every direction);
- `overlap`: the subscript moves with the block, but one block's footprint (over its threads and the
  iterations of its loops, outer loops included: their iterators are loop indices, not thread ids) meets
  its neighbour's, that of this read or of another read of the array: a halo such as `in[x + i]`, or
  `in[x + 1]` meeting the next block's `in[x - 1]`. The amount is the number of common elements
  for one pair of blocks, of the block's footprint;
- `no`: the footprints are disjoint.

A read the neighbour does not share may still be shared by blocks further away at a fixed *stride* d (blocks
b and b+d read the same elements, e.g. through `blockIdx.x % 4`): the smallest such d up to 8 is reported.
Each read also says how it is loaded: through shared memory (G2S: the coalesce pass stages it) or straight
into a register (G2R). G2S sharing is what thread-block merge exploits, G2R sharing thread merge (§3.6).
"""
from __future__ import annotations

from dataclasses import dataclass

from gpgpu_opt.analysis.accesses import Access
from gpgpu_opt.analysis.coalescing import substitutions
from gpgpu_opt.analysis.loops import in_trip_index
from gpgpu_opt.analysis.reuse import _footprint
from gpgpu_opt.analysis.symbolic import BID

#: Block strides looked at for sharing further away than the neighbour.
MAX_STRIDE = 8


@dataclass(frozen=True)
class AxisSharing:
    shared: str                 # 'yes', 'overlap' or 'no'
    common: int | None = None   # elements both blocks read (overlap only)
    footprint: int | None = None
    stride: int | None = None   # blocks b and b+stride read common elements (when the neighbour does not)

    def as_dict(self) -> dict:
        d = {"shared": self.shared}
        if self.shared == "overlap":
            d.update({"elements": self.common, "of": self.footprint})
        if self.stride is not None:
            d["stride"] = self.stride
        return d

    def __str__(self) -> str:
        if self.shared == "overlap":
            return f"overlap {self.common}/{self.footprint}"
        return self.shared + (f" (stride {self.stride})" if self.stride else "")


@dataclass(frozen=True)
class Sharing:
    kind: str                           # 'G2S' or 'G2R'
    axes: dict[str, AxisSharing]        # 'x' (and 'y' for a 2-D thread space)

    @property
    def by_all_blocks(self) -> bool:
        return bool(self.axes) and all(a.shared == "yes" for a in self.axes.values())

    def shared_in(self, axis: str) -> bool:
        a = self.axes.get(axis)
        return a is not None and a.shared in ("yes", "overlap")

    def as_dict(self) -> dict:
        d = {"kind": self.kind, **{axis: a.as_dict() for axis, a in self.axes.items()}}
        if self.by_all_blocks:
            d["all_blocks"] = True
        return d

    def label(self) -> str:
        return " ".join(f"{axis}:{a}" for axis, a in self.axes.items())


def _sibling_footprint(access: Access, subs: dict, block: tuple[int, int], block_id: tuple[int, int]) -> set[int]:
    """A sibling read's footprint in a neighbouring block, kept on the access: every read of the array asks
    for it (a kernel with many reads in nested loops would otherwise enumerate them quadratically often)."""
    cache = access.extra.setdefault("sibling_footprints", {})
    key = (tuple(block), tuple(block_id), tuple(sorted((str(k), str(v)) for k, v in subs.items())))
    if key not in cache:
        cache[key] = _footprint(access, subs, block, block_id=block_id)
    return cache[key]


def analyse_sharing(access: Access, load_path: str, block: tuple[int, int], bindings: dict[str, int],
                    axes: tuple[str, ...], siblings: list[Access] = ()) -> Sharing | None:
    """The sharing of one read (None for a write or a subscript that cannot be analysed). `siblings`: the
    kernel's other reads of the same array (a halo: `in[x + 1]` meets the next block's `in[x - 1]`)."""
    if access.mode != "read" or access.evaluable_index is None or access.kind == "unresolved":
        return None
    expr = in_trip_index(access.evaluable_index, access.loops)
    if expr is None:
        return None
    subs, _ = substitutions(access, block, bindings)
    others = [(s, substitutions(s, block, bindings)[0]) for s in siblings
              if s is not access and s.array == access.array and s.mode == "read" and s.evaluable_index is not None
              and s.kind != "unresolved"]
    out = {}
    for axis in axes:
        if BID[axis] not in expr.free_symbols:
            out[axis] = AxisSharing("yes")
            continue
        here = _footprint(access, subs, block, block_id=(1, 1))
        common = here & _footprint(access, subs, block, block_id=_neighbour(axis, 1))
        for other, other_subs in others:
            for side in (1, -1):
                common |= here & _sibling_footprint(other, other_subs, block, _neighbour(axis, side))
        if common:
            out[axis] = AxisSharing("overlap", len(common), len(here))
            continue
        # An affine subscript that moves with the block meets a farther block only through the values
        # assumed for unknown sizes (rows of `i * m + col` wrapping onto each other): no stride then.
        periodic = not expr.is_polynomial(BID[axis])
        stride = next((d for d in range(2, MAX_STRIDE + 1)
                       if here & _footprint(access, subs, block, block_id=_neighbour(axis, d))), None) \
            if periodic else None
        out[axis] = AxisSharing("no", stride=stride)
    return Sharing(load_path, out)


def _neighbour(axis: str, distance: int) -> tuple[int, int]:
    return (1 + distance, 1) if axis == "x" else (1, 1 + distance)


__all__ = ["AxisSharing", "Sharing", "analyse_sharing"]
