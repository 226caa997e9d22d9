"""`Dim3`: a block, a grid or a count of threads per block in x, y and z, as CUDA's `dim3` is (y and z
default to 1).

One type for every block the compiler reasons about (the naive launch's, a rewritten kernel's, a staging's,
the outputs a block covers), so that a z other than 1 is never dropped on the way: a pair `(x, y)` given
where a Dim3 is wanted means z = 1 (`Dim3.of`), and compares equal to the Dim3 it means.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union


@dataclass(frozen=True)
class Dim3:
    x: int
    y: int = 1
    z: int = 1

    def __post_init__(self):
        for axis in ("x", "y", "z"):
            value = getattr(self, axis)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"Dim3.{axis} must be an int, not {value!r}")

    @classmethod
    def of(cls, value: "Dim3Like") -> "Dim3":
        """A Dim3 from a Dim3, an int (x) or a sequence of one to three ints."""
        if isinstance(value, Dim3):
            return value
        if isinstance(value, int):
            return cls(value)
        parts = tuple(value)
        if not 1 <= len(parts) <= 3:
            raise ValueError(f"a dim3 has one to three components, not {parts!r}")
        return cls(*parts)

    @property
    def xy(self) -> tuple[int, int]:
        return self.x, self.y

    @property
    def count(self) -> int:
        """x * y * z: the threads of a block, the blocks of a grid."""
        return self.x * self.y * self.z

    def __iter__(self):
        return iter((self.x, self.y, self.z))

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index):
        return (self.x, self.y, self.z)[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, Dim3):
            return (self.x, self.y, self.z) == (other.x, other.y, other.z)
        if isinstance(other, tuple) and 1 <= len(other) <= 3 and all(isinstance(v, int) for v in other):
            return self == Dim3.of(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.x, self.y, self.z))

    def __str__(self) -> str:
        return f"{self.x}x{self.y}" if self.z == 1 else f"{self.x}x{self.y}x{self.z}"

    def as_list(self) -> list[int]:
        """For reports: [x, y], or [x, y, z] where z is not 1."""
        return [self.x, self.y] if self.z == 1 else [self.x, self.y, self.z]


Dim3Like = Union[Dim3, int, Iterable[int]]

__all__ = ["Dim3", "Dim3Like"]
