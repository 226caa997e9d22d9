"""When the iterations of a grid-stride loop are independent, so that one thread per element computes
what the loop computes whichever thread runs which iteration, in whatever order.

A whitelist; the loop is kept unless every item holds:
- the body stores only to elements `a[i]` (or a member of one, `a[i].x`) of pointer parameters, i the loop's
  index, and to scalars it declares itself; a written array is read only at `a[i]` too;
- no written array may alias another array the kernel reads or writes (the alias facts: `__restrict__`,
  `--restrict`, or every launch passing its own cudaMalloc buffers);
- no pointer is used but as `a[...]` (no `p + k`, no `&`), no shared memory, and every call is pure (so no
  barrier, atomic, warp vote or shuffle, no printf);
- no `break`, `continue`, `return` or `goto` in the body, and the index is not assigned there;
- the kernel reads no built-in index (threadIdx, blockIdx, blockDim, gridDim) but in the loop's header or
  the locals that hold its start and stride, and no scalar it reads is assigned after its declaration.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.analysis.aliasing import AliasFacts
from gpgpu_opt.analysis.calls import pure_calls
from gpgpu_opt.ast_util import walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.grid_stride.loop import GridStride, builtin

_JUMPS = (c_ast.Break, c_ast.Continue, c_ast.Return, c_ast.Goto, c_ast.Label)
_INCREMENTS = ("++", "--", "p++", "p--")


def why_dependent(kernel: Kernel, found: GridStride, aliasing: AliasFacts | None,
                  device_functions: dict[str, c_ast.FuncDef]) -> str | None:
    """None when the loop's iterations are independent (the whitelist above), else the first reason not."""
    body = found.loop.stmt
    pointers = {p.name for p in kernel.params if p.is_pointer}
    scalars = {p.name for p in kernel.params if not p.is_pointer}
    declared_inside = {n.name for n in walk(body) if isinstance(n, c_ast.Decl) and n.name}
    checks = (_no_jumps(body), _no_shared(kernel), _only_pure_calls(body, device_functions),
              _builtins_only_in_header(kernel, found), _pointers_only_subscripted(body, pointers),
              _stores(body, found.var, pointers, declared_inside),
              _nothing_read_is_reassigned(kernel, body, found, declared_inside, scalars))
    for why in checks:
        if why:
            return why
    written = _written_arrays(body, pointers)
    if written and len(pointers) > 1 and not (aliasing is not None and aliasing.restrict):
        hint = f" ({aliasing.why_not})" if aliasing is not None and aliasing.why_not else ""
        return f"'{sorted(written)[0]}' may alias another pointer parameter{hint}"
    return _written_read_elsewhere(body, found.var, written)


def _no_jumps(body: c_ast.Node) -> str | None:
    jump = next((n for n in walk(body) if isinstance(n, _JUMPS)), None)
    return None if jump is None else f"the loop's body has a '{type(jump).__name__.lower()}'"


def _no_shared(kernel: Kernel) -> str | None:
    for n in walk(kernel.body):
        if isinstance(n, c_ast.Decl) and ("__shared__" in (n.storage or []) or "__shared__" in (n.quals or [])):
            return f"the kernel declares shared memory ('{n.name}')"
    return None


def _only_pure_calls(body: c_ast.Node, device_functions: dict) -> str | None:
    pure = pure_calls(device_functions)
    for n in walk(body):
        if isinstance(n, c_ast.FuncCall):
            name = n.name.name if isinstance(n.name, c_ast.ID) else None
            if name not in pure:
                return f"the loop's body calls '{name or 'a function pointer'}', which may not be pure " \
                       "(a barrier, an atomic, a warp operation, output)"
    return None


def _builtins_only_in_header(kernel: Kernel, found: GridStride) -> str | None:
    """Built-in indices in the loop's header and the locals it names are the loop's own; anywhere else they
    would tell which thread runs an iteration, which canonicalizing changes."""
    allowed = set()
    for item in kernel.body.block_items or []:
        if isinstance(item, c_ast.Decl) and item.name in found.locals_used | {found.var}:
            allowed |= {id(n) for n in walk(item)}
    for part in (found.loop.init, found.loop.next):
        if part is not None:
            allowed |= {id(n) for n in walk(part)}
    for n in walk(kernel.body):
        b = builtin(n)
        if b and id(n) not in allowed:
            return f"the kernel reads {b[0]}.{b[1]} outside the grid-stride loop's header"
    return None


def _pointers_only_subscripted(body: c_ast.Node, pointers: set[str]) -> str | None:
    bases = {id(n.name) for n in walk(body) if isinstance(n, c_ast.ArrayRef)}
    bases |= {id(n.field) for n in walk(body) if isinstance(n, c_ast.StructRef)}  # `v.x` names a member
    for n in walk(body):
        if isinstance(n, c_ast.ID) and n.name in pointers and id(n) not in bases:
            return f"the loop's body uses the pointer '{n.name}' other than as '{n.name}[...]'"
        if isinstance(n, c_ast.UnaryOp) and n.op == "&":
            return "the loop's body takes an address ('&')"
        if isinstance(n, c_ast.ArrayRef) and not isinstance(n.name, c_ast.ID):
            return "the loop's body subscripts something other than a pointer parameter or a local array"
    return None


def _target(lvalue: c_ast.Node) -> c_ast.Node:
    """`a[i].x` -> `a[i]`: a member of an element is part of that element."""
    while isinstance(lvalue, c_ast.StructRef) and lvalue.type == ".":
        lvalue = lvalue.name
    return lvalue


def _is_index(node: c_ast.Node, var: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == var


def _stored(body: c_ast.Node) -> list[c_ast.Node]:
    found = [n.lvalue for n in walk(body) if isinstance(n, c_ast.Assignment)]
    found += [n.expr for n in walk(body) if isinstance(n, c_ast.UnaryOp) and n.op in _INCREMENTS]
    return found


def _stores(body: c_ast.Node, var: str, pointers: set[str], declared_inside: set[str]) -> str | None:
    for lvalue in _stored(body):
        target = _target(lvalue)
        if isinstance(target, c_ast.ID) and target.name in declared_inside and target.name != var:
            continue
        if isinstance(target, c_ast.ArrayRef) and isinstance(target.name, c_ast.ID) \
                and target.name.name in pointers and _is_index(target.subscript, var):
            continue
        if isinstance(target, c_ast.ArrayRef) and isinstance(target.name, c_ast.ID) \
                and target.name.name in declared_inside:
            continue    # a local array of the iteration
        if isinstance(target, c_ast.ID) and target.name == var:
            return f"the loop's body assigns its index '{var}'"
        return f"the loop's body stores to '{CudaGenerator().visit(lvalue)}', not element {var} of an array " \
               "nor a local of its own"
    return None


def _written_arrays(body: c_ast.Node, pointers: set[str]) -> set[str]:
    return {t.name.name for t in map(_target, _stored(body))
            if isinstance(t, c_ast.ArrayRef) and isinstance(t.name, c_ast.ID) and t.name.name in pointers}


def _written_read_elsewhere(body: c_ast.Node, var: str, written: set[str]) -> str | None:
    for n in walk(body):
        if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name in written \
                and not _is_index(n.subscript, var):
            return f"'{n.name.name}' is written at [{var}] and also accessed elsewhere, which another iteration writes"
    return None


def _nothing_read_is_reassigned(kernel: Kernel, body: c_ast.Node, found: GridStride, declared_inside: set[str],
                                scalars: set[str]) -> str | None:
    """Every scalar the loop reads that it does not declare is set once, before it (a parameter, a local of
    the preamble) and never assigned after: then each iteration sees the same values wherever it runs."""
    outside = scalars | {d.name for d in kernel.body.block_items or [] if isinstance(d, c_ast.Decl)}
    header_writes = {id(found.loop.next)}
    for n in walk(kernel.body):
        if isinstance(n, c_ast.Assignment) and id(n) not in header_writes:
            t = _target(n.lvalue)
            if isinstance(t, c_ast.ID) and t.name in outside and t.name not in declared_inside:
                return f"'{t.name}' is assigned in the kernel, so iterations may see different values of it"
        if isinstance(n, c_ast.UnaryOp) and n.op in _INCREMENTS and isinstance(n.expr, c_ast.ID) \
                and n.expr.name in outside and n.expr.name not in declared_inside:
            return f"'{n.expr.name}' is assigned in the kernel, so iterations may see different values of it"
    bound = {n.name for n in walk(found.bound) if isinstance(n, c_ast.ID)}
    unknown = bound - scalars - {d.name for d in kernel.body.block_items or [] if isinstance(d, c_ast.Decl)}
    if unknown:
        return f"the loop's bound names '{sorted(unknown)[0]}', which is not a scalar parameter or a local"
    return None


__all__ = ["why_dependent"]
