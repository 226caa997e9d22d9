"""Which code reads the z axis of a launch: recognizers that normalize's 3-D rule (rewriting/three_d)
and the launch helpers (launch_lowering: the naive grid's z is kept where a kernel reads it) both ask."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.kernel import Kernel


def is_thread_z(n: c_ast.Node) -> bool:
    """`threadIdx.z` or `blockDim.z`: what differs between the threads of one block along z."""
    return isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) \
        and n.name.name in ("threadIdx", "blockDim") and isinstance(n.field, c_ast.ID) and n.field.name == "z"


def is_z(n: c_ast.Node) -> bool:
    """Any of `threadIdx.z`, `blockDim.z`, `blockIdx.z`, `gridDim.z`."""
    return isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) \
        and n.name.name in ("threadIdx", "blockDim", "blockIdx", "gridDim") \
        and isinstance(n.field, c_ast.ID) and n.field.name == "z"


def uses_thread_z(kernel: Kernel) -> bool:
    """Does the kernel read threadIdx.z or blockDim.z?"""
    return any(is_thread_z(n) for n in walk(kernel.body))


def uses_grid_z(body: c_ast.Node) -> bool:
    """Does this code read blockIdx.z or gridDim.z (then the launch helpers keep the naive grid's z)?"""
    return any(is_z(n) and n.name.name in ("blockIdx", "gridDim") for n in walk(body))


def helpers_using_z(kernel: Kernel, device_functions: dict[str, c_ast.FuncDef]) -> list[str]:
    """The `__device__` helpers the kernel calls that read the z axis (the passes look only at the kernel)."""
    called = {n.name.name for n in walk(kernel.body) if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)}
    return [name for name in sorted(called) if name in device_functions
            and any(is_z(n) for n in walk(device_functions[name].body))]


__all__ = ["helpers_using_z", "is_thread_z", "is_z", "uses_grid_z", "uses_thread_z"]
