"""Parameters the passes do not model element by element: structs (`const Particle *p` read as
`p[i].x`, a struct of pointers `Params s` read as `s.a[i]`) and pointers to pointers (`float **rows`).
Their accesses are not the flat element accesses the passes rewrite, so a kernel with one is left as
written, with a note naming the parameter. Arrays of arrays (`double c[][Y][X]`) are analysed, each access
at its flattened subscript `(z * Y + y) * X + x` (see accesses), and emulated; but the passes find and
rewrite element accesses as `a[subscript]` of a flat array (`c[z]` would be taken for an element), so such
a kernel is left as written too."""
from __future__ import annotations

from gpgpu_opt.emulator.errors import UnsupportedConstruct
from gpgpu_opt.emulator.values import type_from_names


def is_element_type(base_type: str) -> bool:
    """A scalar or CUDA vector type (the types the emulator holds in memory); not a struct or union."""
    if base_type == "struct":
        return False
    try:
        return type_from_names(base_type.split()) is not None
    except UnsupportedConstruct:
        return False


def unmodelled_parameter(kernel) -> str | None:
    """Why a parameter of the kernel keeps it as written (None: every parameter is modelled)."""
    for p in kernel.params:
        if p.indirect:
            return f"the parameter '{p.name}' is a pointer to pointers (or an array of arrays of unknown size)"
        if p.inner_dims:
            return (f"the parameter '{p.name}' is an array of arrays (analysed as its flattened subscripts; the "
                    "passes rewrite flat arrays only)")
        if not is_element_type(p.base_type):
            what = "a pointer to a struct" if p.is_pointer else "a struct passed by value"
            spelled = "" if p.base_type == "struct" else f" ('{p.base_type}')"
            return f"the parameter '{p.name}' is {what}{spelled}, whose members the analyses do not model"
    return None
