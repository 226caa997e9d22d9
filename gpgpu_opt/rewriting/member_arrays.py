"""A struct of arrays passed by value, read as arrays of its own, so that the passes can rewrite its kernel.

`__global__ void drift(ParticlesSoA s, float dt, int n)` reading `s.x[i]` and `s.vx[i]`: the struct's fields
are pointers (and scalars) the kernel receives by value (frontend/struct_layouts.pointer_structs). `split`
gives the passes the kernel with each field it reads a parameter of its own (`s_x`, `s_vx`) in the struct's
place; `rewrapped` writes a pass's result back with the struct parameter as the user declared it (the
launches and prototypes stay valid) and each field bound once to a local at the top of the body:

    float *s_x = s.x;

A kernel is split only when every use of the struct is a field read (`s.x[i]`, `s.n`): the struct passed
whole, a field assigned or its address taken, or a local of the same name leave it as written. Nothing is
known of where the fields point, so the pipeline gives the passes no proof that they do not alias."""
from __future__ import annotations

import copy
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import fresh_name, transform_top_down, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel


@dataclass(frozen=True)
class MemberArrays:
    kernel: Kernel                                  # the kernel with each field read a parameter
    fields: tuple[tuple[str, str, str], ...]        # (struct parameter, field, the parameter that holds it)


def split(kernel: Kernel, holder_names=None) -> MemberArrays | str | None:
    """The kernel with its structs of arrays split into parameters; None when it has none; else why it
    cannot be. `holder_names(struct, field)` names the parameters (by default `s_x`, a name the kernel leaves
    free)."""
    structs = {p.name: kernel.struct_members[p.base_type] for p in kernel.params
               if not p.is_pointer and p.base_type in kernel.struct_members}
    if not structs:
        return None
    shadowed = next((n.name for n in walk(kernel.body) if isinstance(n, c_ast.Decl) and n.name in structs), None)
    if shadowed is not None:
        return f"a local declares the name '{shadowed}' of a struct parameter"
    why = _why_not_field_reads(kernel.body, structs)
    if why:
        return why
    taken = {n.name for n in walk(kernel.funcdef) if isinstance(n, (c_ast.ID, c_ast.Decl)) and n.name}
    read = {(n.name.name, n.field.name) for n in walk(kernel.body) if _is_field(n, structs)}
    fields = tuple((s, m.name, fresh_name(f"{s}_{m.name}", taken) if holder_names is None else holder_names(s, m.name))
                   for s, members in structs.items() for m in members if (s, m.name) in read)
    clash = next((name for _, _, name in fields if holder_names is not None and name in taken), None)
    if clash is not None:
        return f"the kernel names '{clash}' itself"
    holder = {(s, f): name for s, f, name in fields}
    out = kernel.copy()
    out.funcdef.body = _replaced(out.funcdef.body, structs, holder)
    params = []
    for decl in out.funcdef.decl.type.args.params:
        if isinstance(decl, c_ast.Decl) and decl.name in structs:
            members = {m.name: m for m in structs[decl.name]}
            params += [_field_decl(members[f], name) for s, f, name in fields if s == decl.name]
        else:
            params.append(decl)
    out.funcdef.decl.type.args.params = params
    out.struct_members = {}
    return MemberArrays(out, fields)


def rewrapped(result: Kernel, naive: Kernel, split_kernel: MemberArrays) -> Kernel:
    """`result` (a pass's version of the split kernel) with the struct parameters declared as `naive`
    declares them and each field bound to its local at the top of the body."""
    out = result.copy()
    func = out.funcdef
    holders = {name: (s, f) for s, f, name in split_kernel.fields}
    ir_params = {d.name: d for d in func.decl.type.args.params if isinstance(d, c_ast.Decl)}
    params = []
    for decl in naive.funcdef.decl.type.args.params:
        if isinstance(decl, c_ast.Decl) and any(s == decl.name for s, _, _ in split_kernel.fields):
            params.append(copy.deepcopy(decl))
        else:
            params.append(ir_params.get(getattr(decl, "name", None), decl))
    func.decl.type.args.params = params
    bindings: list[c_ast.Node] = [Comment("the struct's fields read through locals: "
                                          + ", ".join(f"{s}.{f}" for s, f, _ in split_kernel.fields))]
    for name, (s, f) in holders.items():
        decl = copy.deepcopy(ir_params[name])
        if isinstance(decl.type, c_ast.PtrDecl):
            decl.type.quals = []                    # a qualifier of a parameter, not of a local
        decl.init = c_ast.StructRef(c_ast.ID(s), ".", c_ast.ID(f))
        bindings.append(decl)
    func.body.block_items = [*bindings, *(func.body.block_items or [])]
    out.struct_members = dict(naive.struct_members)
    return out


def emulated(kernel: Kernel) -> Kernel:
    """The kernel the emulator runs for one with a struct of arrays (the emulator holds arrays, not structs
    of them): each field read a parameter named `s__x`, the same for the naive kernel and every version of it,
    so that both are given the same arrays. The kernel itself where it has none or cannot be split."""
    split_kernel = split(kernel, lambda struct, field: f"{struct}__{field}")
    return split_kernel.kernel if isinstance(split_kernel, MemberArrays) else kernel


def _is_field(node: c_ast.Node, structs: dict) -> bool:
    return isinstance(node, c_ast.StructRef) and node.type == "." and isinstance(node.name, c_ast.ID) \
        and node.name.name in structs and node.field.name in {m.name for m in structs[node.name.name]}


def _why_not_field_reads(body: c_ast.Node, structs: dict) -> str:
    """Why some use of a struct parameter is not a read of one of its fields ('' when every use is)."""
    fields: set[int] = set()
    for node in walk(body):
        if _is_field(node, structs):
            fields.add(id(node.name))
        targets = []
        if isinstance(node, c_ast.Assignment):
            targets.append(node.lvalue)
        if isinstance(node, c_ast.UnaryOp) and node.op in ("&", "++", "--", "p++", "p--"):
            targets.append(node.expr)
        for target in targets:
            if _is_field(target, structs):
                return f"the field '{target.name.name}.{target.field.name}' is assigned or its address taken"
    for node in walk(body):
        if isinstance(node, c_ast.ID) and node.name in structs and id(node) not in fields:
            return f"the struct '{node.name}' is used whole, not field by field"
    return ""


def _replaced(body: c_ast.Node, structs: dict, holder: dict) -> c_ast.Node:
    return transform_top_down(body, lambda node: c_ast.ID(holder[(node.name.name, node.field.name)], node.coord)
                              if _is_field(node, structs) else None)


def _field_decl(member, name: str) -> c_ast.Decl:
    quals = ["const"] if member.is_const else []
    t: c_ast.Node = c_ast.TypeDecl(name, quals, None, c_ast.IdentifierType(member.base_type.split()))
    if member.is_pointer:
        t = c_ast.PtrDecl([], t)
    return c_ast.Decl(name, [], None, [], [], t, None, None)
