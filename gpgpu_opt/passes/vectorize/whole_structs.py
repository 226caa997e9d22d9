"""A struct a thread reads whole and updates in one straight-line block, moved by vectors: `p[e]` of an
array of structs (frontend/struct_layouts.StructLayout: m fields of one scalar type) is loaded as the
8- or 16-byte vectors that tile it into one local per field, the block computes on the locals, and the
fields it wrote are stored back once at its end, a vector where a vector's fields were all written:

    // vectorize: p[i] (6 floats of 'Particle') moved as 3 float2: 6 loads and 3 stores -> 3 and 2
    const float2 p_0 = ((const float2 *) p)[3 * i];  ...  float p_x = p_0.x;  ...
    p_x += p_vx * dt;  ...
    ((float2 *) p)[3 * i] = make_float2(p_x, p_y);
    p[i].z = p_z;

Gain, measured on an H200 (bench/corpus_results/structs_h200.txt: a 24-byte Particle advanced in place,
`drift_aos` of tests/programs/cxx/particles.cu): written by hand, 1.04x at 1M particles, 1.09x at 4M and 16M,
1.08x at 64M (CUDA events, L2 flushed); as this rewrite writes it, 1.11x, 1.10x and 1.08x at 4M, 16M and 64M
(ncu). The warp reads the same sectors with half the load instructions. Four structs a thread through
16-byte vectors ran 0.6x (a thread's 96 bytes are six accesses no warp coalesces), and staging the block's
structs in shared memory 0.98x to 1.07x, so a thread keeps its one struct, in registers.

What is proved (a whitelist, else the block is left as written; struct_loads.py may still load a read-only
struct's fields read in one statement):
- layout and alignment: the struct is m consecutive fields, its size a multiple of the vector's (16 bytes,
  else 8), and `p` a parameter the program's launches give a cudaMalloc'd buffer: vector k of element e is
  `((vector *)p)[pieces * e + k]`, aligned;
- one block: from the first access of `p[e]` to the last, the block's statements are declarations,
  assignments and `++`/`--` with no calls but math functions, all at its top level (no branch or loop between
  them), every access of a struct of that type is `p[e].f` with the same subscript text `e`, side-effect free,
  whose names the block does not assign, and no field's address is taken;
- the same memory: every field of the struct is read in the block (the loads fetch no byte the naive kernel
  does not), the block accesses other memory only through other pointer parameters (no `*`, no local pointer,
  which could be an offset of `p`), and those only where the kernel's pointers are proved not to alias
  (another array could otherwise alias the struct's words between the loads and the stores); a store of
  another thread to `p[e]` between them would be a race of the naive kernel already.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import fresh_name, ids_in, transform_top_down, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.passes.vectorize.struct_loads import struct_pointers
from gpgpu_opt.rewriting.cbuild import text
from gpgpu_opt.rewriting.vector import COMPONENTS, constructor, parse_vector_statements, vector_type

_STEPS = ("++", "--", "p++", "p--")


def rewrite_whole_structs(kernel, ctx) -> list[str]:
    """Rewrite the blocks of `kernel` (a copy the caller owns) that update a whole struct; returns what was
    done. A note says why a struct's block was left as written."""
    layouts = getattr(kernel, "struct_layouts", {}) or {}
    pointers = {name: entry for name, entry in struct_pointers(kernel, layouts).items() if entry[1] == name}
    if not pointers:
        return []
    taken = {n.name for n in walk(kernel.funcdef) if isinstance(n, (c_ast.ID, c_ast.Decl)) and n.name}
    where = Location.of(kernel.funcdef)
    done: list[str] = []
    for block in [n for n in walk(kernel.funcdef.body) if isinstance(n, c_ast.Compound)]:
        for name in pointers:
            _rewrite_block(block, name, pointers[name][0], kernel, ctx, taken, done, where)
    return done


def _field_refs(node, pointer: str) -> list[c_ast.StructRef]:
    return [n for n in walk(node) if isinstance(n, c_ast.StructRef) and n.type == "." and
            isinstance(n.name, c_ast.ArrayRef) and isinstance(n.name.name, c_ast.ID) and n.name.name.name == pointer]


def _rewrite_block(block: c_ast.Compound, pointer: str, layout, kernel, ctx, taken: set, done: list,
                   where: Location) -> None:
    items = block.block_items or []
    touching = [k for k, stmt in enumerate(items) if pointer in ids_in(stmt)]
    if not touching:
        return
    first, last = touching[0], touching[-1]
    region = items[first:last + 1]
    if len(region) == 1 and not isinstance(region[0], (c_ast.Assignment, c_ast.Decl, c_ast.UnaryOp)):
        return      # the accesses lie in one nested statement: its own blocks are looked at
    refs = [r for stmt in region for r in _field_refs(stmt, pointer)]
    if not refs:
        return
    subscript = text(refs[0].name.subscript)
    subject = f"{pointer}[{subscript}]"
    why = _refusal(region, refs, pointer, layout, subscript, kernel, ctx)
    if why is not None:
        if why:
            ctx.log.skip(subject, f"whole struct not moved by vectors: {why}", where)
        return
    size = layout.stride * layout.field_bytes
    piece = 16 if size % 16 == 0 else 8
    per_piece = piece // layout.field_bytes
    vector = vector_type(layout.field_type, per_piece)
    pieces = size // piece
    index = [f"{pieces} * ({subscript}) + {k}" if pieces > 1 else f"{subscript}" for k in range(pieces)]
    index = [i.replace(" + 0", "") for i in index]
    vectors = [fresh_name(f"{pointer}_{k}", taken) for k in range(pieces)]
    locals_ = {f: fresh_name(f"{pointer}_{f}", taken) for f in layout.fields}
    written = {r.field.name for r in refs if _is_written(r, region)}
    loads = [f"const {vector} {v} = ((const {vector} *) {pointer})[{i}];" for v, i in zip(vectors, index)]
    loads += [f"{layout.field_type} {locals_[f]} = {vectors[k // per_piece]}.{COMPONENTS[k % per_piece]};"
              for k, f in enumerate(layout.fields)]
    stores, scalar_stores = [], 0
    for k in range(pieces):
        fields = layout.fields[k * per_piece:(k + 1) * per_piece]
        if all(f in written for f in fields):
            stores.append(f"(({vector} *) {pointer})[{index[k]}] = "
                          f"{constructor(vector)}({', '.join(locals_[f] for f in fields)});")
        else:
            for f in fields:
                if f in written:
                    stores.append(f"{pointer}[{subscript}].{f} = {locals_[f]};")
                    scalar_stores += 1
    loads_before = sum(1 for r in refs if _is_read(r, region))
    stores_before = sum(1 for r in refs if _is_written(r, region))
    replaced = {id(ref): c_ast.ID(locals_[ref.field.name]) for ref in refs}
    region = [transform_top_down(stmt, lambda n: replaced.get(id(n))) for stmt in region]
    vector_stores = len(stores) - scalar_stores
    what = (f"{subject} ({layout.stride} {layout.field_type}s of '{layout.name}') moved as {pieces} {vector}: "
            f"{loads_before} loads and {stores_before} stores -> {pieces} and {len(stores)}")
    comment = Comment(f"vectorize: {what}")
    head = parse_vector_statements("\n".join(loads), {vector})
    tail = parse_vector_statements("\n".join(stores), {vector}) if stores else []
    block.block_items = items[:first] + [comment, *head, *region, *tail] + items[last + 1:]
    done.append(what + f" ({vector_stores} vector and {scalar_stores} scalar stores)" if scalar_stores else what)


def _is_read(ref: c_ast.StructRef, region) -> bool:
    """Whether the naive kernel loads the field here: anything but the target of a plain `=`."""
    return not any(isinstance(n, c_ast.Assignment) and n.op == "=" and n.lvalue is ref
                   for stmt in region for n in walk(stmt))


def _is_written(ref: c_ast.StructRef, region) -> bool:
    for stmt in region:
        for n in walk(stmt):
            if isinstance(n, c_ast.Assignment) and n.lvalue is ref:
                return True
            if isinstance(n, c_ast.UnaryOp) and n.op in _STEPS and n.expr is ref:
                return True
    return False


def _refusal(region, refs, pointer, layout, subscript, kernel, ctx) -> str | None:
    """Why the region cannot be moved by vectors ('' to skip it without a note: nothing to gain), or None."""
    size = layout.stride * layout.field_bytes
    piece = 16 if size % 16 == 0 else 8 if size % 8 == 0 else None
    if piece is None or vector_type(layout.field_type, piece // layout.field_bytes) is None:
        return f"'{layout.name}' is {size} bytes, not a whole number of 8-byte vectors of {layout.field_type}"
    if not any(_is_written(r, region) for r in refs):
        return ""       # read only: struct_loads' case
    if ctx.facts.alignment.get(pointer, 0) < piece:
        return (f"'{pointer}' is not known to be {piece}-byte aligned (no launch in this file passes it a "
                "cudaMalloc buffer)")
    for stmt in region:
        if not isinstance(stmt, (c_ast.Assignment, c_ast.Decl, c_ast.UnaryOp)) or \
                (isinstance(stmt, c_ast.UnaryOp) and stmt.op not in _STEPS):
            return f"a statement between its accesses is not a declaration or an assignment (line {_line(stmt)})"
        for n in walk(stmt):
            if isinstance(n, c_ast.FuncCall) and not _math_call(n):
                return f"a call at line {_line(n)}"
            if isinstance(n, c_ast.UnaryOp) and n.op == "&":
                return f"an address taken at line {_line(n)}"
    if any(text(r.name.subscript) != subscript for r in refs):
        return "the block reads it at more than one subscript"
    uses = sum(1 for stmt in region for n in walk(stmt) if isinstance(n, c_ast.ID) and n.name == pointer)
    if uses != len(refs):
        return f"'{pointer}' is used otherwise than as {pointer}[{subscript}].field"
    sub = refs[0].name.subscript
    if any(isinstance(n, (c_ast.FuncCall, c_ast.Assignment)) or (isinstance(n, c_ast.UnaryOp) and n.op in _STEPS)
           for n in walk(sub)):
        return "the subscript has side effects"
    assigned = set()
    for stmt in region:
        for n in walk(stmt):
            if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
                assigned.add(n.lvalue.name)
            if isinstance(n, c_ast.UnaryOp) and n.op in _STEPS and isinstance(n.expr, c_ast.ID):
                assigned.add(n.expr.name)
            if isinstance(n, c_ast.Decl):
                assigned.add(n.name)
    if ids_in(sub) & assigned:
        return "the block assigns a name of the subscript"
    if {r.field.name for r in refs if _is_read(r, region)} != set(layout.fields):
        return "the block does not read every field (the vectors would load bytes the kernel does not)"
    if any(isinstance(n, c_ast.UnaryOp) and n.op == "*" for stmt in region for n in walk(stmt)):
        return "the block also accesses memory through '*', which may alias the struct's"
    others = [n for stmt in region for n in walk(stmt) if isinstance(n, c_ast.ArrayRef)
              and not (isinstance(n.name, c_ast.ID) and n.name.name == pointer)]
    pointer_params = {p.name for p in kernel.params if p.is_pointer}
    local = next((n for n in others if not (isinstance(n.name, c_ast.ID) and n.name.name in pointer_params)), None)
    if local is not None:   # a local pointer (an offset of `p`, say) is not covered by the parameters' proof
        return f"the block also accesses {text(local)}, not through a parameter, which may alias the struct's memory"
    aliasing = ctx.facts.aliasing
    if others and not (aliasing is not None and aliasing.restrict):
        return (f"the block also accesses {text(others[0])}, which may alias the struct's memory "
                f"({aliasing.why_not if aliasing is not None and aliasing.why_not else 'not proved otherwise'})")
    return None


def _math_call(call: c_ast.FuncCall) -> bool:
    from gpgpu_opt.frontend.math_api import BY_NAME

    return isinstance(call.name, c_ast.ID) and call.name.name in BY_NAME


def _line(node) -> int:
    return node.coord.line if getattr(node, "coord", None) is not None else 0
