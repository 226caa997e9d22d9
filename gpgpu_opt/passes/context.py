"""What a pass knows besides the kernel: the target, the naive launch, bindings, and the decision log."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pycparser import c_ast

from gpgpu_opt.analysis.aliasing import AliasFacts
from gpgpu_opt.diagnostics import Diagnostics, Location
from gpgpu_opt.targets import Target

if TYPE_CHECKING:
    from gpgpu_opt.passes.schedule import Schedule


@dataclass
class Decision:
    pass_name: str
    action: str                 # 'applied' or 'skipped'
    subject: str                # what it is about, e.g. "A[row * n + k]"
    reason: str
    location: Location | None = None

    def as_dict(self) -> dict:
        d = {"pass": self.pass_name, "action": self.action, "subject": self.subject, "reason": self.reason}
        if self.location:
            d["line"] = self.location.line
        return d


@dataclass(frozen=True)
class MergeRequest:
    """`--merge x=NX,y=NY`: the merge factors the user (or `tune`) asks for instead of the model's choice.
    A factor is outputs per thread in that dimension; 1 keeps one output per thread there."""
    x: int = 1
    y: int = 1

    @classmethod
    def parse(cls, text: str) -> "MergeRequest":
        factors = {"x": 1, "y": 1}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            name = name.strip().lower()
            if not sep or name not in factors or not value.strip().isdigit() or int(value) < 1:
                raise ValueError(f"--merge: expected x=NX,y=NY with positive integers, got '{text}'")
            factors[name] = int(value)
        return cls(**factors)

    def __str__(self) -> str:
        return f"x={self.x},y={self.y}"


@dataclass
class PassContext:
    target: Target
    diagnostics: Diagnostics
    #: The naive launch's block shape (the kernel's meaning may depend on it) and known sizes.
    naive_block: tuple[int, int]
    bindings: dict[str, int] = field(default_factory=dict)
    #: The program's `__device__` helpers by name (a pass may look into the ones the kernel calls).
    device_functions: dict[str, c_ast.FuncDef] = field(default_factory=dict)
    kernel_name: str = ""
    #: Whether the kernel's pointer parameters may alias (None: not looked at).
    aliasing: AliasFacts | None = None
    pass_name: str = ""
    #: The passes this compile runs (a pass may leave a kernel to a later one).
    pass_names: list[str] = field(default_factory=list)
    #: The passes named explicitly in `--passes` (empty for the default pipeline): a pass the target does
    #: not need by default runs when named.
    requested: frozenset[str] = frozenset()
    #: Merge factors asked for with `--merge` (None: the merge pass's model chooses).
    merge_request: MergeRequest | None = None
    #: The naive thread space where the program states it (`#define globalDimX 4096`), per axis, else None.
    global_space: tuple[int | None, int | None] = (None, None)
    #: Whether the program launches the kernel with `naive_block` (else it is a default the launch may
    #: narrow, so an unguarded kernel's thread space is only known to be whole blocks of some divisor).
    naive_block_known: bool = True
    #: Whether the file launches the kernel: its sites then call the new launch's helpers with whatever
    #: block they use, and no run-time contract checks that block (launch_contract.launch_assumptions).
    launched_in_file: bool = False
    #: What the scheduling passes decided for the kernel so far (passes/schedule.py; None: a pass run alone).
    schedule: "Schedule | None" = None
    #: Integer parameters n that every launch site provably covers with at least n threads in x
    #: (`(n + 255) / 256` blocks of 256): a grid-stride loop bounded by n visits only naive threads' work.
    launch_covers: frozenset[str] = frozenset()
    #: Axis -> a launch site whose grid rounds down along it (launch.truncating_grids): the naive threads
    #: may stop short of the guard there, so a new grid must not round up past them.
    grid_rounds_down: dict[str, str] = field(default_factory=dict)
    #: Pointer parameter -> the byte alignment every launch gives it (analysis/alignment.py).
    alignment: dict[str, int] = field(default_factory=dict)
    #: `--vector-width`: elements per widened access (1: no widening; None: the vectorize pass's model).
    vector_width: int | None = None
    #: The block's (x, y) that every launch of the kernel in the file gives, proved (launch.proved_block);
    #: a component None where it is not proved, and `launch_block_where` says where, or why not.
    launch_block: tuple[int | None, int | None] = (None, None)
    launch_block_where: str = "the launches of the kernel are not known"
    decisions: list[Decision] = field(default_factory=list)

    def stated_space_tiled_by(self, covers: tuple[int, int]) -> bool:
        """Whether the program states its thread space and blocks covering `covers` naive threads tile it
        exactly (a launch of such blocks has no extra threads to stop)."""
        return all(stated is not None and stated % n == 0 for stated, n in zip(self.global_space, covers))

    def applied(self, subject: str, reason: str, location: Location | None = None) -> None:
        self.decisions.append(Decision(self.pass_name, "applied", subject, reason, location))

    def skip(self, subject: str, reason: str, location: Location | None = None) -> None:
        """Record a transformation not made, with a `note:` on stderr."""
        self.decisions.append(Decision(self.pass_name, "skipped", subject, reason, location))
        self.diagnostics.note(f"{self.pass_name}: {subject}: {reason}", location, kernel=self.kernel_name,
                              pass_name=self.pass_name)
