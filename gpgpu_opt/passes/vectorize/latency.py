"""When widening cannot show a gain: a body whose elements are long chains of slow arithmetic.

Widening by V gives each thread V elements and the launch V times fewer threads. For a streaming body that
trades V scalar loads for one vector load, a gain. For a body whose per-element work is a chain of
long-latency operations (divisions, square roots, transcendentals), each thread now runs V such chains one
after another while the GPU has V times fewer warps to hide them behind: on an H100, Rodinia cfd's
compute_step_factor (eight of them per element, 97K elements) went from 5.1 to 8.4 us widened by 4. The
loads saved do not pay for that on launches that do not fill the GPU widened. Every widening follows that fill
rule (launch_dispatch.min_threads_widened); `slow_chain` gives the reason its notes state for such a body."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.frontend.math_api import CMATH_NAMES

#: More long-latency operations per element than this: not widened.
MAX_LONG_LATENCY_OPS = 4

#: <cmath> functions that are one or two instructions (not long-latency).
_CHEAP = {base + suffix for base in ("fabs", "fmin", "fmax", "fma", "copysign", "floor", "ceil", "trunc", "round",
                                     "rint", "nearbyint", "fdim", "abs", "min", "max")
          for suffix in ("", "f")}


class _Counter(c_ast.NodeVisitor):
    def __init__(self):
        self.found: list[str] = []

    def visit_ArrayRef(self, node: c_ast.ArrayRef):
        self.visit(node.name)    # an index computation is not per-element arithmetic

    def visit_BinaryOp(self, node: c_ast.BinaryOp):
        if node.op == "/" and not (_is_constant(node.left) and _is_constant(node.right)):
            self.found.append("division")
        self.generic_visit(node)

    def visit_Assignment(self, node: c_ast.Assignment):
        if node.op == "/=":
            self.found.append("division")
        self.generic_visit(node)

    def visit_FuncCall(self, node: c_ast.FuncCall):
        name = node.name.name if isinstance(node.name, c_ast.ID) else ""
        if name in CMATH_NAMES and name not in _CHEAP:
            self.found.append(name)
        self.generic_visit(node)


def _is_constant(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.Constant)


def long_latency_ops(body: c_ast.Node) -> list[str]:
    """The long-latency operations the body does per element (a loop's body counted once)."""
    counter = _Counter()
    counter.visit(body)
    return counter.found


def slow_chain(body: c_ast.Node) -> str | None:
    """Why widening shows no gain for this body, or None."""
    found = long_latency_ops(body)
    if len(found) <= MAX_LONG_LATENCY_OPS:
        return None
    kinds = ", ".join(sorted(set(found)))
    return (f"each element is a chain of {len(found)} long-latency operations ({kinds}): widened, a thread would "
            f"run several such chains in a row with fewer warps to hide them, which the vector loads do not "
            f"pay for")
