"""The record that declares a pass: everything the registry, the pipeline, the compile's check and the report
need to know of it, in one place, in the pass's own package (`PASS = PassRecord(...)` in its `__init__`).

The registry (`gpgpu_opt/passes/__init__.py`) lists the pass packages in pipeline order and reads their
records; nothing outside a pass's package names it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Mapping

if TYPE_CHECKING:
    from gpgpu_opt.kernel import Kernel
    from gpgpu_opt.pass_api.context import PassContext

    PassFunction = Callable[[Kernel, PassContext], Kernel]
    #: A schedule entry's lowering step: (kernel lowered so far, context, entry) -> the kernel with the step.
    Step = Callable[[Kernel, PassContext, object], Kernel]
    #: A later pass's answer to an earlier one: why it will take the kernel, or None.
    Claim = Callable[..., "str | None"]

#: Where a pass may run on a kernel whose blocks may have several threads in z (rewriting/three_d.py):
#: 'always' (it changes no thread's work: pointer qualifiers), 'own_z' (only where the kernel itself reads
#: the z axis: it marches z), 'never' (it retiles x and y of blocks of one z).
ThreeD = Literal["always", "own_z", "never"]


@dataclass(frozen=True)
class ProgramStep:
    """A canonicalization of the whole program that runs before the kernel passes (grid-stride loops as one
    thread per element, say): `canonicalize(program, options, diagnostics, reload) -> (program, canonical)`,
    `canonical` the kernels it changed by name (each with `describe()`), `reload(text)` the program re-read
    from a rewritten text. A kernel no later pass built on is compiled again with its form kept as written
    (`CompileOptions.keep_loops`)."""
    canonicalize: Callable


@dataclass(frozen=True)
class PassRecord:
    """One pass. `name` is what `--passes` takes and the report shows; `run(kernel, ctx) -> kernel` its driver.

    - `summary`: one line for `--help` and the report.
    - `foundation`: it runs whenever any other pass runs (the forms every other pass builds on).
    - `form`: what it changes is a form for the later passes, not speed: a kernel changed only by such passes
      is written as the user wrote it, and a canonicalized form needs another pass to pay.
    - `proved_without_emulation`: its change rests on a proof compile's emulated check could not confirm
      anyway (the alias proof: the emulator gives every pointer its own buffer), so a kernel changed only by
      such passes is written even where the check cannot run. Keep these minimal.
    - `three_d`: where it may run on a kernel whose blocks may be 3-D (ThreeD above).
    - `steps`: the lowering step of each schedule entry it records (pass_api/schedule.py), by entry name.
    - `claim`: its answer to earlier passes that ask whether it will take a kernel (`claim(kernel, ctx,
      info)`: the reason, or None); `asks`: the later passes whose claims this pass's run receives
      (`run(kernel, ctx, later={name: claim})`).
    - `program_step`: a whole-program canonicalization it runs before the kernel passes.
    - `in_pipeline`: a kernel pass `--passes` lists (False: only a program step).
    """
    name: str
    summary: str
    run: "PassFunction | None" = None
    foundation: bool = False
    form: bool = False
    proved_without_emulation: bool = False
    three_d: ThreeD = "never"
    steps: Mapping[str, "Step"] = field(default_factory=dict)
    claim: "Claim | None" = None
    asks: tuple[str, ...] = ()
    program_step: ProgramStep | None = None

    @property
    def in_pipeline(self) -> bool:
        return self.run is not None

    def as_dict(self) -> dict:
        """What the report says of the pass."""
        return {"name": self.name, "summary": self.summary, "form": self.form,
                "proved_without_emulation": self.proved_without_emulation, "three_d": self.three_d,
                "schedules": sorted(self.steps)}


__all__ = ["PassRecord", "ProgramStep", "ThreeD"]
