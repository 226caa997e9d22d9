"""The race detector: per memory word, the last writer and the readers since the last ordering point.

Thread ids are `block * tpb + linear thread id` (global ids for global memory, lane numbers of the batch
for shared memory). Two accesses by different threads are ordered when both are in the same block and
a `__syncthreads()` lies between them (the block's barrier epoch differs), or both are in the same warp
and a `__syncwarp()` lies between them (the warp epoch differs). Anything else that touches a word
written by another thread, or writes a word read by another thread, is a race. Accesses from different
blocks are never ordered within a launch. Atomics are not tracked.

The reader record of a word keeps the readers since its newest epoch: one reader id (>= 0), or
MULTI_WARP (several readers, all in one warp), MULTI_BLOCK (several warps of one block) or
MULTI_GRID (several blocks), plus one reader `ref` to name in messages. Everything is vectorised."""
from __future__ import annotations

import numpy as np

from gpgpu_opt.emulator.errors import RaceError

NONE, MULTI_WARP, MULTI_BLOCK, MULTI_GRID = -1, -2, -3, -4


class RaceTracker:
    def __init__(self, nwords: int, geom, track_reads: bool, describe_id, describe_word, site_str,
                 label: str, kernel: str, id_dtype=np.int64):
        self.tpb = geom.tpb
        self.geom = geom
        self.track_reads = track_reads
        self.describe_id = describe_id
        self.describe_word = describe_word
        self.site_str = site_str
        self.label = label
        self.kernel = kernel
        self.written = False
        self.wr_id = np.full(nwords, -1, id_dtype)
        self.wr_bep = np.zeros(nwords, np.int32)
        self.wr_wep = np.zeros(nwords, np.int32)
        self.wr_site = np.zeros(nwords, np.int32)
        self.scratch = np.zeros(nwords, np.int64)
        if track_reads:
            self.rd_kind = np.full(nwords, NONE, id_dtype)
            self.rd_ref = np.full(nwords, -1, id_dtype)
            self.rd_bep = np.zeros(nwords, np.int32)
            self.rd_wep = np.zeros(nwords, np.int32)
            self.rd_site = np.zeros(nwords, np.int32)
            self.flags = np.zeros(nwords, np.int8)

    # ---------------------------------------------------------------- helpers
    def _ordered(self, prev, prev_bep, prev_wep, ids, e, f):
        """Whether earlier accesses by `prev` are ordered before accesses by `ids` now."""
        same_blk = prev // self.tpb == ids // self.tpb
        same_warp = self.geom.warp_key(prev) == self.geom.warp_key(ids)
        return same_blk & ((prev_bep < e) | (same_warp & (prev_wep < f)))

    def _race(self, word, me, verb, site, other, other_verb, other_site, multi=False):
        cross = int(other) // self.tpb != int(me) // self.tpb
        if int(other) == int(me):
            who = "another thread"
        else:
            who = ("threads such as " if multi else "") + self.describe_id(int(other))
        why = "they are in different blocks, which no barrier orders" if cross else \
            "no __syncthreads() (or __syncwarp() within a warp) lies between the two accesses"
        raise RaceError(f"kernel '{self.kernel}': race on {self.label}{self.describe_word(int(word))}: "
                        f"{self.describe_id(int(me))} {verb} it at {self.site_str(site)}, and {who} "
                        f"{other_verb} it at {self.site_str(int(other_site))}; {why}")

    def _check_writer(self, w, ids, e, f, site, verb):
        if not self.written:
            return
        wid = self.wr_id[w]
        cand = (wid >= 0) & (wid != ids)
        if not cand.any():
            return
        j = np.flatnonzero(cand)
        wj = w[j]
        ok = self._ordered(wid[j], self.wr_bep[wj], self.wr_wep[wj], ids[j], e[j], f[j])
        if not ok.all():
            k = j[int(np.argmin(ok))]
            self._race(w[k], ids[k], verb, site, wid[k], "wrote", self.wr_site[w[k]])

    # ---------------------------------------------------------------- accesses
    def read(self, w, ids, e, f, site: int) -> None:
        self._check_writer(w, ids, e, f, site, "reads")
        if not self.track_reads:
            return
        n = len(w)
        pos = np.arange(n)
        self.scratch[w] = pos
        win = self.scratch[w]
        dup = win != pos
        lvl = None
        if dup.any():
            fl = self.flags
            dl = np.flatnonzero(dup)
            fl[w[dl]] = 1
            wk = self.geom.warp_key(ids)
            dw = dl[wk[dl] != wk[win[dl]]]
            if dw.size:
                fl[w[dw]] = 3
                db = dw[ids[dw] // self.tpb != ids[win[dw]] // self.tpb]
                if db.size:
                    fl[w[db]] = 7
            u = np.flatnonzero(~dup)
            w, ids, e, f = w[u], ids[u], e[u], f[u]
            lvl = fl[w]
            fl[w] = 0
        rk = self.rd_kind[w]
        rr = self.rd_ref[w]
        rb = self.rd_bep[w]
        rwe = self.rd_wep[w]
        if lvl is None:
            newk = ids
            lvl3 = lvl7 = False
        else:
            newk = np.where(lvl == 0, ids, np.where(lvl == 1, MULTI_WARP, np.where(lvl == 3, MULTI_BLOCK, MULTI_GRID)))
            lvl3, lvl7 = lvl == 3, lvl == 7
        same_blk = rr // self.tpb == ids // self.tpb
        fresh = (rk == NONE) | ((rk != MULTI_GRID) & same_blk & (rb < e))
        cross = ~fresh & ((rk == MULTI_GRID) | ~same_blk | lvl7)
        sb = ~fresh & ~cross
        same_warp = self.geom.warp_key(rr) == self.geom.warp_key(ids)
        mw = sb & ((rk == MULTI_BLOCK) | ~same_warp | lvl3)
        ws = sb & ~mw
        wfresh = ws & (rwe < f)
        wmerge = ws & ~wfresh
        merged = np.where((newk == ids) & (rk == ids), ids, MULTI_WARP)
        renew = fresh | wfresh
        kind = np.where(renew, newk, np.where(cross, MULTI_GRID, np.where(mw, MULTI_BLOCK, merged)))
        del wmerge
        self.rd_kind[w] = kind
        self.rd_ref[w] = np.where(renew, ids, rr)
        self.rd_bep[w] = np.where(fresh, e, rb)
        self.rd_wep[w] = np.where(renew, f, np.maximum(rwe, f))
        self.rd_site[w] = site

    def write(self, w, ids, e, f, site: int) -> None:
        n = len(w)
        pos = np.arange(n)
        self.scratch[w] = pos
        win = self.scratch[w]
        dup = win != pos
        if dup.any():
            k = int(np.argmax(dup))
            self._race(w[k], ids[k], "writes", site, ids[win[k]], "writes", site)
        self._check_writer(w, ids, e, f, site, "writes")
        if self.track_reads:
            rk = self.rd_kind[w]
            has = rk != NONE
            if has.any():
                j = np.flatnonzero(has)
                wj, idj, rkj = w[j], ids[j], rk[j]
                rr = self.rd_ref[wj]
                same_blk = rr // self.tpb == idj // self.tpb
                ordered_b = same_blk & (self.rd_bep[wj] < e[j])
                same_warp = self.geom.warp_key(rr) == self.geom.warp_key(idj)
                race = (rkj == MULTI_GRID) | ~same_blk | (~ordered_b & (
                    (rkj == MULTI_BLOCK) | ~same_warp | ((self.rd_wep[wj] >= f[j]) & (rkj != idj))))
                if race.any():
                    k = int(np.argmax(race))
                    self._race(wj[k], idj[k], "writes", site, rr[k], "read", self.rd_site[wj[k]],
                               multi=bool(rkj[k] < 0))
        self.wr_id[w] = ids
        self.wr_bep[w] = e
        self.wr_wep[w] = f
        self.wr_site[w] = site
        self.written = True
