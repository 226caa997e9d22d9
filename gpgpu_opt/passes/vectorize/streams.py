"""The loops a widened body runs (widen.py): a z loop every lane runs alike (its header reads no x), the
alignment its accesses keep from one iteration to the next, whether it streams or re-reads what other
threads read, and what each thread streams (the fill rule's trips, launch_dispatch.size_verdict).

The reuse rule (`plane_stride`): a loop that re-reads elements other threads read is left to coalesce, merge
and prefetch, which stage them; widening would take their tile from them. An access that moves with both a
loop iterator and y is such a re-read where the iterator's stride is a constant multiple of y's
(`in[(y + j) * w + x]`: iteration j + 1 reads what the next row of threads reads at j). Where the stride is a
size times y's (`k * nx * ny` against `y * nx`: a z loop marching planes) the rows other threads in y read
are other elements of the same plane (the thread's N and S neighbours: a stencil's reads once per plane,
which L1 serves), and the loop streams: hotspot3D's W, E, N, S are neighbours in x and y of the plane the
thread stands on, each plane read once by the loop.
"""
from __future__ import annotations

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import canonical_loop
from gpgpu_opt.analysis.symbolic import TID, cuda_text
from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.passes.vectorize import lanes, subscripts
from gpgpu_opt.rewriting.kernel_info import KernelInfo

_X_BUILTINS = {("threadIdx", "x"), ("blockIdx", "x"), ("blockDim", "x"), ("gridDim", "x")}


def uniform_header(info: KernelInfo, loop: c_ast.For, idx: str) -> str | None:
    """Why the V lanes of a thread might not run the loop's iterations alike, or None: its header reads no x
    (the V lanes share y), no memory and no call, and nothing the kernel writes but its own iterator and
    those of the loops around it (each lane's the same: those loops' headers pass this test too)."""
    parts = [p for p in (loop.init, loop.cond, loop.next) if p is not None]
    var = canonical_loop(loop, info.flat_env()).var
    names = set().union(*(ids_in(p) for p in parts)) - {var}
    iterators = {d.name for n in walk(info.body) if isinstance(n, c_ast.For) and isinstance(n.init, c_ast.DeclList)
                 for d in n.init.decls if info.decl_counts[d.name] == 1}
    x_dependent = lanes.lane_locals(info.body.block_items or [], idx) | {idx}
    builtins = {(n.name.name, n.field.name) for p in parts for n in walk(p)
                if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID)}
    if names & x_dependent or builtins & _X_BUILTINS:
        return "its bounds depend on x"
    if any(isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall)) for p in parts for n in walk(p)):
        return "its bounds read memory or call a function"
    written = sorted(names & info.assigned - iterators)
    return f"its bounds read '{written[0]}', which the kernel writes" if written else None


def plane_stride(index: sympy.Expr, iterators: set) -> bool:
    """Whether every loop iterator of `index` moves it by a stride that is not a constant multiple of its
    stride in y (`k * nx * ny` against `tid.y * nx`: a loop marching z, plane by plane): the rows other
    threads in y read are then other elements of the same plane, not this thread's later iterations'
    (`in[(y + j) * w + x]`, j's stride w that of y, is reuse; `in[(k * ny + y) * nx + x]` is not)."""
    y_stride = sympy.expand(index).coeff(TID["y"])
    if y_stride == 0:
        return True
    for k in iterators & index.free_symbols:
        ratio = sympy.simplify(sympy.expand(index).coeff(k) / y_stride)
        if ratio.is_number:
            return False
    return True


def stride_values(info: KernelInfo, widened: list, loops: set[str]) -> list[sympy.Expr]:
    """What each loop iteration moves the vector accesses by (`nx * ny` for `c + k * nx * ny`): each is tested
    `% V == 0` at run time (or is a constant _loop_strides checks)."""
    out = []
    for _, node, _ in widened:
        a = info.by_node.get((id(node), "read")) or info.by_node[(id(node), "write")]
        index = sympy.expand(subscripts.index_of(a))
        out += [index.coeff(sympy.Symbol(v, integer=True)) for v in sorted(loops)
                if sympy.Symbol(v, integer=True) in index.free_symbols]
    return out


def implied(apart: sympy.Expr, strides: list[sympy.Expr], width: int) -> bool:
    """Whether two row starts `apart` elements apart are aligned together: every term of `apart` is a
    multiple of `width`, or an integer multiple of a loop stride whose `% width == 0` is tested too
    (`(nz - 1) * nx * ny` past `nx * ny`)."""
    for term in sympy.Add.make_args(apart):
        if term.is_Integer and int(term) % width == 0:
            continue
        if not any(_integer_polynomial(sympy.cancel(term / stride)) for stride in strides if not stride.is_Integer):
            return False
    return True


def _integer_polynomial(q: sympy.Expr) -> bool:
    if q.is_Integer:
        return True
    try:
        return all(c.is_Integer for c in sympy.Poly(q, *sorted(q.free_symbols, key=str)).coeffs())
    except sympy.PolynomialError:
        return False


def streamed(info: KernelInfo, stmts: list, ctx) -> tuple | None:
    """The trip count of the one loop at the top of the widened statements, which every thread runs alike:
    (its value where the sizes bound when compiling give one, its C text where it reads only scalar
    parameters), for the fill rule (launch_dispatch.size_verdict); None where there is no one such loop."""
    loops = [s for s in stmts if isinstance(s, c_ast.For)]
    if len(loops) != 1:
        return None
    loop = canonical_loop(loops[0], info.flat_env())
    trips = loop.trip_count() if loop is not None else None
    if trips is None:
        return None
    trips = sympy.expand(trips)
    params = {p.name for p in info.kernel.scalars}
    if trips.has(sympy.ceiling, sympy.floor) or any(str(s) not in params for s in trips.free_symbols):
        return None
    bound = trips.subs({sympy.Symbol(n, integer=True): v for n, v in ctx.facts.bindings.items()})
    return (int(bound) if bound.is_Integer else None, None if trips.is_Integer else cuda_text(trips))
