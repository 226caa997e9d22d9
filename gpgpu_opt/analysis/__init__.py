"""Analyses of a kernel's global accesses: kind, coalescing, reuse, sharing between blocks, partition camping."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from gpgpu_opt.dim3 import Dim3
from gpgpu_opt.analysis.accesses import Access, collect_accesses
from gpgpu_opt.analysis.coalescing import Coalescing, analyse_request
from gpgpu_opt.analysis.file_scope import collect_file_scope_reads
from gpgpu_opt.analysis.footprint import footprints
from gpgpu_opt.analysis.partition import partition_camping
from gpgpu_opt.analysis.neighbours import neighbour_reuse
from gpgpu_opt.analysis.reuse import analyse_reuse, footprint_reuse
from gpgpu_opt.analysis.sharing import Sharing, analyse_sharing
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, cuda_text
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.targets import Target


@dataclass
class AccessReport:
    access: Access
    coalescing: Coalescing | None
    reuse: list[dict]
    partition: dict | None
    load_path: str | None           # 'G2S' (staged through shared memory) or 'G2R', for reads
    sharing: Sharing | None = None  # reads: do neighbouring blocks read the same data
    #: reads: other reads of the array that read its elements at neighbouring threads or iterations
    #: (analysis/neighbours.py): a register queue's reuse, not a shared tile's (staging does not read it)
    neighbours: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        a = self.access
        d = {"array": a.array, "mode": a.mode, "index": a.index_text, "kind": a.kind,
             "line": a.location.line if a.location else None,
             "column": a.location.column if a.location else None,
             "affine": cuda_text(a.index) if a.index is not None and a.kind != "unresolved" else None,
             **({"quasi_affine": cuda_text(a.analysis_index)} if a.kind == "quasi-affine" else {}),
             **({"interior": cuda_text(a.analysis_index)} if a.kind == "clamped" else {}),
             **({"reaching": cuda_text(a.analysis_index)} if a.kind == "redefined" else {}),
             "loops": [l.var for l in a.loops]}
        if self.coalescing is not None:
            d.update(self.coalescing.as_dict())
            if self.coalescing.assumptions:
                d["assumptions"] = self.coalescing.assumptions
        else:
            d.update({"coalesced": False, "sectors_per_request": None, "efficiency": None,
                      "why_unresolved": a.why_unresolved})
        d["reuse"] = self.reuse + self.neighbours
        if a.mode == "read":
            d["load_path"] = self.load_path
            if self.sharing is not None:
                d["sharing"] = self.sharing.as_dict()
        if self.partition is not None:
            d["partition_camping"] = self.partition
        return d


@dataclass
class KernelAnalysis:
    kernel: Kernel
    target: Target
    block: tuple[int, int]
    reports: list[AccessReport] = field(default_factory=list)
    #: Reads of file-scope `__constant__`/`__device__` arrays (analysis.file_scope): not global accesses
    #: the passes see; a warp-uniform constant read is a broadcast.
    file_scope_reads: list = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {"name": self.kernel.name, "target": self.target.name, "naive_block": list(self.block),
             "accesses": [r.as_dict() for r in self.reports]}
        if self.file_scope_reads:
            d["file_scope_reads"] = [file_scope_read_dict(a) for a in self.file_scope_reads]
        return d


def file_scope_read_dict(a: Access) -> dict:
    """A read of a file-scope variable: its memory, and whether the threads of a warp read one address."""
    return {"array": a.array, "mode": a.mode, "index": a.index_text, "kind": a.kind,
            "line": a.location.line if a.location else None, "uniform": a.extra["uniform"],
            "subscript": cuda_text(a.analysis_index) if a.analysis_index is not None else None}


def uses_y(kernel: Kernel, accesses: list[Access]) -> bool:
    return any(a.evaluable_index is not None and {TID["y"], BID["y"]} & a.evaluable_index.free_symbols
               for a in accesses)


def analyze_kernel(kernel: Kernel, target: Target, block: tuple[int, int] | None = None,
                   bindings: dict[str, int] | None = None) -> KernelAnalysis:
    bindings = bindings or {}
    accesses = collect_accesses(kernel)
    if block is None:
        block = (16, 16) if uses_y(kernel, accesses) else (256, 1)
    block = Dim3.of(block).xy    # the passes tile x and y of blocks of one z: the analysis is of one plane
    axes = ("x", "y") if uses_y(kernel, accesses) else ("x",)
    result = KernelAnalysis(kernel, target, block,
                            file_scope_reads=collect_file_scope_reads(kernel) if kernel.file_variables else [])
    shared_footprint = {id(a.node): fp for fp in footprints(accesses, bindings) for a in fp.reads}
    for a in accesses:
        coalescing, reuse, partition = _access_facts(a, target, block, bindings, axes)
        if id(a.node) in shared_footprint:
            reuse.append(footprint_reuse(shared_footprint[id(a.node)], block))
        path = None
        if a.mode == "read":
            needs_staging = coalescing is not None and not coalescing.coalesced and bool(reuse)
            path = "G2S" if needs_staging else "G2R"
        sharing = analyse_sharing(a, path, block, bindings, axes, accesses) if path else None
        neighbours = [] if id(a.node) in shared_footprint else neighbour_reuse(a, accesses)
        result.reports.append(AccessReport(a, coalescing, reuse, partition, path, sharing, neighbours))
    return result


#: `_access_facts` already computed, by `_facts_key`. Bounded: cleared when full.
_FACTS: dict[tuple, tuple] = {}
_MAX_FACTS = 4096


def _facts_key(a: Access, target: Target, block: tuple[int, int], bindings: dict[str, int],
               axes: tuple[str, ...]) -> tuple:
    """Everything the request, reuse and partition analyses read of an access: its subscript (`index`,
    `analysis_index`), kind, element size and mode, and each enclosing loop's fields; never its node, text
    or position. With the target, block, bindings and axes, this determines their results."""
    loops = tuple((l.var, l.start, l.bound, l.comparison, l.step, l.multiplicative) for l in a.loops)
    return (a.index, a.analysis_index, a.kind, a.element_bytes, a.mode, loops, target, tuple(block),
            frozenset(bindings.items()), tuple(axes))


def _access_facts(a: Access, target: Target, block: tuple[int, int], bindings: dict[str, int],
                  axes: tuple[str, ...]) -> tuple:
    """(coalescing, reuse, partition camping) of one access, computed once per `_facts_key`: a kernel is
    analysed by each pass and for each candidate block, and compiled again by many commands, and its
    accesses are the same values each time. Copies are handed out (analyze_kernel extends the reuse list)."""
    key = _facts_key(a, target, block, bindings, axes)
    if key not in _FACTS:
        if len(_FACTS) >= _MAX_FACTS:
            _FACTS.clear()
        _FACTS[key] = (analyse_request(a, target, block, bindings), analyse_reuse(a, target, block, bindings, axes),
                       partition_camping(a, target, block, bindings))
    return copy.deepcopy(_FACTS[key])


__all__ = ["analyze_kernel", "KernelAnalysis", "AccessReport", "BDIM"]
