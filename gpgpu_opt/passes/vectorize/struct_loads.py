"""Whole-struct reads as one vector load: a thread that reads every field of `p[e]`, where `p` points to a
struct of m fields of one scalar type T (frontend/struct_layouts.StructLayout) and m * sizeof(T) is 8 or 16
bytes, loads the struct once as the CUDA vector of m T (`float2`, `float4`, `int2`, `double2`, ...):

    const float2 p_v = ((const float2 *)p)[e];   ... p_v.x ... p_v.y ...

Gain (the sector model): the m field reads are m requests of sizeof(T) bytes at a stride of m * sizeof(T);
the vector is one request over the same sectors, so the load instructions per thread drop from m to 1.

What is proved (a whitelist, else a note and the reads stay as written):
- layout: the fields are m consecutive T without padding (StructLayout), so element e's fields are the vector
  at `((vector *)p)[e]`, field k its component k (`.x` the lowest address), whatever the struct's `__align__`;
- alignment: the struct's size equals the vector's, so `(vector *)p + e` is aligned exactly when `p` is: a
  parameter the program's launches give a cudaMalloc'd buffer (analysis/alignment.py, >= the vector's size),
  or a local `S *q = p + e0;` of such a parameter that is never reassigned;
- same values: the struct's memory is never written by the kernel (no field of any pointer to it is
  assigned, incremented or has its address taken), the m reads lie in one statement of a block, none of them
  under `?:`, `&&` or `||` (the load, placed just before that statement, is then no more conditional than
  they are), and the subscript `e` is the same side-effect-free text in all of them, its names not assigned
  inside that statement.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.ast_util import fresh_name, ids_in, replace_child, walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.rewriting.vector import parse_vector_statements, vector_type

COMPONENTS = "xyzw"


def _text(node) -> str:
    return CudaGenerator(cuda_spellings=False).visit(node)


def vectorize_struct_reads(kernel, ctx) -> list[str]:
    """Rewrite the whole-struct reads of `kernel` (a copy the caller owns) in place; returns what was done.
    Notes say why a group of reads was left as written."""
    layouts = getattr(kernel, "struct_layouts", {}) or {}
    if not layouts:
        return []
    body = kernel.funcdef.body
    pointers = struct_pointers(kernel, layouts)
    if not pointers:
        return []
    done: list[str] = []
    written = _written_structs(body, pointers)
    taken = {n.name for n in walk(kernel.funcdef) if isinstance(n, c_ast.ID)} | \
            {n.name for n in walk(kernel.funcdef) if isinstance(n, c_ast.Decl) and n.name}
    where = Location.of(kernel.funcdef)
    for node in list(walk(body)):
        if isinstance(node, c_ast.Compound):
            position = 0
            while position < len(node.block_items or []):
                stmt = node.block_items[position]
                inserted = _rewrite_statement(stmt, pointers, written, ctx, taken, done, where)
                node.block_items[position:position] = inserted
                position += len(inserted) + 1
        for attr in ("iftrue", "iffalse", "stmt"):  # a statement that is not a block: becomes one if needed
            stmt = getattr(node, attr, None) if not isinstance(node, c_ast.Compound) else None
            if stmt is not None and not isinstance(stmt, c_ast.Compound):
                inserted = _rewrite_statement(stmt, pointers, written, ctx, taken, done, where)
                if inserted:
                    setattr(node, attr, c_ast.Compound(inserted + [stmt], stmt.coord))
    return done


def struct_pointers(kernel, layouts) -> dict[str, tuple[object, str | None]]:
    """Struct pointer name -> (layout, the parameter it is known to point into: itself for a parameter, for a
    local `S *q = p + e0;` never reassigned the parameter p, None when unknown)."""
    out: dict[str, tuple[object, str | None]] = {}
    for p in kernel.params:
        layout = layouts.get(p.base_type) if p.is_pointer and not p.inner_dims and not p.indirect else None
        if layout is not None:
            out[p.name] = (layout, p.name)
    assigned = assigned_names(kernel.funcdef.body)
    for decl in walk(kernel.funcdef.body):
        if not isinstance(decl, c_ast.Decl) or not isinstance(decl.type, c_ast.PtrDecl):
            continue
        inner = decl.type.type
        if not (isinstance(inner, c_ast.TypeDecl) and isinstance(inner.type, c_ast.IdentifierType)):
            continue
        names = [n for n in inner.type.names if n not in ("const", "volatile")]
        layout = layouts.get(" ".join(names))
        if layout is None:
            continue
        declared_before = decl.name in out   # a second declaration of the name (shadowing): no origin
        origin = _offset_of(decl.init, out) if decl.name not in assigned and not declared_before else None
        out[decl.name] = (layout, origin)
    return out


def _offset_of(init, pointers) -> str | None:
    """The parameter `p` of `p`, `p + e`, `e + p` (e an integer expression), else None."""
    if isinstance(init, c_ast.ID) and init.name in pointers:
        return pointers[init.name][1]
    if isinstance(init, c_ast.BinaryOp) and init.op == "+":
        for side, other in ((init.left, init.right), (init.right, init.left)):
            if isinstance(side, c_ast.ID) and side.name in pointers and not ids_in(other) & set(pointers):
                return pointers[side.name][1]
    return None


def _written_structs(body, pointers) -> set[str]:
    """The struct types (layout names) whose memory the kernel may write: a field assigned, stepped or
    its address taken through any pointer to them, or a pointer to them used otherwise than `q[e].f`."""
    written = set()
    for n in walk(body):
        target = None
        if isinstance(n, c_ast.Assignment):
            target = n.lvalue
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&"):
            target = n.expr
        if target is not None and ids_in(target) & set(pointers):
            for name in (m.name for m in walk(target) if isinstance(m, c_ast.ID) and m.name in pointers):
                written.add(pointers[name][0].name)
        if isinstance(n, c_ast.FuncCall) and n.args is not None:
            for arg in n.args.exprs:   # a pointer to them (or an offset of one) handed to a function
                for name in _pointers_passed(arg, pointers):
                    written.add(pointers[name][0].name)
    return written


def _pointers_passed(arg, pointers) -> list[str]:
    """The struct pointers an argument hands over as pointers: `q`, `q + e`, `(T *)q`, nested."""
    if isinstance(arg, c_ast.ID):
        return [arg.name] if arg.name in pointers else []
    if isinstance(arg, c_ast.Cast):
        return _pointers_passed(arg.expr, pointers)
    if isinstance(arg, c_ast.BinaryOp) and arg.op in ("+", "-"):
        return _pointers_passed(arg.left, pointers) + _pointers_passed(arg.right, pointers)
    if isinstance(arg, c_ast.TernaryOp):
        return _pointers_passed(arg.iftrue, pointers) + _pointers_passed(arg.iffalse, pointers)
    return []


def _field_reads(stmt, pointers) -> tuple[list, bool]:
    """The reads `q[e].f` of struct pointers in `stmt` as (node, parent, attribute, q, e text), and whether
    one of them lies under `?:`, `&&` or `||`."""
    reads, conditional = [], False

    def visit(node, parent, attr, guarded):
        nonlocal conditional
        if isinstance(node, c_ast.StructRef) and node.type == "." and isinstance(node.name, c_ast.ArrayRef) \
                and isinstance(node.name.name, c_ast.ID) and node.name.name.name in pointers:
            reads.append((node, parent, attr, node.name.name.name, _text(node.name.subscript)))
            conditional = conditional or guarded
            return
        inner_guard = guarded or isinstance(node, c_ast.TernaryOp) or \
            (isinstance(node, c_ast.BinaryOp) and node.op in ("&&", "||"))
        for name, child in node.children():
            visit(child, node, name, inner_guard)

    visit(stmt, None, None, False)
    return reads, conditional


def _rewrite_statement(stmt, pointers, written, ctx, taken, done, where) -> list:
    """The vector loads to insert before `stmt` (its whole-struct reads rewritten in place)."""
    if not isinstance(stmt, (c_ast.Assignment, c_ast.Decl, c_ast.FuncCall, c_ast.UnaryOp, c_ast.Return)):
        return []
    reads, conditional = _field_reads(stmt, pointers)
    groups: dict[tuple[str, str], list] = {}
    for read in reads:
        groups.setdefault((read[3], read[4]), []).append(read)
    inserted = []
    for (q, index), group in groups.items():
        layout, origin = pointers[q]
        fields = {r[0].field.name for r in group}
        if fields != set(layout.fields):
            continue  # not the whole struct: the field reads are as good as a vector
        vector = vector_type(layout.field_type, layout.stride)
        subject = f"{q}[{index}]"
        why = _refusal(layout, vector, origin, written, conditional, group, stmt, ctx)
        if why:
            ctx.log.skip(subject, f"whole struct not loaded as one vector: {why}", where)
            continue
        name = fresh_name(f"{q}_v", taken)
        const_vector = f"const {vector}"
        inserted += parse_vector_statements(f"{const_vector} {name} = (({const_vector} *){q})[{index}];",
                                            {vector})
        for node, parent, attr, _, _ in group:
            member = c_ast.StructRef(c_ast.ID(name), ".", c_ast.ID(COMPONENTS[layout.fields.index(node.field.name)]))
            replace_child(parent, attr, member)
        done.append(f"{subject}: the {layout.stride} fields of '{layout.name}' as one {vector} load "
                    f"({layout.stride} loads of {layout.field_bytes} bytes -> 1 of "
                    f"{layout.stride * layout.field_bytes})")
    return inserted


def _refusal(layout, vector, origin, written, conditional, group, stmt, ctx) -> str | None:
    size = layout.stride * layout.field_bytes
    if vector is None or size not in (8, 16):
        return f"'{layout.name}' is {size} bytes, not the size of a CUDA vector of {layout.field_type} (8 or 16)"
    if layout.name in written:
        return f"the kernel may write the memory of '{layout.name}' structs"
    if origin is None:
        return "the pointer is not a parameter, nor a never reassigned offset of one"
    if ctx.facts.alignment.get(origin, 0) < size:
        return (f"'{origin}' is not known to be {size}-byte aligned (no launch in this file passes it a "
                "cudaMalloc buffer)")
    if conditional:
        return "a field read lies under '?:', '&&' or '||' (the vector load would not be)"
    if _may_write_memory(stmt):
        return "the statement may write memory before its reads (a call or an assignment inside it)"
    subscript = group[0][0].name.subscript
    if any(isinstance(n, (c_ast.FuncCall, c_ast.Assignment)) or
           (isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--")) for n in walk(subscript)):
        return "the subscript has side effects"
    names = {n.name for n in walk(subscript) if isinstance(n, c_ast.ID)}
    if names & assigned_names(stmt):
        return "the statement assigns a name of the subscript"
    return None


def _may_write_memory(stmt) -> bool:
    """Whether evaluating `stmt` may store to memory before its last read: an assignment or step inside it
    (not its own top-level store, which comes after its operands), or a call other than of a math function."""
    from gpgpu_opt.frontend.math_api import BY_NAME

    inner = stmt.rvalue if isinstance(stmt, c_ast.Assignment) else stmt.init if isinstance(stmt, c_ast.Decl) \
        else stmt
    for n in walk(inner) if inner is not None else ():
        if isinstance(n, c_ast.Assignment) or (isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--")):
            return True
        if isinstance(n, c_ast.FuncCall) and not (isinstance(n.name, c_ast.ID) and n.name.name in BY_NAME
                                                 and not any(isinstance(m, c_ast.UnaryOp) and m.op == "&"
                                                             for m in walk(n))):
            return True
    if isinstance(stmt, c_ast.Assignment):  # its target's subscripts are evaluated too
        return _may_write_memory(c_ast.Compound([stmt.lvalue])) if not isinstance(stmt.lvalue, c_ast.ID) else False
    return False
