"""What the user asked a compile for: built once (by the command line, tune, verify or a test) and the same
for every kernel and every pass. Frozen: a pass reads its options, it never changes them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Iterable, Mapping

from gpgpu_opt.targets import Target


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


#: `--matmul-precision`'s words (CompileOptions.matmul_precision).
MATMUL_PRECISIONS = ("ieee", "tf32x3", "tf32")


@dataclass(frozen=True)
class CompileOptions:
    """One compile's options.

    `passes`: the passes that run, in order (a pass may leave a kernel to a later one); `named`: those named
    explicitly in `--passes` (empty for the default pipeline): a pass the target does not need by default
    runs when named. `bindings`: `--bind` sizes. `merge_request`: `--merge` (None: the merge pass's model
    chooses); `vector_width`: `--vector-width` (1: no widening; None: the vectorize pass's model).
    `assume_restrict`: no pointer parameters alias (nvcc's --restrict). `validate`: emulate each rewritten
    kernel against the naive one before keeping it. `strict`: a pass's internal error raises instead of
    rolling the pass back (None: the `GPGPU_OPT_STRICT` environment decides). `keep_loops`: grid-stride
    kernels whose loops stay as written. `dump_dir`: where each pass's kernel is written. `self_check`:
    check each pass's kernel against the naive one on a small launch. `block_override`: the naive block
    to assume instead of the launch sites'."""
    target: Target
    passes: tuple[str, ...] = ()
    named: frozenset[str] = frozenset()
    bindings: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    merge_request: MergeRequest | None = None
    vector_width: int | None = None
    assume_restrict: bool = False
    validate: bool = False
    strict: bool | None = None
    keep_loops: frozenset[str] = frozenset()
    dump_dir: str | None = None
    self_check: bool = False
    block_override: tuple[int, int] | None = None
    #: `--matmul-precision`: what a float matrix product may run at, named like cuBLAS's compute types:
    #: 'ieee' (FP32 on CUDA cores), 'tf32x3' (three TF32 tensor-core products: FP32-class accuracy), 'tf32'.
    matmul_precision: str = "ieee"

    def __post_init__(self):
        # Frozen all the way down: a tuple of passes, a read-only copy of the bindings.
        object.__setattr__(self, "passes", tuple(self.passes))
        object.__setattr__(self, "named", frozenset(self.named))
        object.__setattr__(self, "bindings", MappingProxyType(dict(self.bindings or {})))
        object.__setattr__(self, "keep_loops", frozenset(self.keep_loops))
        if self.matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"--matmul-precision: one of {', '.join(MATMUL_PRECISIONS)}, not "
                             f"'{self.matmul_precision}'")

    @classmethod
    def of(cls, target: Target, passes: Iterable[str], bindings: Mapping[str, int] | None = None,
           **options) -> "CompileOptions":
        """Options for `passes`, a list or a PassList (whose `named` it keeps unless given)."""
        options.setdefault("named", getattr(passes, "named", frozenset()))
        return cls(target, tuple(passes), bindings=bindings or {}, **options)

    def but(self, **changes) -> "CompileOptions":
        """These options with some changed (a compile redone with more loops kept, say)."""
        return replace(self, **changes)
