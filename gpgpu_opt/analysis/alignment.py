"""How far each pointer parameter of a kernel is known to be aligned, in bytes, at every launch.

`cudaMalloc` and friends return addresses aligned to 256 bytes. A launch argument that names such a buffer
(aliasing.py's `read_launches`: allocated in the launching function or a file-scope buffer, never reassigned)
is 256-byte aligned; `buf + k` or `&buf[k]` with an integer literal k, where `buf` is declared a pointer to
the parameter's element type, is aligned to the largest power of two dividing both 256 and k * element size.
Anything else (no launch in the file, a launch hidden in a macro, a parameter of the launching function) is
only known to be aligned to its element size, as C requires of any pointer.
"""
from __future__ import annotations

import re

from gpgpu_opt.analysis.aliasing import read_launches
from gpgpu_opt.cuda_types import element_size
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch.sites import host_text

#: What cudaMalloc guarantees.
ALLOCATION_ALIGNMENT = 256

_OFFSET = re.compile(r"(?:\(\s*[\w\s]+\*\s*\)\s*)?(?:&\s*(?P<a>[A-Za-z_]\w*)\s*\[\s*(?P<ai>\d+)\s*\]|"
                     r"(?P<p>[A-Za-z_]\w*)(?:\s*\+\s*(?P<pi>\d+))?)")


def element_bytes(base_type: str) -> int:
    """Bytes of one element (1 for a type the table does not know: the weakest alignment claim)."""
    return element_size(base_type) or 1


def base_alignment(kernel: Kernel, program) -> dict[str, int]:
    """Pointer parameter -> the alignment in bytes every launch site in the file gives it (at least the
    element size)."""
    pointers = [p for p in kernel.params if p.is_pointer]
    known = {p.name: element_bytes(p.base_type) for p in pointers}
    reading = read_launches(kernel, program) if pointers else None
    if reading is None or reading.why_not:
        return known
    text = "\n".join(host_text(program, f.path) for f in program.source_files())  # the sites' files
    positions = {p.name: k for k, p in enumerate(kernel.params)}
    proven = {}
    for p in pointers:
        alignments = []
        for site in reading.sites:
            arg = site.args[positions[p.name]].strip()
            buffer = site.buffers.get(p.name)
            offset = _literal_offset(arg, buffer, p.base_type, text)
            if buffer is None or offset is None:
                break
            alignments.append(_power_of_two_dividing(ALLOCATION_ALIGNMENT, offset * element_bytes(p.base_type)))
        else:
            proven[p.name] = max(known[p.name], min(alignments))
    return {**known, **proven}


def _literal_offset(arg: str, buffer: str | None, base_type: str, text: str) -> int | None:
    """The element offset of `buf`, `buf + k`, `&buf[k]` (k a literal; a nonzero k only where `buf` is
    declared a pointer to `base_type`, so that k counts its elements), else None."""
    m = _OFFSET.fullmatch(arg)
    if m is None or buffer is None:
        return None
    k = int(m.group("ai") or m.group("pi") or 0)
    if k and not re.search(rf"\b{re.escape(base_type)}\s*\*\s*(?:[A-Za-z_]\w*\s*,\s*\*?\s*)*{re.escape(buffer)}\b",
                           text):
        return None
    return k


def _power_of_two_dividing(limit: int, n: int) -> int:
    if n == 0:
        return limit
    a = 1
    while a < limit and n % (2 * a) == 0:
        a *= 2
    return a
