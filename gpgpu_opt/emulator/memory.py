"""Memory: global arrays (the numpy arguments), shared arrays (one copy per block of the batch), local
arrays (one copy per lane); pointers into them; bounds and alignment checks; loads, stores, atomics."""
from __future__ import annotations

import numpy as np

from gpgpu_opt.emulator.errors import MisalignedAccessError, OutOfBoundsError, UnsupportedConstruct, where
from gpgpu_opt.emulator.races import RaceTracker
from gpgpu_opt.emulator.values import CType, Value, VecType, cast_data


class Buffer:
    """Storage of one array. `extent` is the number of scalar words one block (shared), one lane (local)
    or the launch (global) may address; `dims` the declared dimensions (shared/local) in elements."""

    def __init__(self, name: str, space: str, data: np.ndarray, scalar: CType, extent: int,
                 dims: tuple[int, ...] | None = None, view=None):
        self.name = name
        self.space = space
        self.data = data
        self.scalar = scalar
        self.extent = extent
        self.dims = dims
        self.view = view or scalar
        self.stride = extent            # words between the copies of consecutive blocks / lanes
        self.race: RaceTracker | None = None
        self.read_only = False
        self.null = False               # a null pointer argument: no element, compares equal to 0
        self.lane_base: np.ndarray | None = None   # per lane of the batch: the copy's first word
        self.reach: list[int] | None = None   # [lowest word, highest word + 1] accessed, where it is measured

    @property
    def label(self) -> str:
        return f"{self.space} array '{self.name}'"

    def describe_word(self, word: int) -> str:
        """' element [i][j]' (shared/local: offset within the block's copy) or ' index i'."""
        off = word % self.stride if self.space != "global" else word
        if self.dims and len(self.dims) > 1:
            k = self.view.n if isinstance(self.view, VecType) else 1
            idx = np.unravel_index(off // k, self.dims) if off // k < int(np.prod(self.dims)) else (off // k,)
            return " element " + "".join(f"[{int(i)}]" for i in idx)
        return f" index {off}"


class PtrValue:
    """A pointer: a buffer, a per-lane offset in the buffer's scalar words, the element type seen through
    it (`view`, a scalar or vector type) and, for a declared array, its remaining dimensions."""
    __slots__ = ("buffer", "offset", "view", "dims")

    def __init__(self, buffer: Buffer, offset, view, dims=None):
        self.buffer = buffer
        self.offset = offset
        self.view = view
        self.dims = dims

    @property
    def ctype(self):
        return self

    def __repr__(self) -> str:
        return f"PtrValue({self.buffer.name}, {self.offset!r}, {self.view})"


def _one_word_per_lane(buf: Buffer, o, lanes) -> bool:
    """Every lane accesses word o of its own copy of a local array (copies one `stride` apart, in lane
    order, untracked): the words are the strided slice data[o::stride], no address array needed."""
    return lanes is None and buf.space == "local" and not isinstance(o, np.ndarray)


def lane_words(addr, n: int) -> np.ndarray:
    """Word addresses of n accessing lanes as an int64 array of n (read-only where broadcast)."""
    if isinstance(addr, np.ndarray) and addr.dtype == np.int64 and addr.shape == (n,):
        return addr
    return np.broadcast_to(np.asarray(addr, dtype=np.int64), (n,))


def width(view) -> int:
    return view.n if isinstance(view, VecType) else 1


class Memory:
    """Loads, stores and atomics of the lanes of the current batch."""

    def __init__(self, kernel: str, geom, stats, check_races: bool):
        self.kernel = kernel
        self.geom = geom
        self.stats = stats
        self.check_races = check_races
        self.batch = None
        self.syncwarp_seen = False
        self._last_mask = self._last_lanes = None
        self.sites: list[str] = []
        self._site_ids: dict[int, int] = {}

    def site(self, node) -> int:
        key = id(node)
        if key not in self._site_ids:
            self._site_ids[key] = len(self.sites)
            self.sites.append(where(node))
        return self._site_ids[key]

    def site_str(self, site: int) -> str:
        return self.sites[site]

    def tracker(self, buf: Buffer, nwords: int, track_reads: bool, id_dtype=np.int32) -> RaceTracker:
        if buf.space == "global":
            describe = self.geom.describe_gid
        else:
            describe = lambda lane: self.batch.describe_lane(lane)  # noqa: E731
        return RaceTracker(nwords, self.geom, track_reads, describe, buf.describe_word, self.site_str,
                           buf.label, self.kernel, id_dtype, per_block_words=buf.space != "global", flags=self)

    # ---------------------------------------------------------------- addressing
    def _where_lane(self, lanes, k) -> str:
        lane = int(k) if lanes is None else int(lanes[int(k)])
        return self.batch.describe_lane(lane)

    def check(self, buf: Buffer, o, view, lanes, node, verb: str) -> None:
        """Bounds (0 <= o, o + width <= extent) and alignment of the active lanes' offsets `o`."""
        k = width(view)
        if isinstance(o, np.ndarray):
            if o.size == 0:
                return
            lo, hi = o.min(), o.max()
        else:
            lo = hi = o
        if buf.reach is not None:
            buf.reach[0], buf.reach[1] = min(buf.reach[0], int(lo)), max(buf.reach[1], int(hi) + k)
        if lo < 0 or hi + k > buf.extent:
            bad = (np.asarray(o) < 0) | (np.asarray(o) + k > buf.extent)
            j = int(np.argmax(bad)) if isinstance(o, np.ndarray) else 0
            off = int(o[j]) if isinstance(o, np.ndarray) else int(o)
            unit = k if isinstance(view, VecType) else 1
            idx = f"{off // unit}" + (f" (as {view}; scalar words {off}..{off + k - 1})" if k > 1 else "")
            raise OutOfBoundsError(
                f"kernel '{self.kernel}': out-of-bounds {verb} {buf.label} at index {idx}; it has "
                f"{buf.extent // unit} elements{' per block' if buf.space == 'shared' else ''} "
                f"(by {self._where_lane(lanes, j)} at {where(node)})")
        if isinstance(view, VecType):
            align = view.align // buf.scalar.size
            if align > 1:
                mis = np.asarray(o) % align != 0
                if mis.any():
                    j = int(np.argmax(mis)) if isinstance(o, np.ndarray) else 0
                    off = int(np.asarray(o).flat[j])
                    raise MisalignedAccessError(
                        f"kernel '{self.kernel}': misaligned {view} {verb} {buf.label}: byte offset "
                        f"{off * buf.scalar.size} is not a multiple of {view.align} "
                        f"(by {self._where_lane(lanes, j)} at {where(node)})")

    def _active(self, off, mask):
        if mask is None:
            return None, off
        if mask is self._last_mask:         # masks are never modified in place
            lanes = self._last_lanes
        else:
            lanes = np.flatnonzero(mask)
            if mask is not False:
                self._last_mask, self._last_lanes = mask, lanes
        return lanes, (off[lanes] if isinstance(off, np.ndarray) else off)

    def _addr(self, buf: Buffer, o, lanes):
        if buf.lane_base is None:
            return o
        base = buf.lane_base if lanes is None else buf.lane_base[lanes]
        return base + o

    def _ids(self, buf: Buffer, lanes):
        b = self.batch
        ids = b.gid32 if buf.space == "global" else b.lane32
        if lanes is None:
            return ids, b.ep, b.bfloor
        return ids[lanes], b.ep[lanes], b.bfloor[lanes]

    def _track(self, buf: Buffer, addr, lanes, node, write: bool):
        if buf.race is None:
            if write and buf.read_only:
                raise UnsupportedConstruct(f"kernel '{self.kernel}': internal: store to '{buf.name}', which "
                                           f"the emulator assumed read-only, at {where(node)}")
            return
        n = self.batch.N if lanes is None else len(lanes)
        ids, ep, bf = self._ids(buf, lanes)
        words = lane_words(addr, n)
        if write:
            buf.race.write(words, ids, ep, bf, self.site(node))
        elif buf.race.written or buf.race.track_reads:
            buf.race.read(words, ids, ep, bf, self.site(node))

    # ---------------------------------------------------------------- accesses
    def load(self, buf: Buffer, off, view, mask, node) -> Value:
        lanes, o = self._active(off, mask) if mask is not None else (None, off)
        vector = view.__class__ is VecType
        k = view.n if vector else 1
        n_active = self.batch.N if lanes is None else len(lanes)
        if n_active == 0:
            z = np.zeros(self.batch.N, buf.scalar.dtype)
            return Value(view, tuple(z for _ in range(k))) if vector else Value(view, z)
        self.check(buf, o, view, lanes, node, "load from")
        space = buf.space
        if lanes is None and space == "local" and o.__class__ is not np.ndarray:   # _one_word_per_lane
            if not vector:
                return Value(view, buf.data[o::buf.stride].copy())
            return Value(view, tuple(buf.data[o + c::buf.stride].copy() for c in range(k)))
        addr = self._addr(buf, o, lanes)
        if space == "global":
            self.stats.global_loads += n_active
        elif space == "shared":
            self.stats.shared_loads += n_active
        tracked = self.check_races and buf.race is not None    # _track does nothing for a load otherwise
        if not vector and not tracked and lanes is None:          # the loop below for one component
            return Value(view, buf.data[addr])
        comps = []
        for c in range(k):
            a = addr + c if c else addr
            if tracked:
                self._track(buf, a, lanes, node, write=False)
            v = buf.data[a]
            if lanes is not None and isinstance(v, np.ndarray):
                full = np.zeros(self.batch.N, v.dtype)
                full[lanes] = v
                v = full
            comps.append(v)
        if isinstance(view, VecType):
            return Value(view, tuple(comps))
        return Value(view, comps[0])

    def store(self, buf: Buffer, off, view, value: Value, mask, node) -> None:
        lanes, o = self._active(off, mask)
        n = self.batch.N if lanes is None else len(lanes)
        if n == 0:
            return
        self.check(buf, o, view, lanes, node, "store to")
        if _one_word_per_lane(buf, o, lanes):
            comps = value.data if isinstance(view, VecType) else (value.data,)
            for c, v in enumerate(comps):
                buf.data[o + c::buf.stride] = v
            return
        addr = lane_words(self._addr(buf, o, lanes), n)
        if buf.space == "global":
            self.stats.global_stores += n
        elif buf.space == "shared":
            self.stats.shared_stores += n
        comps = value.data if isinstance(view, VecType) else (value.data,)
        tracked = self.check_races and (buf.race is not None or buf.read_only)   # else _track does nothing
        for c, v in enumerate(comps):
            a = addr + c if c else addr
            if tracked:
                self._track(buf, a, lanes, node, write=True)
            if isinstance(v, np.ndarray) and lanes is not None:
                v = v[lanes]
            buf.data[a] = v

    def atomic(self, op: str, buf: Buffer, off, view, operand: Value, mask, node, compare: Value | None = None):
        """`atomicOp(&buf[off], operand)`, applied as if serialized in lane (thread) order; returns the old
        values. Not tracked by the race detector."""
        if isinstance(view, VecType):
            raise UnsupportedConstruct(f"atomic on a vector element at {where(node)}")
        if buf.read_only:
            raise UnsupportedConstruct(f"kernel '{self.kernel}': internal: atomic on '{buf.name}', assumed "
                                       f"read-only, at {where(node)}")
        lanes, o = self._active(off, mask)
        n = self.batch.N if lanes is None else len(lanes)
        result = np.zeros(self.batch.N, view.dtype)
        if n == 0:
            return Value(view, result)
        self.check(buf, o, view, lanes, node, "atomic on")
        self.stats.atomics += n
        addr = np.broadcast_to(np.asarray(self._addr(buf, o, lanes), dtype=np.int64), (n,))
        vals = np.broadcast_to(cast_data(operand.data, view.dtype), (self.batch.N,))
        vals = vals if lanes is None else vals[lanes]
        cmp = None
        if compare is not None:
            cmp = np.broadcast_to(cast_data(compare.data, view.dtype), (self.batch.N,))
            cmp = cmp if lanes is None else cmp[lanes]
        order = np.argsort(addr, kind="stable")
        sa, sv = addr[order], vals[order]
        sc = cmp[order] if cmp is not None else None
        start = np.ones(n, np.bool_)
        start[1:] = sa[1:] != sa[:-1]
        first = np.flatnonzero(start)
        sizes = np.diff(np.append(first, n))
        rank = np.arange(n) - np.repeat(first, sizes)
        old = np.empty(n, view.dtype)
        data = buf.data
        ufunc = {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum,
                 "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}.get(op)
        big = sizes > 64
        if ufunc is not None and big.any():
            for g in np.flatnonzero(big):
                s, e = first[g], first[g] + sizes[g]
                seq = np.concatenate([data[sa[s]:sa[s] + 1], sv[s:e]]).astype(view.dtype)
                acc = ufunc.accumulate(seq, dtype=view.dtype)
                old[s:e] = acc[:-1]
                data[sa[s]] = acc[-1]
            small = ~np.repeat(big, sizes)
        else:
            small = np.ones(n, np.bool_)
        if small.any():
            maxrank = int(rank[small].max())
            for r in range(maxrank + 1):
                sel = np.flatnonzero(small & (rank == r))
                a = sa[sel]
                cur = data[a]
                old[sel] = cur
                data[a] = _atomic_op(op, cur, sv[sel], None if sc is None else sc[sel], view, node)
        back = np.empty(n, view.dtype)
        back[order] = old
        if lanes is None:
            result = back
        else:
            result[lanes] = back
        return Value(view, result)


def _atomic_op(op, cur, v, cmp, view, node):
    if op == "add":
        return (cur + v).astype(view.dtype)
    if op == "sub":
        return (cur - v).astype(view.dtype)
    if op == "max":
        return np.maximum(cur, v)
    if op == "min":
        return np.minimum(cur, v)
    if op == "and":
        return cur & v
    if op == "or":
        return cur | v
    if op == "xor":
        return cur ^ v
    if op == "exch":
        return v
    if op == "cas":
        return np.where(cur == cmp, v, cur)
    if op == "inc":
        return np.where(cur >= v, view.dtype.type(0), cur + view.dtype.type(1)).astype(view.dtype)
    if op == "dec":
        return np.where((cur == 0) | (cur > v), v, cur - view.dtype.type(1)).astype(view.dtype)
    raise UnsupportedConstruct(f"atomic '{op}' at {where(node)}")
