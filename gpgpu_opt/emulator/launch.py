"""`run_kernel`: bind the arguments, split the grid into batches of blocks, run each batch in lockstep."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from pycparser import c_ast

from gpgpu_opt.analysis.writes import param_decls as _param_decls, written_names
from gpgpu_opt.emulator.errors import EmulationError, UnsupportedConstruct, where
from gpgpu_opt.emulator.expressions import PtrType, Var
from gpgpu_opt.emulator.file_scope import bind_file_variables
from gpgpu_opt.emulator.interpreter import Interpreter
from gpgpu_opt.emulator.memory import Buffer, Memory, PtrValue
from gpgpu_opt.emulator.structs import flatten_struct_pointers
from gpgpu_opt.emulator.threads import Batch, Geometry
from gpgpu_opt.emulator.values import CType, Value, VecType, type_from_names


@dataclass
class EmulationStats:
    kernel: str = ""
    threads: int = 0
    blocks: int = 0
    batches: int = 0
    global_loads: int = 0       # per thread and access (a float4 access counts once)
    global_stores: int = 0
    shared_loads: int = 0
    shared_stores: int = 0
    atomics: int = 0
    barriers: int = 0           # __syncthreads() executions, counted once per block
    seconds: float = 0.0
    #: per array run_kernel was asked to measure: (lowest, highest + 1) scalar word accessed; (0, 0) if none
    reach: dict[str, tuple[int, int]] = field(default_factory=dict)


def _bind_args(funcdef, args: dict, mem: Memory, geom: Geometry, check_races: bool, written: set[str]):
    name = funcdef.decl.name
    decls = _param_decls(funcdef)
    names = [d.name for d in decls]
    missing = [n for n in names if n not in args]
    extra = [n for n in args if n not in names]
    if missing or extra:
        raise EmulationError(f"kernel '{name}': " + (f"missing arguments {missing}" if missing else "") +
                             ("; " if missing and extra else "") + (f"unknown arguments {extra}" if extra else ""))
    params: dict[str, Var] = {}
    buffers: list[tuple[np.ndarray, Buffer]] = []
    for d in decls:
        t = d.type
        value = args[d.name]
        if isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)):
            inner, inner_dims = _inner_dims(name, d, t.type)
            if not (isinstance(inner, c_ast.TypeDecl) and isinstance(inner.type, c_ast.IdentifierType)):
                raise UnsupportedConstruct(f"kernel '{name}': parameter '{d.name}' of this type at {where(d)}")
            view = type_from_names(inner.type.names, d)
            if view is None:
                raise UnsupportedConstruct(f"kernel '{name}': void * parameter '{d.name}' at {where(d)}")
            scalar = view.base if isinstance(view, VecType) else view
            if value is None:   # a null pointer: every access through it is out of bounds
                buf = Buffer(d.name, "global", np.zeros(0, scalar.dtype), scalar, 0)
                buf.null = True
                params[d.name] = Var(d.name, PtrType(view), PtrValue(buf, np.int64(0), view))
                continue
            if not isinstance(value, np.ndarray):
                raise EmulationError(f"kernel '{name}': argument '{d.name}' must be a numpy array")
            if value.dtype != scalar.dtype:
                raise EmulationError(f"kernel '{name}': argument '{d.name}' has dtype {value.dtype}, but the "
                                     f"parameter is {scalar} * (needs {scalar.dtype})")
            flat = value.reshape(-1)
            if value.size and not np.shares_memory(flat, value):
                raise EmulationError(f"kernel '{name}': argument '{d.name}' must be contiguous")
            buf = next((b for a, b in buffers if a is value), None)
            if buf is None:
                for a, b in buffers:
                    if np.shares_memory(a, value):
                        raise UnsupportedConstruct(f"kernel '{name}': arguments '{b.name}' and '{d.name}' "
                                                   f"overlap without being the same array")
                buf = Buffer(d.name, "global", flat, scalar, flat.size)
                buffers.append((value, buf))
            dims = None
            if inner_dims:  # an array of arrays: as many whole or partial rows as the buffer holds
                row = int(np.prod(inner_dims)) * (view.n if isinstance(view, VecType) else 1)
                dims = (max(1, -(-flat.size // row)), *inner_dims)
            params[d.name] = Var(d.name, PtrType(view), PtrValue(buf, np.int64(0), view, dims))
        else:
            ctype = type_from_names(t.type.names, d) if isinstance(t, c_ast.TypeDecl) and \
                isinstance(t.type, c_ast.IdentifierType) else None
            if not isinstance(ctype, CType):
                raise UnsupportedConstruct(f"kernel '{name}': parameter '{d.name}' of this type at {where(d)}")
            params[d.name] = Var(d.name, ctype, Value(ctype, _scalar_arg(name, d.name, ctype, value)))
    if check_races:
        id_dtype = np.int32 if geom.total_threads < 2**31 else np.int64
        for a, buf in buffers:
            names_of = {n for n in names if args[n] is a}
            if names_of & written:
                buf.race = mem.tracker(buf, buf.data.size, track_reads=True, id_dtype=id_dtype)
            else:
                buf.read_only = True
    return params


def _inner_dims(kernel: str, decl: c_ast.Decl, t) -> tuple:
    """The element type under a pointer parameter and, for an array of arrays (`double c[][Y][X]`), its
    constant inner dimensions (Y, X)."""
    from gpgpu_opt.ast_util import constant_value

    dims = []
    while isinstance(t, c_ast.ArrayDecl):
        dim = constant_value(t.dim) if t.dim is not None else None
        if dim is None or dim <= 0:
            raise UnsupportedConstruct(f"kernel '{kernel}': parameter '{decl.name}' with an inner dimension that "
                                       f"is not a positive constant at {where(decl)}")
        dims.append(dim)
        t = t.type
    return t, tuple(dims)


def _scalar_arg(kernel: str, pname: str, ctype: CType, value):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if ctype.is_float:
        if not isinstance(value, (int, float, np.integer, np.floating)):
            raise EmulationError(f"kernel '{kernel}': argument '{pname}' must be a number, got {value!r}")
        return ctype.dtype.type(value)
    if isinstance(value, (float, np.floating)) and float(value) != int(value):
        raise EmulationError(f"kernel '{kernel}': argument '{pname}' is {ctype} but got {value!r}")
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise EmulationError(f"kernel '{kernel}': argument '{pname}' must be an integer, got {value!r}")
    v = int(value)
    if ctype.kind == "b":
        return np.bool_(v != 0)
    info = np.iinfo(ctype.dtype)
    if not info.min <= v <= info.max:
        raise EmulationError(f"kernel '{kernel}': argument '{pname}' = {v} does not fit in {ctype}")
    return ctype.dtype.type(v)


def run_kernel(kernel_or_funcdef, grid, block, args: dict, *, device_functions: dict | None = None,
               check_races: bool = True, max_threads_per_batch: int = 1 << 16,
               blocks: list[int] | None = None, measure_reach: frozenset[str] = frozenset(),
               dynamic_shared_bytes: int = 0) -> EmulationStats:
    """Emulate `kernel<<<grid, block>>>(args...)` on the CPU; pointer arguments (numpy arrays) are
    updated in place. A Kernel's file-scope variables take their contents from `args` too, by name. Raises an EmulationError subclass for out-of-bounds or misaligned accesses, races,
    divergent barriers, undefined behaviour and unsupported constructs. `blocks`: run only these blocks
    (linear ids, x fastest) of the grid, a sample of a launch too large to emulate whole. `measure_reach`:
    pointer arguments whose lowest and highest word accessed go to the stats' `reach`. `dynamic_shared_bytes`:
    the launch's dynamic shared memory (`<<<grid, block, bytes>>>`), which an `extern __shared__` array is."""
    t0 = time.perf_counter()
    funcdef = getattr(kernel_or_funcdef, "funcdef", kernel_or_funcdef)
    if not isinstance(funcdef, c_ast.FuncDef):
        raise TypeError("run_kernel needs a Kernel or a pycparser FuncDef")
    funcdef = flatten_struct_pointers(funcdef, getattr(kernel_or_funcdef, "struct_layouts", {}))
    name = funcdef.decl.name
    device_functions = dict(device_functions or {})
    geom = Geometry(grid, block)
    stats = EmulationStats(kernel=name)
    mem = Memory(name, geom, stats, check_races)
    written = written_names(funcdef, device_functions) if check_races else set()
    file_variables = getattr(kernel_or_funcdef, "file_variables", {})
    params = _bind_args(funcdef, {k: v for k, v in args.items() if k not in file_variables}, mem, geom,
                        check_races, written)
    measured = {n: params[n].value.buffer for n in measure_reach}
    for buffer in measured.values():
        buffer.reach = [buffer.extent, 0]
    interp = Interpreter(funcdef, device_functions, geom, mem, stats, params)
    interp.dynamic_shared_bytes = int(dynamic_shared_bytes)
    interp.file_scope = bind_file_variables(name, file_variables, args, mem, check_races,
                                            np.int32 if geom.total_threads < 2**31 else np.int64)
    per_batch = max(1, int(max_threads_per_batch) // geom.tpb)
    with np.errstate(all="ignore"):
        for first, count in _batches(sorted(set(blocks)) if blocks is not None else None, geom.nblocks, per_batch):
            interp.run_batch(Batch(geom, first, count))
            stats.batches += 1
    stats.reach = {n: ((b.reach[0], b.reach[1]) if b.reach[1] else (0, 0)) for n, b in measured.items()}
    stats.blocks = geom.nblocks if blocks is None else len(set(blocks))
    stats.threads = stats.blocks * geom.tpb
    stats.seconds = time.perf_counter() - t0
    return stats


def _batches(blocks: list[int] | None, nblocks: int, per_batch: int):
    """(first block, count) of each batch: runs of consecutive blocks, at most `per_batch` long."""
    if blocks is None:
        yield from ((first, min(per_batch, nblocks - first)) for first in range(0, nblocks, per_batch))
        return
    if any(not 0 <= b < nblocks for b in blocks):
        raise ValueError(f"a sampled block is outside the grid of {nblocks} blocks")
    k = 0
    while k < len(blocks):
        first, count = blocks[k], 1
        while k + count < len(blocks) and blocks[k + count] == first + count and count < per_batch:
            count += 1
        yield first, count
        k += count
