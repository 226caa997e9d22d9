"""The pass registry: the pass packages, in pipeline order, each declared once by the record in its package
(`PASS`, a pass_api.record.PassRecord). Adding a pass is its package and one line of `PACKAGES`.

A pass that cannot prove a transformation safe returns the kernel unchanged and records why with
`ctx.log.skip(...)`; the pipeline rolls back a pass that raises or breaks the kernel's sanity checks.
"""
from __future__ import annotations

import functools
import importlib
from typing import Callable

from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.lowering import Lowering
from gpgpu_opt.pass_api.record import PassRecord

PassFunction = Callable[[Kernel, PassContext], Kernel]

#: The pass packages under gpgpu_opt/passes/, in the order they run: the paper's (vectorize before coalesce;
#: merge, prefetch, partition after), after what every other pass builds on (pointer qualifiers from the
#: alias facts, then the normal form; grid_stride canonicalizes the program's loops before the kernel passes).
PACKAGES = (
    "restrict",
    "normalize",
    "grid_stride",
    "vectorize",
    "coalesce",
    "merge",
    "prefetch",
    "partition",
)


@functools.cache
def records() -> tuple[PassRecord, ...]:
    """Every pass's record, in pipeline order."""
    found = tuple(importlib.import_module(f"{__name__}.{package}").PASS for package in PACKAGES)
    names = [r.name for r in found]
    if len(set(names)) != len(names):
        raise ValueError(f"two passes share a name: {names}")
    return found


def record(name: str) -> PassRecord:
    return next(r for r in records() if r.name == name)


def pipeline_order() -> list[str]:
    """The kernel passes `--passes` may name, in the order they run."""
    return [r.name for r in records() if r.in_pipeline]


def registered_passes() -> dict[str, PassFunction]:
    """Each kernel pass's driver by name, with the claims of the later passes it asks wired in (so that no
    pass package imports another)."""
    passes = {}
    for r in records():
        if not r.in_pipeline:
            continue
        later = {other: record(other).claim for other in r.asks if record(other).claim is not None}
        passes[r.name] = functools.partial(r.run, later=later) if later else r.run
    return passes


@functools.cache
def lowering() -> Lowering:
    """The lowering of every schedule entry, from the steps the passes register beside their entries."""
    steps: dict = {}
    for r in records():
        for entry, step in r.steps.items():
            if entry in steps:
                raise ValueError(f"two passes lower the schedule's '{entry}' entry")
            steps[entry] = step
    return Lowering(steps)


def program_steps() -> list[PassRecord]:
    """The passes that canonicalize the whole program before the kernel passes run."""
    return [r for r in records() if r.program_step is not None]


def form_passes() -> frozenset[str]:
    """Passes whose changes are a form for the later passes, not speed (PassRecord.form)."""
    return frozenset(r.name for r in records() if r.form)


def proved_without_emulation() -> frozenset[str]:
    """Passes whose safety does not rest on compile's emulated check (PassRecord.proved_without_emulation)."""
    return frozenset(r.name for r in records() if r.proved_without_emulation)


def runs_on_3d_blocks(name: str, kernel_reads_z: bool) -> bool:
    """May pass `name` run on a kernel whose blocks may have several threads in z? (`kernel_reads_z`: the
    kernel reads the z axis itself, not only through a helper.)"""
    three_d = record(name).three_d
    return three_d == "always" or (three_d == "own_z" and kernel_reads_z)


class PassList(list):
    """The passes a compile runs, in order, and `named`: those the user named in `--passes` (a pass that the
    target does not need by default, such as partition on a GPU that hashes addresses, runs when named)."""

    def __init__(self, passes=(), named=frozenset()):
        super().__init__(passes)
        self.named = frozenset(named)


def parse_pass_list(text: str | None) -> PassList:
    """`--passes` value: 'none', a comma list, or None for the default pipeline. Order follows the
    pipeline; the foundation passes (restrict, normalize) always run first when any other pass runs. A pass
    left out of the list does not run; the ones in it are also `named` (the default pipeline names none)."""
    order = pipeline_order()
    if text is None:
        return PassList(order)
    if text.strip() == "none":
        return PassList()
    wanted = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in order]
    if unknown:
        raise ValueError(f"unknown pass '{unknown[0]}' (passes: {', '.join(order)})")
    named = frozenset(wanted)
    if wanted:
        wanted += [r.name for r in records() if r.foundation and r.name not in wanted]
    return PassList((p for p in order if p in wanted), named)
