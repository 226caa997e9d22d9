"""The GPU run harness: a standalone CUDA program (templates/run_harness.cu.j2) that runs one kernel's naive
and optimized versions on the same random inputs, checks every output element, and times both (and,
on request, a library reference: cuBLAS sgemm/sgemv/sger or a device-to-device copy).

The generated program needs only nvcc (and cuBLAS for the cuBLAS references); no Python on the GPU machine.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch.contract import launch_assumptions
from gpgpu_opt.rewriting.vector import definitions
from gpgpu_opt.templating import render
from gpgpu_opt.check.cases import ATOMIC_TOLERANCE, Case, launch_space, optimized_launch
from gpgpu_opt.check.extents import all_accesses, array_extents
from gpgpu_opt.launch.sites import launch_arguments


def _fill(base_type: str) -> tuple[int, str] | None:
    """(size, fill function) of an element type the harness can fill: C's integer and floating types
    however written, and the half types (converted from and to double on the host by their headers'
    constructors and conversions); not bool; else None."""
    t = cuda_types.scalar(base_type)
    if t is None or t.kind not in "iuf":
        return None
    return t.size, "fill_real" if t.kind == "f" else "fill_int"


def _half_header(base_type: str) -> str | None:
    """The header that declares a half type (`__half`: cuda_fp16.h), None for any other type."""
    t = cuda_types.scalar(base_type)
    if t is None or not t.is_half:
        return None
    return next((a.header for a in cuda_types.TYPE_ALIASES if a.target == t.name and a.header), None)


#: Reference kinds and the names they may be asked for by.
REFERENCE_ALIASES = {"sgemm": "sgemm", "mm": "sgemm", "sgemv_t": "sgemv_t", "mv": "sgemv_t",
                     "sgemv_n": "sgemv_n", "tmv": "sgemv_n", "copy": "copy", "transpose": "copy",
                     "sger": "sger", "vv": "sger",
                     "cub_sum": "cub_sum", "reduction": "cub_sum"}

TOLERANCE = 1e-4


def renamed_source(kernel: Kernel, new_name: str) -> str:
    """The kernel printed under another name (a deep copy is renamed; the kernel itself is untouched)."""
    func = copy.deepcopy(kernel.funcdef)
    func.decl.name = new_name
    node = func.decl.type
    while not isinstance(node, c_ast.TypeDecl):
        node = node.type
    node.declname = new_name
    return kernel.with_launch_bounds(kernel_source(func))


def _array_roles(kernel: Kernel) -> dict[str, tuple[bool, bool]]:
    reads, writes = set(), set()
    for access in all_accesses(kernel):  # atomics too: `atomicAdd(total, v)` reads and writes total
        (writes if access.mode == "write" else reads).add(access.array)
    roles = {}
    for p in kernel.arrays:
        written = p.name in writes
        read = p.name in reads or not written
        roles[p.name] = (read, written)
    return roles


def _vector_definitions(variants: list["HarnessVariant"]) -> list[str]:
    """The definitions of the vectors CUDA lacks (`half8`) that the variants use, each once."""
    return list(dict.fromkeys(text for v in variants for text in definitions(v.kernel.funcdef)))


def _literal(value, ctype: str) -> str:
    if _half_header(ctype) is not None:
        return f"{float(value)!r}"      # the half type's constructor from double rounds it
    if ctype == "float":
        return f"{float(value)!r}f"
    if ctype == "double":
        return repr(float(value))
    return str(int(value))


def _reference(kind: str, arrays: list[dict], global_space: tuple[int, int], kernel_name: str) -> dict:
    inputs = [a for a in arrays if a["read"] and not a["written"]]
    outputs = [a for a in arrays if a["written"]]
    gx, gy = global_space

    def fail(why: str):
        raise CompileError(f"kernel '{kernel_name}': cannot use the '{kind}' reference: {why}")

    if kind == "cub_sum":
        return _cub_sum(inputs, outputs, fail)
    if len(outputs) != 1:
        fail(f"it writes {len(outputs)} arrays, the reference one")
    out = outputs[0]
    if kind == "sger":
        return _sger(out, inputs, global_space, fail)
    if out["read"]:
        fail(f"its output '{out['name']}' is also read")
    ref = {"kind": kind, "out": out["name"], "ctype": out["ctype"], "count": out["extent"], "cublas": kind != "copy"}
    if kind == "copy":
        src = next((a for a in inputs if a["extent"] >= out["extent"] and a["ctype"] == out["ctype"]), None)
        if src is None:
            fail(f"no input array as large as '{out['name']}'")
        ref.update(src=src["name"], label="copy",
                   description=f"cudaMemcpyDeviceToDevice of {out['extent']} elements ({src['name']} -> scratch), "
                               "the same bytes read and written as the kernel")
        return ref
    if out["ctype"] != "float" or any(a["ctype"] != "float" for a in inputs):
        fail("cuBLAS references are float32 only")
    if len(inputs) < 2:
        fail(f"it reads {len(inputs)} arrays, the reference two")
    a, b = inputs[0], inputs[1]
    if kind == "sgemm":
        m, n = gy, gx
        k = a["extent"] // m
        if a["extent"] != m * k or b["extent"] != k * n or out["extent"] != m * n:
            fail(f"extents {a['extent']}, {b['extent']}, {out['extent']} are not M*K, K*N, M*N "
                 f"for the thread space {gx}x{gy} (x = column, y = row of {out['name']})")
        ref.update(A=a["name"], B=b["name"], M=m, N=n, K=k, label="cublasSgemm",
                   description=f"cublasSgemm, row-major {out['name']} ({m}x{n}) = {a['name']} ({m}x{k}) "
                               f"{b['name']} ({k}x{n}), default (FP32) math mode")
        return ref
    if gy != 1:
        fail("a matrix-vector reference needs a 1-D thread space")
    rows_out = gx
    other = a["extent"] // rows_out
    if a["extent"] != rows_out * other or b["extent"] != other or out["extent"] != rows_out:
        fail(f"extents {a['extent']}, {b['extent']}, {out['extent']} do not fit a {rows_out}-element result")
    if kind == "sgemv_t":
        ref.update(A=a["name"], x=b["name"], rows=rows_out, cols=other, label="cublasSgemv",
                   description=f"cublasSgemv CUBLAS_OP_T: {out['name']} = {a['name']} ({rows_out}x{other}, "
                               f"row-major) {b['name']}")
    else:
        ref.update(A=a["name"], x=b["name"], rows=other, cols=rows_out, label="cublasSgemv",
                   description=f"cublasSgemv CUBLAS_OP_N: {out['name']} = {a['name']}^T {b['name']}, "
                               f"{a['name']} {other}x{rows_out} row-major")
    return ref


def _sger(out: dict, inputs: list[dict], global_space: tuple[int, int], fail) -> dict:
    """`C(y, x) += A[y] * B[x]` for row-major C of H x W: C is updated in place, so the reference starts from
    the same C as the kernels. The vector as long as the thread space is high is A (the first when both fit)."""
    width, height = global_space
    if not out["read"]:
        fail(f"its output '{out['name']}' is not updated in place (C += A B^T reads C)")
    if out["ctype"] != "float" or any(a["ctype"] != "float" for a in inputs):
        fail("cuBLAS references are float32 only")
    if out["extent"] != width * height:
        fail(f"'{out['name']}' has {out['extent']} elements, not {width}x{height}")
    column = next((a for a in inputs if a["extent"] == height), None)
    row = next((a for a in inputs if a["extent"] == width and a is not column), None)
    if column is None or row is None:
        fail(f"no inputs of {height} and {width} elements for the thread space {width}x{height}")
    return {"kind": "sger", "out": out["name"], "ctype": "float", "count": out["extent"], "cublas": True,
            "A": column["name"], "B": row["name"], "rows": height, "cols": width, "label": "cublasSger",
            "description": f"cublasSger: row-major {out['name']} ({height}x{width}) += {column['name']} "
                           f"{row['name']}^T, in place from the same {out['name']} as the kernels"}


def _cub_sum(inputs: list[dict], outputs: list[dict], fail) -> dict:
    """cub::DeviceReduce::Sum of the one input, against the total of the smallest output (the per-block sums
    `out[]` of a tree reduction, or the atomically updated total, less its value before the launch)."""
    if len(inputs) != 1 or inputs[0]["ctype"] != "float":
        fail("the CUB sum needs exactly one float input array")
    src = inputs[0]
    out = min(outputs, key=lambda a: a["extent"])
    if out["ctype"] != "float":
        fail(f"its output '{out['name']}' is not float")
    return {"kind": "cub_sum", "src": src["name"], "out": out["name"], "ctype": "float", "count": 1,
            "cublas": False, "initial": out["read"], "label": "cub::DeviceReduce::Sum",
            "description": f"cub::DeviceReduce::Sum of {src['name']} ({src['extent']} floats), checked against the "
                           f"total of {out['name']}[]" + (" less its value before the launch" if out["read"] else "")}


def _tolerance(naive: Kernel, global_space: tuple[int, int]) -> float:
    """Atomic float sums add in another order once merged: as `verify`, a tolerance growing like sqrt(terms)."""
    if any(a.extra.get("atomic") for a in all_accesses(naive)):
        return TOLERANCE + ATOMIC_TOLERANCE * math.sqrt(global_space[0] * global_space[1])
    return TOLERANCE


@dataclass(frozen=True)
class HarnessVariant:
    """One optimized version of the kernel for the harness to check and time: `label` names it on the RESULT
    line (no spaces), `kernel` is the optimized kernel, `describe` says how it was made."""
    label: str
    kernel: Kernel
    describe: str = ""


def _refuse_what_the_helpers_refuse(program, naive: Kernel, optimized: Kernel, naive_grid, naive_block) -> None:
    """A kernel the file does not launch runs only under the naive launches its helpers accept: the harness
    makes the same naive launch, so it stops with the helpers' message rather than time a launch they refuse."""
    contract = launch_assumptions(program, naive, optimized, naive_block)
    why = contract.refusal(naive_grid, naive_block) if contract is not None else None
    if why:
        raise CompileError(f"{why}; give the harness a launch the helpers accept (--global, --size)")


def generate_harness(program, compile_result, kernel_name: str, sizes: dict, global_space=None,
                     flops: float = 0, reference: str | None = None, runs: int = 30, warmup: int = 3,
                     seed: int = 1, variants: list[HarnessVariant] | None = None) -> str:
    """The .cu text of the run harness for one kernel of a compiled program.

    `sizes` gives the kernel's scalar parameters (float scalars default to 0.75); `global_space` the naive
    launch's thread space (x, y), inferred like `verify` does when None; `flops` the work of one launch (0:
    GFLOP/s prints 0); `reference`: None, 'sgemm'/'mm', 'sgemv_t'/'mv', 'sgemv_n'/'tmv', 'sger'/'vv' or 'copy'/'transpose'.
    `variants`: the optimized versions to check and time in one binary (`tune`); default the compiled one,
    labelled 'optimized'."""
    result = next((k for k in compile_result.kernels if k.naive.name == kernel_name), None)
    if result is None:
        raise CompileError(f"no kernel '{kernel_name}' in '{program.path}' "
                           f"(kernels: {', '.join(k.naive.name for k in compile_result.kernels)})")
    if runs < 1 or warmup < 0:
        raise ValueError("runs must be >= 1 and warmup >= 0")
    naive = result.naive
    if variants is None:
        variants = [HarnessVariant("optimized", result.optimized, f"passes: {', '.join(result.passes_run) or 'none'}")]
    if not variants or len({v.label for v in variants}) != len(variants) or any(
            not v.label or any(c.isspace() for c in v.label) for v in variants):
        raise ValueError("harness variants need distinct labels without spaces")
    # the program's own values where the options give none: what its launches pass and cover
    sizes = {**launch_arguments(program, naive), **(sizes or {})}
    if global_space is None:
        global_space = launch_space(naive, program, sizes)
    global_space = (int(global_space[0]), int(global_space[1]) if len(global_space) > 1 else 1)
    naive_block = result.context.facts.naive_block.xy
    naive_grid = (math.ceil(global_space[0] / naive_block[0]), math.ceil(global_space[1] / naive_block[1]))
    single = len(variants) == 1
    shown = []
    for i, v in enumerate(variants):
        tag = "opt" if single else f"v{i}"
        _refuse_what_the_helpers_refuse(program, naive, v.kernel, naive_grid, naive_block)
        block, grid = optimized_launch(v.kernel, naive_block, Case(sizes, global_space))
        if v.kernel.launch is not None and v.kernel.launch.z_blocks:   # a z loop split over the grid's z
            grid = (*grid[:2], v.kernel.launch.z_blocks)
        shown.append({"label": v.label, "tag": tag, "block": tuple(block), "grid": tuple(grid),
                      "describe": v.describe or "as compiled",
                      "source": renamed_source(v.kernel, f"{kernel_name}_{tag}")})

    scalars = []
    for p in naive.scalars:
        if p.name in sizes:
            value = sizes[p.name]
        elif p.base_type in ("float", "double") or _half_header(p.base_type) is not None:
            value = 0.75
        else:
            raise CompileError(f"kernel '{kernel_name}': no value for parameter '{p.name}' (use --size {p.name}=N)")
        scalars.append({"name": p.name, "ctype": p.base_type, "value": _literal(value, p.base_type)})
    extents = array_extents(naive, sizes, naive_block, global_space)
    roles = _array_roles(naive)
    arrays = []
    for p in naive.arrays:
        if _fill(p.base_type) is None:
            raise CompileError(f"kernel '{kernel_name}': the harness cannot fill '{p.name}' of type '{p.base_type}'")
        read, written = roles[p.name]
        size, fill = _fill(p.base_type)
        arrays.append({"name": p.name, "ctype": p.base_type, "extent": int(extents[p.name]), "read": read,
                       "written": written, "fill": fill, "item": size,
                       "role": "in-out" if read and written else "output" if written else "input"})
    if not any(a["written"] for a in arrays):
        raise CompileError(f"kernel '{kernel_name}' writes no array: nothing to check")
    by_name = {a["name"]: a for a in arrays}
    call_args = ", ".join(f"d_{p.name}" if p.name in by_name else f"s_{p.name}" for p in naive.params)
    total_bytes = sum(a["extent"] * a["item"] * (2 if a["read"] and a["written"] else 1) for a in arrays)

    ref = None
    if reference:
        kind = REFERENCE_ALIASES.get(reference)
        if kind is None:
            raise ValueError(f"unknown reference '{reference}' (known: {', '.join(REFERENCE_ALIASES)})")
        ref = _reference(kind, arrays, global_space, kernel_name)

    sizes_text = ", ".join(f"{k}={v}" for k, v in sizes.items()) or "sizes fixed in the source"
    return render("run_harness.cu.j2", kernel=kernel_name, source=program.path, sizes_text=sizes_text,
                  global_space=global_space, naive_block=naive_block, naive_grid=naive_grid,
                  variants=shown, headers=sorted({h for v in variants for h in v.kernel.includes}
                                                | {_half_header(p.base_type) for p in naive.params} - {None}),
                  vector_definitions=_vector_definitions(variants),
                  device_functions=[kernel_source(f) for f in program.device_functions.values()],
                  naive_source=renamed_source(naive, f"{kernel_name}_naive"),
                  scalars=scalars, arrays=arrays, call_args=call_args, total_bytes=total_bytes,
                  flops=repr(float(flops)), flops_text=f"{float(flops):.6g}" if flops else "0 (not given)",
                  tolerance=_tolerance(naive, global_space), runs=int(runs), warmup=int(warmup), seed=int(seed),
                  recheck=not any(a["read"] and a["written"] for a in arrays), reference=ref)
