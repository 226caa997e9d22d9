"""The inputs of an emulated check: random values of each parameter's type (floats of either sign away
from zero, small integers, valid indices for gathers), the contents of file-scope variables."""
from __future__ import annotations

import os

import numpy as np

from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel


def _element(base_type: str):
    """The emulator's type of an array element (None: not one it knows), for the environment's types too
    (`__half`, `half2`, `uint32_t`)."""
    from gpgpu_opt.emulator.values import type_from_names
    try:
        return type_from_names(base_type.split())
    except Exception:  # noqa: BLE001 - not a type the emulator knows: it reports that when it runs
        return None


def _dtype(base_type: str):
    """The numpy dtype of an array of `base_type` (a vector type's: its components'), from the CUDA type
    table through the emulator's types."""
    t = _element(base_type)
    t = getattr(t, "base", t)
    return t.dtype.type if t is not None else np.float32


def _words(base_type: str) -> int:
    """Scalar words per element: a vector type's components (`half2`: 2)."""
    return getattr(_element(base_type), "n", 1)


def _representable(values: np.ndarray, base_type: str) -> np.ndarray:
    """Values of the element type: bfloat16 (held in float32) rounded to its 8 bits."""
    t = _element(base_type)
    t = getattr(t, "base", t)
    if t is not None and getattr(t, "is_bfloat16", False):
        from gpgpu_opt.frontend.math_impl import to_bfloat16
        return to_bfloat16(values)
    return values


def make_arguments(kernel: Kernel, sizes: dict[str, int | float], extents: dict[str, int], rng,
                   index_bounds: dict[str, int] | None = None, poisoned: frozenset[str] = frozenset()) -> dict:
    """Random inputs: floats of either sign away from zero, small positive integers, and for the index
    arrays of gathers (`index_bounds`) valid indices of the gathered array. `poisoned`: floating arrays the
    caller fills with NaN: they are NaN already, and the generator is moved past the draws they would have
    taken, so that every other array holds what it would have held."""
    args = {}
    index_bounds = index_bounds or {}
    check_capacity(kernel, sizes, {p.name: _words_of(kernel, p, extents) for p in kernel.params if p.is_pointer})
    for p in kernel.params:
        if p.is_pointer:
            layout = kernel.struct_layouts.get(p.base_type)  # an array of structs: its fields, flat
            dtype = _dtype(layout.field_type if layout else p.base_type)
            n = _words_of(kernel, p, extents)
            if p.name in index_bounds:
                args[p.name] = rng.integers(0, index_bounds[p.name], n).astype(dtype)
            elif np.issubdtype(dtype, np.floating) and p.name in poisoned and skip_signed_uniform(rng, n):
                args[p.name] = np.full(n, np.nan, dtype)
            elif np.issubdtype(dtype, np.floating):
                args[p.name] = _representable(_signed_uniform(rng, n, dtype), p.base_type)
            else:
                args[p.name] = rng.integers(1, 16, n).astype(dtype)
        elif p.name in sizes:
            args[p.name] = sizes[p.name]
        elif p.base_type in ("float", "double"):
            args[p.name] = float(rng.uniform(0.5, 1.5))
        else:
            raise CompileError(f"kernel '{kernel.name}': no value for parameter '{p.name}' (use --size {p.name}=N)")
    args.update(file_variable_contents(kernel, rng))
    return args


def _words_of(kernel: Kernel, p, extents: dict[str, int]) -> int:
    """The scalar words of the array parameter `p` at these extents (an array of structs: its fields, flat)."""
    layout = kernel.struct_layouts.get(p.base_type)
    return extents[p.name] * _words(p.base_type) if not layout else -(-extents[p.name] // layout.stride) * layout.stride


def emulator_capacity() -> int:
    """The most memory the emulated arrays of one check may take: a quarter of this machine's, at most 8 GiB.
    (A check holds each array about three times, the inputs and each run's copy, and draws values in doubles.)"""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 8 << 30
    return min(8 << 30, physical // 4)


def check_capacity(kernel: Kernel, sizes: dict, words: dict[str, int]) -> None:
    """A CompileError, before anything is allocated, where the arrays at these sizes do not fit."""
    need = sum(3 * n * np.dtype(_dtype(_param(kernel, name).base_type)).itemsize + 8 * n for name, n in words.items())
    if need > emulator_capacity():
        given = ", ".join(f"{k}={v}" for k, v in sizes.items()) or "these sizes"
        raise CompileError(f"kernel '{kernel.name}': at {given} its arrays take {_gib(need)} to emulate, more "
                           f"than the {_gib(emulator_capacity())} the emulator may hold; check smaller sizes")


def _param(kernel: Kernel, name: str):
    return next(p for p in kernel.params if p.name == name)


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n < 1 << 40 else f"{n / (1 << 40):.1f} TiB"


def _signed_uniform(rng, n: int, dtype) -> np.ndarray:
    """n floats of `dtype` from 0.5 to 1.5 in magnitude, each of random sign: the values and the draws of
    `uniform(0.5, 1.5, n).astype(dtype) * choice([-1, 1], n).astype(dtype)` (choice draws integers(0, 2, n)
    and takes -1 at 0, 1 at 1), with the signs taken in `dtype` at once and multiplied in place: fewer passes
    over arrays that may hold millions of elements (of which the emulated blocks may read a few)."""
    values = rng.uniform(0.5, 1.5, n).astype(dtype)
    np.multiply(values, np.array([-1, 1], dtype).take(rng.integers(0, 2, n)), out=values)
    return values


def skip_signed_uniform(rng, n: int) -> bool:
    """Move a PCG64 generator (default_rng's) past what _signed_uniform(rng, n, ...) draws, without drawing:
    n 64-bit outputs for the uniform values, then n 32-bit ones for the signs (integers(0, 2) takes the top
    bit of each, never rejecting), which come from the generator's held half (`has_uint32`) first, then
    from 64-bit outputs, low half first, the high half held. False (nothing done) for another generator."""
    bits = rng.bit_generator
    if not hasattr(bits, "advance") or bits.state.get("bit_generator") != "PCG64":
        return False
    if n == 0:
        return True
    before = bits.state
    halves = n - before["has_uint32"]          # 32-bit draws past the held one
    outputs = n + (halves + 1) // 2            # 64-bit outputs: the uniforms', the signs'
    last_high = before["uinteger"]             # what the generator holds last (held, or used and kept)
    if halves:
        bits.advance(outputs - 1)
        last_high = int(bits.random_raw()) >> 32   # the last output's high half: held if `halves` is odd
    else:
        bits.advance(outputs)
    state = bits.state                         # advance forgets the held half: put back what the draws leave
    state["has_uint32"], state["uinteger"] = halves % 2, last_high
    bits.state = state
    return True


def file_variable_contents(kernel: Kernel, rng) -> dict:
    """Random contents of the file-scope `__constant__`/`__device__` variables the kernel uses (the same
    for the naive and the optimized run). One the emulator cannot hold gets none: its run says so."""
    from gpgpu_opt.emulator.errors import UnsupportedConstruct
    from gpgpu_opt.emulator.file_scope import element_dtype, words

    out = {}
    for name, variable in sorted(kernel.file_variables.items()):
        try:
            dtype, n = element_dtype(variable), words(variable)
        except UnsupportedConstruct:
            continue
        if np.issubdtype(dtype, np.floating):
            out[name] = _signed_uniform(rng, n, dtype)
        else:
            out[name] = rng.integers(1, 16, n).astype(dtype)
    return out
