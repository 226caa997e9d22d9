"""Structural checks run after every pass: the kernel still prints as C that parses, barriers are never
under thread-dependent control flow, and no barrier directly follows another."""
from __future__ import annotations

import functools

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.ast_util import ids_in, is_call_to, type_names, walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.frontend.cuda_c import parse_c


class SanityError(Exception):
    pass


def _is_barrier(stmt) -> bool:
    return is_call_to(stmt, "__syncthreads")


def _thread_dependent(cond: c_ast.Node, thread_vars: set[str]) -> bool:
    return bool(ids_in(cond) & (thread_vars | {"threadIdx"}))


def _thread_variables(func: c_ast.FuncDef) -> set[str]:
    """Locals whose value may differ between the threads of a block (a conservative closure). The closure
    is the least fixed point of a monotone rule (a target joins once its value reads a dependent name or
    memory), so it does not depend on the order the definitions are visited in: each definition is read
    from the tree once, then the rule is applied to the list until nothing changes."""
    definitions = []
    for n in walk(func.body):
        if isinstance(n, c_ast.Decl) and n.init is not None:
            target, value = n.name, n.init
        elif isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
            target, value = n.lvalue.name, n.rvalue
        else:
            continue
        if target:
            definitions.append((target, ids_in(value), _reads_memory(value)))
    dependent = {"threadIdx"}
    changed = True
    while changed:
        changed = False
        for target, reads, loads in definitions:
            if target not in dependent and (reads & dependent or loads):
                dependent.add(target)
                changed = True
    return dependent


def _reads_memory(node) -> bool:
    return any(isinstance(n, c_ast.ArrayRef) for n in walk(node))


def check_kernel(func: c_ast.FuncDef, struct_names=()) -> None:
    """`struct_names`: the struct type names the kernel's parameters use (declared for the parse)."""
    text = CudaGenerator(cuda_spellings=False).visit(func)
    declared = "".join(f"typedef struct {n} {n};\n" for n in struct_names if n.isidentifier())
    declared += "".join(f"typedef struct {{ {v.base} {', '.join(v.fields)}; }} {v.name};\n"
                        for v in _defined_vectors(func))
    try:
        _parses(declared + text)
    except Exception as err:  # noqa: BLE001 - any failure means the pass broke the kernel
        raise SanityError(f"the kernel no longer parses: {err}") from None
    thread_vars = _thread_variables(func)
    _check_barriers(func.body, thread_vars, divergent=False)


def _defined_vectors(func: c_ast.FuncDef) -> list[cuda_types.VectorType]:
    """The vectors the output defines (`half8`) that the kernel names: declared for the parse as the output's
    definition declares them (rewriting/vector.py)."""
    names = type_names(func)
    return [v for v in cuda_types.DEFINED_VECTORS if v.name in names]


@functools.lru_cache(maxsize=1024)
def _parses(text: str) -> None:
    """Raise if `text` does not parse. Only success is remembered (an exception is not cached, so a failing
    text fails again with its own message): every pass's check of an unchanged kernel prints the same text,
    and parsing it again was most of the check's time."""
    parse_c(text, "<check>")


def _check_barriers(node, thread_vars, divergent: bool) -> None:
    if isinstance(node, c_ast.Compound):
        items = node.block_items or []
        for prev, cur in zip(items, items[1:]):
            if _is_barrier(prev) and _is_barrier(cur):
                raise SanityError("two __syncthreads() in a row")
        for item in items:
            _check_barriers(item, thread_vars, divergent)
        return
    if _is_barrier(node):
        if divergent:
            raise SanityError("__syncthreads() under thread-dependent control flow")
        return
    if isinstance(node, c_ast.If):
        d = divergent or _thread_dependent(node.cond, thread_vars)
        _check_barriers(node.iftrue, thread_vars, d)
        if node.iffalse is not None:
            _check_barriers(node.iffalse, thread_vars, d)
        return
    if isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile)):
        d = divergent or (node.cond is not None and _thread_dependent(node.cond, thread_vars))
        _check_barriers(node.stmt, thread_vars, d)
        return
    for _, child in node.children():
        _check_barriers(child, thread_vars, divergent)


__all__ = ["check_kernel", "SanityError"]
