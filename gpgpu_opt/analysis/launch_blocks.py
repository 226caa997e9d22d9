"""The block every launch of a kernel gives, where the host code proves it: the launch sites' values
(launch.py) and the proof that they are every launch of the kernel (aliasing.unread_launches)."""
from __future__ import annotations

from gpgpu_opt.analysis.aliasing import unread_launches
from gpgpu_opt.frontend.program import Program
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch.sites import naive_launch


def proved_block(program: Program, kernel: Kernel) -> tuple[tuple[int | None, int | None], str]:
    """The block's (x, y) that every launch of the kernel gives, and where that is proved; a component
    None where it is not (then the text says why). Proved: the file launches the kernel, names it nowhere
    but at its launches, and every site's block evaluates to the same value (literals, macros, host
    variables and dim3 members whose value at the site is known)."""
    found = naive_launch(program, kernel, {})
    if found is None:
        return (None, None), f"the file does not launch '{kernel.name}', so its blocks may have any size"
    unread = unread_launches(kernel, program)
    if unread is not None:
        return (None, None), f"not every launch of '{kernel.name}' can be read: {unread}"
    where = f"every launch of '{kernel.name}' in the file ({found.describe()})"
    if None in found.block[:2]:
        why = found.unknown[0][1] if found.unknown else "the sites disagree or cannot be evaluated"
        return found.block[:2], f"{where}, where a block component is not known ({why}),"
    return found.block[:2], where


__all__ = ["proved_block"]
