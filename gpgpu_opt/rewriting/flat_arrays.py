"""Arrays of arrays read as flat arrays, so that the passes can rewrite their kernels.

A parameter `double c[][Y][X]` (or `float a[16][64]`, `T (*c)[Y][X]`) is one block of memory whose element
`c[z][y][x]` is element `(z * Y + y) * X + x`. The passes find and rewrite flat accesses `a[subscript]`, so
`flatten` gives them the kernel with each such parameter a flat pointer of the same name and every access a
flat subscript; `rewrapped` then writes a pass's result back with the parameters as the user declared them
(the launches and prototypes stay valid) and the flat pointer bound once at the top of the body:

    const double *c_flat = &c[0][0][0];

A kernel is flattened only when every use of such a parameter is a whole element (`c[z][y][x]`, or its
address): a row (`c[z]`), the array passed to a helper, or a local of the same name leave it as written.
The flat subscripts are `int` arithmetic, as the passes' own subscripts are (arrays of at most 2^31 - 1
elements)."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import fresh_name, transform, transform_top_down, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel


@dataclass(frozen=True)
class FlatArrays:
    kernel: Kernel                 # the kernel with each array of arrays a flat pointer
    names: tuple[str, ...]         # those parameters, in order
    dims: tuple[tuple[int, ...], ...]  # their dimensions below the first


def flatten(kernel: Kernel) -> FlatArrays | str | None:
    """The kernel with its arrays of arrays flat; None when it has none; else why it cannot be."""
    arrays = [p for p in kernel.params if p.inner_dims and not p.indirect]
    if not arrays:
        return None
    names = {p.name: p.inner_dims for p in arrays}
    shadowed = next((n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name in names), None)
    if shadowed is not None:
        return f"a local declares the name '{shadowed}' of an array of arrays"
    flat = kernel.copy()
    problems: list[str] = []
    flat.funcdef.body = _flat_uses(flat.funcdef.body, names, problems)
    if problems:
        return problems[0]
    for decl in flat.funcdef.decl.type.args.params:
        if isinstance(decl, c_ast.Decl) and decl.name in names:
            decl.type = _flat_pointer(decl.type)
    return FlatArrays(flat, tuple(names), tuple(names.values()))


def rewrapped(result: Kernel, naive: Kernel, flat: FlatArrays) -> Kernel:
    """`result` (a pass's version of the flat kernel) with the arrays declared as `naive` declares them and
    bound to flat pointers at the top of its body."""
    out = result.copy()
    func = out.funcdef
    taken = {n.name for n in walk(func) if isinstance(n, (c_ast.ID, c_ast.Decl)) and n.name}
    renamed = {name: fresh_name(f"{name}_flat", taken) for name in flat.names}

    def rename(n: c_ast.Node):
        if isinstance(n, c_ast.ID) and n.name in renamed:
            return c_ast.ID(renamed[n.name], n.coord)
        return None

    func.body = transform(func.body, rename, skip_member_names=True)
    declared = {d.name: d for d in naive.funcdef.decl.type.args.params if isinstance(d, c_ast.Decl)}
    params = func.decl.type.args.params
    bindings: list[c_ast.Node] = []
    for k, decl in enumerate(params):
        if not isinstance(decl, c_ast.Decl) or decl.name not in renamed:
            continue
        element = _element_type(decl.type)          # its qualifiers as the passes left them (a const)
        params[k] = copy.deepcopy(declared[decl.name])
        depth = len(flat.dims[flat.names.index(decl.name)]) + 1
        zeros = _subscripted(c_ast.ID(decl.name), [c_ast.Constant("int", "0")] * depth)
        pointer = c_ast.PtrDecl([], _renamed_type(copy.deepcopy(element), renamed[decl.name]))
        bindings.append(c_ast.Decl(renamed[decl.name], [], None, [], [], pointer, c_ast.UnaryOp("&", zeros), None))
    shapes = ", ".join(f"{name} ({' x '.join(['n', *map(str, dims)])})" for name, dims in zip(flat.names, flat.dims))
    comment = Comment(f"arrays of arrays read as flat arrays: {shapes}")
    func.body.block_items = [comment, *bindings, *(func.body.block_items or [])]
    return out


def flat_subscript(subscripts: list[c_ast.Node], dims: tuple[int, ...]) -> c_ast.Node:
    """`(z * Y + y) * X + x` for the subscripts z, y, x of an array whose inner dimensions are Y, X."""
    index = subscripts[0]
    for sub, dim in zip(subscripts[1:], dims):
        index = c_ast.BinaryOp("+", c_ast.BinaryOp("*", index, c_ast.Constant("int", str(dim))), sub)
    return index


def _flat_uses(body: c_ast.Node, names: dict[str, tuple[int, ...]], problems: list[str]) -> c_ast.Node:
    """Every whole-element access of the arrays as a flat subscript; anything else noted in `problems`."""
    def flat(node: c_ast.Node) -> c_ast.Node | None:
        if isinstance(node, c_ast.ArrayRef):
            base, subscripts = _chain(node)
            if isinstance(base, c_ast.ID) and base.name in names:
                dims = names[base.name]
                if len(subscripts) != len(dims) + 1:
                    problems.append(f"'{base.name}' is used as a row ({len(subscripts)} of its "
                                    f"{len(dims) + 1} subscripts)")
                    return node
                inner = [transform_top_down(s, flat) for s in subscripts]
                return c_ast.ArrayRef(base, flat_subscript(inner, dims), node.coord)
        if isinstance(node, c_ast.ID) and node.name in names:
            problems.append(f"'{node.name}' is used whole, not element by element")
            return node
        if isinstance(node, c_ast.StructRef):   # `v.x`: x names a member
            node.name = transform_top_down(node.name, flat)
            return node
        return None

    return transform_top_down(body, flat)


def _chain(node: c_ast.ArrayRef) -> tuple[c_ast.Node, list[c_ast.Node]]:
    """`c[z][y][x]` -> (c, [z, y, x])."""
    subscripts = []
    while isinstance(node, c_ast.ArrayRef):
        subscripts.append(node.subscript)
        node = node.name
    return node, subscripts[::-1]


def _subscripted(base: c_ast.Node, subscripts: list[c_ast.Node]) -> c_ast.Node:
    for sub in subscripts:
        base = c_ast.ArrayRef(base, copy.deepcopy(sub))
    return base


def _element_type(t: c_ast.Node) -> c_ast.TypeDecl:
    while isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)):
        t = t.type
    return t


def _flat_pointer(t: c_ast.Node) -> c_ast.PtrDecl:
    """`T c[][Y][X]` or `T (*restrict c)[Y][X]` as `T *c` (a restrict kept)."""
    quals = list(t.quals or []) if isinstance(t, c_ast.PtrDecl) else []
    return c_ast.PtrDecl(quals, _element_type(t))


def _renamed_type(t: c_ast.TypeDecl, name: str) -> c_ast.TypeDecl:
    t.declname = name
    return t
