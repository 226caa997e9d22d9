"""The race detector: per memory word, the last writer and the readers since the word's newest ordering
point, kept as the smallest and largest reader thread id.

Thread ids are `block * tpb + linear thread id` (global ids for global memory, lane numbers of the
batch for shared memory), so ids of one warp or one block form a contiguous range: readers
{min..max} all lie in one warp (block) iff min and max do. Two accesses by different threads are
ordered when both are in the same block with a `__syncthreads()` between them (the block's barrier
epoch differs), or both are in the same warp with a `__syncwarp()` between them (the warp epoch
differs). A read of a word last written by another thread, or a write of a word read or written by
another thread, without such ordering is a race. Accesses from different blocks are never ordered
within a launch. Atomics are not tracked. Everything is vectorised over the accessing lanes."""
from __future__ import annotations

import numpy as np

from gpgpu_opt.emulator.errors import RaceError


_BEP_SHIFT = 40
_WEP_SHIFT = 16
_MASK24 = (1 << 24) - 1
_MASK16 = (1 << 16) - 1


def pack_epochs(bep, wep):
    """Barrier epoch and warp epoch of lanes in one int64 each, with room for a source site in the low
    16 bits (epochs are kept modulo 2^23 / 2^24, sites modulo 2^16: far beyond what an emulated kernel
    reaches). Returns (packed, packed with only the barrier epoch kept)."""
    ep = (bep.astype(np.int64) << _BEP_SHIFT) | ((wep.astype(np.int64) & _MASK24) << _WEP_SHIFT)
    return ep, ep & ~np.int64((1 << _BEP_SHIFT) - 1)


def _wep(p):
    return (p >> _WEP_SHIFT) & _MASK24


class RaceTracker:
    def __init__(self, nwords: int, geom, track_reads: bool, describe_id, describe_word, site_str,
                 label: str, kernel: str, id_dtype=np.int32, per_block_words: bool = False, flags=None):
        self.tpb = tpb = geom.tpb
        self.geom = geom
        #: shared memory: every word belongs to one block, so accesses to it are always in one block
        self.same_block = per_block_words
        self._bshift = tpb.bit_length() - 1 if tpb & (tpb - 1) == 0 else None
        self._wshift = tpb % 32 == 0
        self.flags = flags                  # .syncwarp_seen: whether any warp epoch may be non-zero
        self.track_reads = track_reads
        self.describe_id = describe_id
        self.describe_word = describe_word
        self.site_str = site_str
        self.label = label
        self.kernel = kernel
        self.written = False
        #: a write since the last barrier of every block (same_block trackers): before any, every recorded
        #: write is ordered before every read, so reads need no check against the writers
        self.written_since_barrier = False
        self.id_dtype = np.dtype(id_dtype)
        # Per word, stored so that "none yet" is 0: np.zeros takes pages from the system only where a word
        # is touched, where np.full would write every word of a buffer sized by the program (16M words
        # for a 4096x4096 matrix), for a check that touches a few blocks.
        self.wr_id_plus1 = np.zeros(nwords, id_dtype)     # the last writer's id + 1
        self.wr_ep = np.zeros(nwords, np.int64)
        self.nwords = nwords
        self.scratch = None                 # lane positions, for finding two lanes storing to one word
        self.pending: list = []             # reads not yet merged into the reader record
        self.pending_lanes = 0
        if track_reads:
            self.big = np.iinfo(id_dtype).max
            self.rd_min_below_big = np.zeros(nwords, id_dtype)   # big - the lowest reader's id
            self.rd_max_plus1 = np.zeros(nwords, id_dtype)       # the highest reader's id + 1
            self.rd_ep = np.zeros(nwords, np.int64)

    # ---------------------------------------------------------------- helpers
    def blk(self, ids):
        return ids >> self._bshift if self._bshift is not None else ids // self.tpb

    def warp(self, ids):
        return ids >> 5 if self._wshift else self.geom.warp_key(ids)

    def _unordered(self, prev_lo, prev_hi, prev_ep, ids, ep, bfloor):
        """Bool array: which accesses now (thread ids, packed epochs ep, bfloor) are not ordered after
        the earlier accesses of threads prev_lo..prev_hi (epochs packed in prev_ep); None if all are."""
        if self.same_block:
            sb = True
            ok = prev_ep < bfloor
        else:
            b = self.blk(ids)
            sb = self.blk(prev_lo) == b
            if prev_hi is not prev_lo:
                sb &= self.blk(prev_hi) == b
            ok = sb & (prev_ep < bfloor)
        if np.count_nonzero(ok) == ok.size:
            return None
        bad = ~ok
        if self.flags is None or not self.flags.syncwarp_seen:
            return bad
        r = np.flatnonzero(bad)
        wm = self.warp(prev_lo[r])
        wok = (wm == self.warp(ids[r])) & (_wep(prev_ep[r]) < _wep(ep[r]))
        if prev_hi is not prev_lo:
            wok &= wm == self.warp(prev_hi[r])
        if sb is not True:
            wok &= sb[r]
        bad[r[wok]] = False
        return bad if np.count_nonzero(bad) else None

    def _race(self, word, me, verb, site, other, other_verb, other_site, multi=False):
        cross = int(other) // self.tpb != int(me) // self.tpb
        who = ("threads such as " if multi else "") + self.describe_id(int(other))
        why = "they are in different blocks, which no barrier orders" if cross else \
            "no __syncthreads() (or __syncwarp() within a warp) lies between the two accesses"
        raise RaceError(f"kernel '{self.kernel}': race on {self.label}{self.describe_word(int(word))}: "
                        f"{self.describe_id(int(me))} {verb} it at {self.site_str(site)}, and {who} "
                        f"{other_verb} it at {self.site_str(int(other_site) & _MASK16)}; {why}")

    def _check_writer(self, w, ids, ep, bf, site, verb):
        if not self.written or (self.same_block and not self.written_since_barrier):
            return
        wid = self.wr_id_plus1[w] - 1
        cand = (wid >= 0) & (wid != ids)
        if not np.count_nonzero(cand):
            return
        un = self._unordered(wid, wid, self.wr_ep[w], ids, ep, bf)
        if un is None:
            return
        bad = cand & un
        if np.count_nonzero(bad):
            k = int(np.argmax(bad))
            self._race(w[k], ids[k], verb, site, wid[k], "wrote", self.wr_ep[w[k]])

    # ---------------------------------------------------------------- accesses
    def read(self, w, ids, ep, bf, site: int) -> None:
        """Lanes with thread ids `ids` (of the tracker's id dtype) read words `w`. Checked against the
        writers now; merged into the reader record lazily (before the next write), since most reads of
        shared memory are followed by a barrier, which makes them irrelevant."""
        self._check_writer(w, ids, ep, bf, site, "reads")
        if not self.track_reads:
            return
        self.pending.append((w, ids, ep, bf, site))
        self.pending_lanes += len(w)
        if self.pending_lanes > (1 << 22):
            self.flush()

    def barrier(self) -> None:
        """Every block owning this tracker's words passed a __syncthreads(): pending reads are ordered
        before everything that follows."""
        if self.same_block:
            self.pending.clear()
            self.pending_lanes = 0
            self.written_since_barrier = False

    def flush(self) -> None:
        pending, self.pending, self.pending_lanes = self.pending, [], 0
        for entry in pending:
            self._record_reads(*entry)

    def _record_reads(self, w, ids, ep, bf, site: int) -> None:
        rmin, rmax = self._readers(w)
        rep = self.rd_ep[w]
        # Readers ordered before this access (same block, older epoch) are forgotten.
        keep = self._unordered(rmin, rmax, rep, ids, ep, bf)
        sw = w if keep is None else None if keep.all() else w[~keep]
        if sw is not None and sw.size:
            self.rd_min_below_big[sw] = 0
            self.rd_max_plus1[sw] = 0
        np.maximum.at(self.rd_min_below_big, w, self.big - ids)
        np.maximum.at(self.rd_max_plus1, w, ids + 1)
        self.rd_ep[w] = ep | (site & _MASK16)

    def _readers(self, w):
        """The lowest and highest reader ids recorded for words `w` (big and -1 where none is)."""
        return self.big - self.rd_min_below_big[w], self.rd_max_plus1[w] - 1

    def write(self, w, ids, ep, bf, site: int) -> None:
        n = len(w)
        pos = np.arange(n, dtype=np.int32)
        if self.scratch is None:
            self.scratch = np.zeros(self.nwords, np.int32)
        self.scratch[w] = pos
        win = self.scratch[w]
        dup = win != pos
        if np.count_nonzero(dup):
            k = int(np.argmax(dup))
            self._race(w[k], ids[k], "writes", site, ids[win[k]], "writes", site)
        self._check_writer(w, ids, ep, bf, site, "writes")
        if self.track_reads:
            if self.pending:
                self.flush()
            rmin, rmax = self._readers(w)
            others = (rmin <= rmax) & ~((rmin == ids) & (rmax == ids))
            if np.count_nonzero(others):
                un = self._unordered(rmin, rmax, self.rd_ep[w], ids, ep, bf)
                bad = None if un is None else others & un
                if bad is not None and np.count_nonzero(bad):
                    k = int(np.argmax(bad))
                    lo, hi = int(rmin[k]), int(rmax[k])
                    other = lo if lo != int(ids[k]) else hi
                    self._race(w[k], ids[k], "writes", site, other, "read", self.rd_ep[w[k]], multi=lo != hi)
        self.wr_id_plus1[w] = ids + 1
        self.wr_ep[w] = ep | (site & _MASK16)
        self.written = True
        self.written_since_barrier = True
