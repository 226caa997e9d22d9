"""What a pass knows besides the kernel, in three parts: the compile's options (frozen, passes/options.py),
the kernel's facts (frozen, passes/facts.py), and the decision log a pass writes to."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, get_args

from gpgpu_opt.diagnostics import Diagnostics, Location
from gpgpu_opt.pass_api.facts import KernelFacts
from gpgpu_opt.pass_api.options import CompileOptions, MergeRequest

#: What a pass did about a subject: transformed it, or left it (with a reason either way).
Action = Literal["applied", "skipped"]
ACTIONS: tuple[str, ...] = get_args(Action)

if TYPE_CHECKING:
    from gpgpu_opt.kernel import Kernel
    from gpgpu_opt.pass_api.schedule import Schedule


@dataclass(frozen=True)
class Decision:
    pass_name: str
    action: Action
    subject: str                # what it is about, e.g. "A[row * n + k]"
    reason: str
    location: Location | None = None
    #: The kernel's meaning restated in a form for the later passes (pointer qualifiers, an induction variable
    #: in closed form): alone, no transformation.
    restatement: bool = False

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise ValueError(f"a decision is one of {', '.join(ACTIONS)}, not '{self.action}'")

    @property
    def applied(self) -> bool:
        return self.action == "applied"

    def as_dict(self) -> dict:
        d = {"pass": self.pass_name, "action": self.action, "subject": self.subject, "reason": self.reason}
        if self.location:
            d["line"] = self.location.line
        return d


@dataclass
class DecisionLog:
    """The decisions made about one kernel, in order; `pass_name` is the pass running now (the pipeline
    sets it), under whose name applied() and skip() record."""
    diagnostics: Diagnostics
    kernel_name: str = ""
    pass_name: str = ""
    decisions: list[Decision] = field(default_factory=list)

    def applied(self, subject: str, reason: str, location: Location | None = None,
                restatement: bool = False) -> None:
        self.decisions.append(Decision(self.pass_name, "applied", subject, reason, location, restatement))

    def skip(self, subject: str, reason: str, location: Location | None = None) -> None:
        """Record a transformation not made, with a `note:` on stderr."""
        self.decisions.append(Decision(self.pass_name, "skipped", subject, reason, location))
        self.diagnostics.note(f"{self.pass_name}: {subject}: {reason}", location, kernel=self.kernel_name,
                              pass_name=self.pass_name)

    def record(self, pass_name: str, subject: str, reason: str, location: Location | None = None) -> None:
        """An applied decision of a step outside the pass list (grid_stride's canonical form, say)."""
        self.decisions.append(Decision(pass_name, "applied", subject, reason, location))

    def as_dicts(self) -> list[dict]:
        return [d.as_dict() for d in self.decisions]


@dataclass
class PassContext:
    """The options, the kernel's facts, and its log, for the kernel named `kernel_name`."""
    options: CompileOptions
    facts: KernelFacts
    log: DecisionLog
    kernel_name: str = ""
    #: What the scheduling passes decided for the kernel so far (passes/schedule.py; None: a pass run alone).
    schedule: "Schedule | None" = None
    #: The lowering (pass_api/lowering.py: the passes' steps, gathered by the registry), which the pipeline
    #: hands over: it calls the passes' builders, so a pass reaches it here rather than importing them.
    lowering: "Callable[[Schedule, PassContext], Kernel] | None" = None
    #: Analyses of the kernels the passes rewrite, kept by whoever computes them (`KernelInfo.of` in
    #: rewriting/kernel_info.py) so that a kernel unchanged since is not analysed again.
    analyses: dict = field(default_factory=dict, repr=False, compare=False)

    def lower(self, schedule: "Schedule") -> "Kernel":
        """The kernel `schedule` describes, generated from its source (a new copy)."""
        if self.lowering is None:
            raise RuntimeError("no lowering was handed to this context (the pipeline sets it)")
        return self.lowering(schedule, self)


__all__ = ["ACTIONS", "Action", "CompileOptions", "Decision", "DecisionLog", "KernelFacts", "MergeRequest",
           "PassContext"]
