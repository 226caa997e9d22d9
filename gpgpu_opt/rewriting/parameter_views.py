"""The kernel as the passes see it where the user's parameters are not flat arrays, and back.

A struct of arrays passed by value is split into its fields (member_arrays.py), then arrays of arrays are
made flat (flat_arrays.py). `start` is what the passes rewrite; `declared` writes a version back with the
parameters as the user declared them; `emulated` is the version the emulated check compares with
`emulated_naive`: each as written, but for a struct's field reads, which are parameters there (the emulator
holds arrays, not structs of them: member_arrays.emulated)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting import flat_arrays, member_arrays


@dataclass(frozen=True)
class ParameterViews:
    naive: Kernel
    members: member_arrays.MemberArrays | None
    flat: flat_arrays.FlatArrays | None

    @classmethod
    def of(cls, kernel: Kernel) -> "ParameterViews | str | None":
        """The views of `kernel`; None when it needs none; else why a use keeps it as written."""
        members = member_arrays.split(kernel)
        if isinstance(members, str):
            return f"its struct of arrays is not read field by field ({members})"
        flat = flat_arrays.flatten(kernel if members is None else members.kernel)
        if isinstance(flat, str):
            return f"its arrays of arrays are not read element by element ({flat})"
        if members is None and flat is None:
            return None
        return cls(kernel, members, flat)

    @property
    def start(self) -> Kernel:
        return self.flat.kernel if self.flat is not None else self.members.kernel

    @cached_property
    def emulated_naive(self) -> Kernel:
        """The naive kernel as the emulator runs it (one object: the check finds it among the versions)."""
        return member_arrays.emulated(self.naive)

    def emulated(self, version: Kernel) -> Kernel:
        """A version (of `start`) as it is written, seen as the emulator runs it."""
        return member_arrays.emulated(self.declared(version))

    def declared(self, version: Kernel) -> Kernel:
        """A version (of `start`) with the parameters as the user declared them."""
        if self.flat is not None:
            version = flat_arrays.rewrapped(version, self.naive if self.members is None else self.members.kernel,
                                            self.flat)
        return version if self.members is None else member_arrays.rewrapped(version, self.naive, self.members)
