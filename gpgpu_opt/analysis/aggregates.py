"""Parameters the passes do not model element by element: structs (`const Particle *p` read as
`p[i].x`, a struct of pointers `Params s` read as `s.a[i]`) and pointers to pointers (`float **rows`).
Their accesses are not the flat element accesses the passes rewrite, so a kernel with one is left as
written, with a note naming the parameter. Arrays of arrays (`double c[][Y][X]`) are analysed, each access
at its flattened subscript `(z * Y + y) * X + x` (see accesses), and emulated; the passes find and rewrite
element accesses as `a[subscript]` of a flat array (`c[z]` would be taken for an element), so the pipeline
gives them the kernel with those arrays flat (rewriting/flat_arrays.py) where nothing else keeps it as
written.

An array of structs whose layout is certain (frontend/struct_layouts.py: field k of element e is element
`m * e + k` of the one field type) is analysed too: a field read `p[e].lat` is analysed at that subscript
(coalescing, reuse) and left as written, like an element of an array of arrays."""
from __future__ import annotations

from gpgpu_opt import cuda_types
from gpgpu_opt.frontend.struct_layouts import StructLayout

_QUALIFIERS = frozenset({"const", "volatile", "restrict", "__restrict__"})


def is_element_type(base_type: str) -> bool:
    """A scalar or CUDA vector type (the types the emulator holds in memory, `dim3` too); not a struct, a
    union or void."""
    names = [n for n in base_type.split() if n not in _QUALIFIERS]
    spelling = " ".join(names)
    return spelling == "dim3" or (len(names) == 1 and cuda_types.vector(spelling) is not None) \
        or cuda_types.scalar(spelling) is not None


def param_layout(kernel, name: str) -> StructLayout | None:
    """The certain layout of the struct that the pointer parameter `name` points to, if it has one."""
    param = next((p for p in kernel.params if p.name == name), None)
    if param is None or not param.is_pointer or param.inner_dims or param.indirect:
        return None
    return kernel.struct_layouts.get(param.base_type)


def unmodelled_parameter(kernel) -> str | None:
    """Why a parameter of the kernel keeps it as written (None: every parameter is modelled)."""
    for p in kernel.params:
        if p.indirect:
            return f"the parameter '{p.name}' is a pointer to pointers (or an array of arrays of unknown size)"
        if p.inner_dims:
            continue    # flattened for the passes where nothing else keeps the kernel (pipeline)
        if not is_element_type(p.base_type):
            if param_layout(kernel, p.name) is not None:  # its fields: flat elements (emulator/structs.py)
                continue
            what = "a pointer to a struct" if p.is_pointer else "a struct passed by value"
            spelled = "" if p.base_type == "struct" else f" ('{p.base_type}')"
            return f"the parameter '{p.name}' is {what}{spelled}, whose members the analyses do not model"
    arrays = next((p.name for p in kernel.params if p.inner_dims), None)
    if arrays is not None:
        return (f"the parameter '{arrays}' is an array of arrays (analysed as its flattened subscripts; the "
                "passes rewrite flat arrays only)")
    return None
