"""`__ldg(&a[i])` read as `a[i]`: the read-only load is a plain read of the element, which the passes can
stage, widen and tile like any other.

`__ldg` promises that the element is not written while the kernel runs; a plain read of it returns the
same value, and under `const ... __restrict__` nvcc issues the same non-coherent load for it. Only `__ldg`
(the calls table's pure loads, `analysis.calls.PURE_LOADS`) of an element `&p[e]` of a pointer parameter to
const data is read so: the other cache hints (`__ldcv`: fetch again, `__ldcs`: streaming) say how the
access happens, and stay as written.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.analysis.calls import PURE_LOADS
from gpgpu_opt.ast_util import call_args, call_name, transform
from gpgpu_opt.kernel import Kernel


def plain_read_only_loads(kernel: Kernel) -> int:
    """Rewrites each such `__ldg` in place; the number rewritten."""
    const_pointers = {p.name for p in kernel.arrays if p.is_const and not p.is_volatile}
    count = 0

    def element(arg: c_ast.Node) -> c_ast.Node | None:
        if isinstance(arg, c_ast.UnaryOp) and arg.op == "&" and isinstance(arg.expr, c_ast.ArrayRef) \
                and isinstance(arg.expr.name, c_ast.ID) and arg.expr.name.name in const_pointers:
            return arg.expr
        return None

    def replace(node: c_ast.Node):
        nonlocal count
        if call_name(node) in PURE_LOADS and len(call_args(node)) == 1:
            read = element(call_args(node)[0])
            if read is not None:
                count += 1
                return read
        return None

    transform(kernel.body, replace)
    return count


__all__ = ["plain_read_only_loads"]
