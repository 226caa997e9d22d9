"""Instruments run around each pass (in the manner of TVM's PassInstrument): the checks that may roll a pass
back, and the dumps of what each kept pass left. The pipeline runs them; a pass knows nothing of them.

`after_pass(name, kernel, ctx)` sees the kernel a pass returned and raises SanityError where it must not be
kept (the pipeline then rolls the pass back, its schedule too); `kept(name, kernel, count)` sees each pass
that was kept, the `count`-th so far.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Protocol

from gpgpu_opt.check.sanity import SanityError, check_kernel
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext


class PassInstrument(Protocol):
    def after_pass(self, name: str, kernel: Kernel, ctx: PassContext) -> None: ...

    def kept(self, name: str, kernel: Kernel, count: int) -> None: ...


class SanityCheck:
    """The kernel still parses as the C the emulator and nvcc read (check.sanity), and its grid does not
    start threads past the naive launch's where that launch's grid rounds down."""

    def after_pass(self, name: str, kernel: Kernel, ctx: PassContext) -> None:
        check_kernel(kernel.funcdef, kernel.struct_layouts)
        overreach = grid_overreach(kernel, ctx)
        if overreach:
            raise SanityError(overreach)

    def kept(self, name: str, kernel: Kernel, count: int) -> None:
        pass


@dataclass
class SelfCheck:
    """`--self-check`: each pass's kernel emulated against the naive one on a small launch; `check(kernel)`
    returns None where it computes what the naive kernel does, else why not."""
    check: Callable[[Kernel], "str | None"]

    def after_pass(self, name: str, kernel: Kernel, ctx: PassContext) -> None:
        problem = self.check(kernel)
        if problem:
            raise SanityError(f"self-check failed: {problem}")

    def kept(self, name: str, kernel: Kernel, count: int) -> None:
        pass


@dataclass
class Dump:
    """`--dump-passes DIR`: each kept pass's kernel written to DIR as `<kernel>.<NN>.<pass>.cu`."""
    directory: str
    kernel_name: str

    def after_pass(self, name: str, kernel: Kernel, ctx: PassContext) -> None:
        pass

    def kept(self, name: str, kernel: Kernel, count: int) -> None:
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, f"{self.kernel_name}.{count:02d}.{name}.cu"), "w") as fh:
            fh.write(kernel_source(kernel.funcdef))


def grid_overreach(kernel: Kernel, ctx: PassContext) -> str | None:
    """Why the kernel's grid could start threads past the naive launch's, or None. Blocks covering more
    naive threads than a naive block round the grid up; past a grid that rounds down, such threads can pass
    the guard and compute outputs the naive launch never did."""
    if kernel.launch is None:
        return None
    for dim, axis in enumerate("xy"):
        covers = kernel.launch.outputs_per_block[dim]
        if axis in ctx.facts.grid_rounds_down and ctx.facts.naive_block[dim] % covers:
            return (f"{ctx.facts.grid_rounds_down[axis]} rounds down, so the naive threads may stop short of the "
                    f"guard; blocks covering {covers} naive threads in {axis} would round the grid up past them")
    return None


__all__ = ["Dump", "PassInstrument", "SanityCheck", "SelfCheck", "grid_overreach"]
