"""restrict: where the pointer parameters are known not to alias (declared, `--restrict`, or proved from the
program's launch sites; see gpgpu_opt.analysis.aliasing), say so in the kernel: every pointer parameter
becomes `__restrict__`, and one that is only ever read through a subscript becomes a pointer to `const`.
The later passes rely on the qualifiers, and so does nvcc (read-only loads, loads kept across stores).
Where aliasing is not ruled out the kernel is left as it is, with a note on what would prove it."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.pass_api.record import PassRecord

_PROOFS = {"declared": "declared __restrict__", "--restrict": "--restrict",
           "launch sites": "every launch passes each pointer its own cudaMalloc buffer",
           "one pointer": "the kernel has one pointer parameter",
           "read-only": "the kernel writes through none of its pointers"}


def run(kernel: Kernel, ctx: PassContext) -> Kernel:
    facts = ctx.facts.aliasing
    where = Location.of(kernel.funcdef.decl)
    if facts is None:
        return kernel
    if not facts.restrict:
        ctx.log.skip("pointer parameters", f"may alias, so loads cannot be kept across stores: {facts.why_not}", where)
        return kernel
    made_const = []
    volatile = {p.name for p in kernel.arrays if p.is_volatile}
    for decl in _pointer_params(kernel):
        if decl.name in volatile:
            continue  # every access happens as written: no qualifier that lets nvcc cache or move them
        pointer = decl.type
        if "restrict" not in pointer.quals:
            pointer.quals = [*pointer.quals, "restrict"]
        pointee = pointer.type
        if decl.name not in facts.written and isinstance(pointee, c_ast.TypeDecl) \
                and "const" not in pointee.quals and _only_subscripted(kernel.body, decl.name):
            pointee.quals = ["const", *pointee.quals]
            made_const.append(decl.name)
    proof = _PROOFS[facts.how]
    if facts.sites:
        proof += f" (launch{'es' if len(facts.sites) > 1 else ''} at line {', '.join(map(str, facts.sites))})"
    detail = f"; read-only: {', '.join(made_const)} const" if made_const else ""
    ctx.log.applied("pointer parameters", f"do not alias: {proof}; declared __restrict__{detail}", where,
                    restatement=True)
    return kernel


def _pointer_params(kernel: Kernel) -> list[c_ast.Decl]:
    args = kernel.funcdef.decl.type.args
    return [p for p in (args.params if args else []) if isinstance(p, c_ast.Decl) and isinstance(p.type, c_ast.PtrDecl)]


def _only_subscripted(body: c_ast.Node, name: str) -> bool:
    """Every use of `name` is `name[...]` read as a value: making it const then changes no conversion
    (`float *p = name`, a call taking `float *`) that C++ would reject."""
    bases = set()  # the ids read through a subscript, and member names (`blockIdx.x`), which are no uses
    for node in walk(body):
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID):
            bases.add(id(node.name))
        elif isinstance(node, c_ast.StructRef):
            bases.add(id(node.field))
        if isinstance(node, c_ast.UnaryOp) and node.op == "&" and isinstance(node.expr, c_ast.ArrayRef) \
                and isinstance(node.expr.name, c_ast.ID) and node.expr.name.name == name:
            return False  # `&name[i]` is a pointer, which may be handed on
    return all(id(n) in bases for n in walk(body) if isinstance(n, c_ast.ID) and n.name == name)


PASS = PassRecord(
    "restrict", "pointer parameters declared __restrict__ (and const where only read) where they cannot alias",
    run, foundation=True, form=True, proved_without_emulation=True, three_d="always")
