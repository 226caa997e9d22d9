"""Errors raised by the CPU emulator. Every message names the kernel, and where it applies the array,
the index, the thread (block and thread coordinates) and the source line `file:line`."""
from __future__ import annotations


class EmulationError(Exception):
    """Base class of everything the emulator reports about a kernel."""


class OutOfBoundsError(EmulationError):
    """A global, shared or local array index outside the array (or a dimension of it)."""


class RaceError(EmulationError):
    """Two threads touch the same word without a barrier between them (at least one writes)."""


class DivergentBarrierError(EmulationError):
    """`__syncthreads()` (or a full-warp `__syncwarp()`/shuffle) reached by only some of the threads
    that must reach it."""


class UnsupportedConstruct(EmulationError):
    """A construct the emulator does not implement; never evaluated approximately."""


class MisalignedAccessError(EmulationError):
    """A vector access (`((float4 *) A)[i]`) whose byte offset is not a multiple of its alignment."""


class UndefinedBehaviorError(EmulationError):
    """Integer division by zero, a shuffle from an inactive lane, an uninitialised pointer, ..."""


def where(node) -> str:
    """`file:line` of a c_ast node, or '?' when it has no coordinates."""
    coord = getattr(node, "coord", None)
    if coord is None:
        return "?"
    return f"{coord.file}:{coord.line}"
