"""Batched kernels that loop over their batches: `for (int b = 0; b < batches; ++b) { ... }` around the whole
per-batch work, each thread doing its element of every batch in turn.

Where the batches are independent (batches.py's `disjointness`, with the loop's iterator as the batch index),
the passes see the kernel of one batch: the loop's body after what comes before it, the iterator a scalar
parameter. `declared` puts a version back in the loop. What comes before the loop runs once per batch then,
so it may only declare values (`int i = blockIdx.x * blockDim.x + threadIdx.x;`), with no load nor call; a
version whose statements leave the loop early (a `return`, a `break` of its own) is not put back; one that
uses shared memory ends each batch with a barrier, so that no thread refills a tile of the next batch while
another still reads this one's."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.symbolic import param_symbol
from gpgpu_opt.analysis.z_axis import is_z
from gpgpu_opt.ast_util import call_name, walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.rewriting.batches import disjointness
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_statements
from gpgpu_opt.rewriting.guards import is_pure


@dataclass(frozen=True)
class BatchLoop:
    naive: Kernel
    start: Kernel          # the kernel of one batch: the loop's body, its iterator a parameter
    loop: c_ast.For        # the naive loop over the batches
    index: str

    @classmethod
    def of(cls, kernel: Kernel) -> "BatchLoop | None":
        """The one-batch view of a kernel whose body ends in a loop over its batches; None where it has no
        such loop, or where its iterations are not independent batches (many kernels end in a loop of another
        kind: this is no refusal, and says nothing)."""
        items = list(kernel.body.block_items or [])
        loop = items[-1] if items else None
        found = _batch_loop(loop, kernel)
        if found is None or any(is_z(n) for n in walk(kernel.body)):
            return None
        index, index_type = found
        prefix = items[:-1]
        for stmt in prefix:
            if not (isinstance(stmt, c_ast.Decl) and stmt.init is not None and is_pure(stmt.init)):
                return None     # work of its own before the loop: it would run once per batch
        if any(isinstance(n, c_ast.Return) for n in walk(loop.stmt)) or _leaves(loop.stmt):
            return None     # a batch that ends the thread's later batches: not one batch's work
        inner = list(loop.stmt.block_items or []) if isinstance(loop.stmt, c_ast.Compound) else [loop.stmt]
        before = {d.name for d in prefix}
        shadowed = sorted(n.name for n in walk(c_ast.Compound(inner)) if isinstance(n, c_ast.Decl)
                          and n.name in before | {index})
        if shadowed:
            return None
        view = kernel.copy()
        view.funcdef.body = c_ast.Compound(copy.deepcopy(prefix) + copy.deepcopy(inner), kernel.body.coord)
        params = view.funcdef.decl.type.args.params
        params.append(c_ast.Decl(name=index, quals=[], align=[], storage=[], funcspec=[],
                                 type=copy.deepcopy(index_type), init=None, bitsize=None))
        try:
            disjointness(view, param_symbol(index), {})
        except Unsupported:
            return None
        return cls(kernel, view, loop, index)

    def declared(self, version: Kernel) -> Kernel:
        """A version of `start` put back in the loop over the batches."""
        out = version.copy()
        func = out.funcdef
        body = list(func.body.block_items or [])
        if any(isinstance(n, c_ast.Return) for n in walk(func.body)) or _leaves(func.body):
            raise Unsupported("a version leaves its batch early (return, break), which would end every batch")
        if any(call_name(n) == "__syncthreads" for n in walk(func.body)) or \
                any(isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or []) for n in walk(func.body)):
            body += parse_statements("__syncthreads();")  # the next batch's tiles wait until this one's are read
        loop = copy.deepcopy(self.loop)
        loop.stmt = c_ast.Compound(body)
        func.body = c_ast.Compound([loop], func.body.coord)
        func.decl.type.args.params = [p for p in func.decl.type.args.params
                                      if not (isinstance(p, c_ast.Decl) and p.name == self.index)]
        return out

    def renamed_arrays(self) -> dict[str, str]:
        return {}


def _batch_loop(loop, kernel: Kernel):
    """(iterator, its type) of `for (int b = 0; b < B; ++b)`, B a scalar parameter and b not assigned inside."""
    if not (isinstance(loop, c_ast.For) and isinstance(loop.init, c_ast.DeclList) and len(loop.init.decls) == 1):
        return None
    decl = loop.init.decls[0]
    scalars = {p.name for p in kernel.scalars if p.base_type in ("int", "unsigned int", "long", "size_t")}
    if not (isinstance(decl.init, c_ast.Constant) and decl.init.value == "0" and isinstance(decl.type, c_ast.TypeDecl)):
        return None
    cond, step = loop.cond, loop.next
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and isinstance(cond.left, c_ast.ID)
            and cond.left.name == decl.name and isinstance(cond.right, c_ast.ID) and cond.right.name in scalars):
        return None
    if not (isinstance(step, c_ast.UnaryOp) and step.op in ("++", "p++") and isinstance(step.expr, c_ast.ID)
            and step.expr.name == decl.name):
        return None
    if decl.name in assigned_names(loop.stmt) or cond.right.name in assigned_names(kernel.body):
        return None
    return decl.name, decl.type


def _leaves(body: c_ast.Node) -> bool:
    """A break or continue outside the loops (and switches) of `body` itself."""
    def visit(node, inside: bool) -> bool:
        if isinstance(node, (c_ast.Break, c_ast.Continue)) and not inside:
            return True
        nested = inside or isinstance(node, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch))
        return any(visit(child, nested) for _, child in node.children())
    return visit(body, False)


__all__ = ["BatchLoop"]
