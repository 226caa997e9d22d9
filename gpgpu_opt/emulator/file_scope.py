"""The memory of file-scope `__constant__` and `__device__` variables: one global buffer each, filled with
the contents the caller gives (the same for the naive and the optimized run), visible to the kernel and
its helpers by name. A scalar is a one-element buffer that its name loads and stores, as a `__shared__`
scalar is, so that every thread sees the others' writes and atomics."""
from __future__ import annotations

import numpy as np

from gpgpu_opt.emulator.errors import EmulationError, UnsupportedConstruct
from gpgpu_opt.emulator.expressions import PtrType, Var
from gpgpu_opt.emulator.memory import Buffer, Memory, PtrValue
from gpgpu_opt.emulator.values import VecType, type_from_names


def element_dtype(variable) -> np.dtype:
    """The numpy dtype of one scalar word of a file variable (a vector type's base type)."""
    view = type_from_names(list(variable.type_names))
    if view is None:
        raise UnsupportedConstruct(f"void file-scope variable '{variable.name}'")
    return (view.base if isinstance(view, VecType) else view).dtype


def words(variable) -> int:
    """How many scalar words the variable holds (None dims: not emulated)."""
    if variable.dims is None:
        raise UnsupportedConstruct(f"file-scope array '{variable.name}' without a constant size")
    view = type_from_names(list(variable.type_names))
    count = int(np.prod(variable.dims)) if variable.dims else 1
    return count * (view.n if isinstance(view, VecType) else 1)


def bind_file_variables(kernel: str, variables: dict, values: dict, mem: Memory, check_races: bool,
                        id_dtype) -> dict[str, Var]:
    """Vars for the file variables `variables` (name -> FileVariable) over the numpy arrays `values`
    (name -> flat array of `words(v)` elements of `element_dtype(v)`), updated in place by stores.
    Constant memory is read-only; every `__device__` variable is race-checked (a helper may store to it
    by name, which the written-pointer analysis does not follow)."""
    bound: dict[str, Var] = {}
    for name, variable in variables.items():
        if name not in values:
            raise EmulationError(f"kernel '{kernel}': no contents for the file-scope variable '{name}'")
        data = values[name]
        if not isinstance(data, np.ndarray) or data.dtype != element_dtype(variable) or data.size != words(variable):
            raise EmulationError(f"kernel '{kernel}': the contents of '{name}' must be {words(variable)} "
                                 f"elements of {element_dtype(variable)}")
        view = type_from_names(list(variable.type_names))
        scalar = view.base if isinstance(view, VecType) else view
        flat = data.reshape(-1)
        buf = Buffer(name, "global", flat, scalar, flat.size, tuple(variable.dims) or None, view)
        if variable.space == "constant":
            buf.read_only = True
        elif check_races:
            buf.race = mem.tracker(buf, flat.size, track_reads=True, id_dtype=id_dtype)
        if variable.dims:
            bound[name] = Var(name, PtrType(view), PtrValue(buf, np.int64(0), view, tuple(variable.dims)))
        else:
            bound[name] = Var(name, "shared", PtrValue(buf, np.int64(0), view, None))
    return bound
