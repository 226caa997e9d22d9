"""Widening (modern targets): each thread handles V consecutive x, and each global access that runs along x
one element per thread (`P[f + idx]`, f not depending on x) becomes one V-element vector access (16 bytes
for float4): the warp then asks for 512 contiguous bytes with a quarter of the instructions.

This is a thread merge in x by V with the copies adjacent (not a block apart, as merge/thread_merge.py
places them), so that the V elements of a copy group are one aligned vector:
- `idx` becomes the first of the thread's V x (`V * (blockIdx.x * blockDim.x + threadIdx.x)`); a statement
  that does not depend on x is kept once, a local that does becomes a vector (its component c is copy c's
  value), a statement that does is evaluated per component (`make_float4(e(idx), e(idx + 1), ...)`);
- the vector path needs its accesses aligned to V elements: the base from alignment.py, `f` a multiple of V
  (sympy); what is not proved is tested at run time on the address, and where a guard `idx < E` is not known
  to cut at a multiple of V the last group is tested too. Threads that fail a test take the scalar path: the
  original statements for idx, idx + 1, ..., idx + V - 1, each under the original guard (the ragged tail);
- the launch covers V times as many x per block (unguarded kernels: a block V times narrower, so that it
  still covers whole naive blocks, unless the stated thread space is tiled by the wider one).
Only declarations, assignments, `if`s and loops with a constant trip count or one every lane shares (a header
that reads no x: a z loop's `k < nz - 1`, streams.py), optionally under one final guard, are widened
(`for (int j = 0; j < NVAR; j++) v[i + j * n] = c[j];`: the loop stays, each iteration's accesses along x are
vectors; `n % V == 0` keeps every iteration's vectors aligned, tested at run time). An `if` on x runs once
per lane, x-dependent statements before the guard move into it, and a read that is not affine (a gather) is
read per lane from an array the kernel never writes (lanes.py). A subscript through locals of x (`c + k * xy`,
`int c = i + j * nx;`) is a vector access from the row its definition gives; an edge clamp on y is one
vector, one on x is read lane by lane (subscripts.py). Loops are widened only where they stream: an element
read again by other threads (`B[k]`, `in[(y + j) * w + x]`) is left to coalesce, merge and prefetch, which
reuse it; a loop marching planes (`k * nx * ny`) streams (streams.py says why). V fills the target's
preferred access (16 bytes: float4, double2, `half8` for halves alone: a vector the output defines, CUDA
having none) with the widest element, lowered to a vector every element type has (`__half2` for halves beside
floats, or where the program names `half8` itself).
Every refusal is a note.
"""
from __future__ import annotations

from typing import NamedTuple

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import AS_WRITTEN
from gpgpu_opt.analysis.loops import canonical_loop
from gpgpu_opt.analysis.symbolic import BDIM, BID, TID, cuda_text, is_opaque
from gpgpu_opt.ast_util import ids_in, substitute, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt import cuda_types
from gpgpu_opt.cuda_types import element_size
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.passes.vectorize import lanes, streams, subscripts
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, conj, parse_expr, text
from gpgpu_opt.rewriting.vector import MAX_VECTOR_BYTES, parse_vector_statements, vector_type

_X_BUILTINS = {("threadIdx", "x"), ("blockIdx", "x"), ("blockDim", "x"), ("gridDim", "x")}


class NotWidenable(Exception):
    """No access to widen, or widening switched off (no note needed beyond the caller's)."""


class Widened(NamedTuple):
    """What widen did (for the decision log), and the gathers it reads lane by lane (`img[up[e]]`)."""
    what: str
    gathers: list[str]
    #: (constant, C text over the scalar parameters) of the trip count of the loop the widened body runs, each
    #: None where not known (the text None where the source fixes it); None where the body has no such loop.
    streamed: tuple | None = None
    #: Bytes of the widest vector access: V times the largest element widened (float4: 16).
    vector_bytes: int = 0


def widen(kernel: Kernel, ctx, info: KernelInfo, requested: int | None = None,
          max_bytes: int | None = None) -> Widened:
    """Rewrite `kernel` in place; returns what was done, or raises NotWidenable/Unsupported. V is `requested`
    (`--vector-width`), else the target's preferred access, or `max_bytes` where narrower, over the element
    size (`_width`)."""
    body = kernel.body.block_items or []
    idx_pos, idx_decl = _index_local(info, body)
    idx = idx_decl.name
    prefix, guard, stmts = lanes.split_guard(body[idx_pos + 1:])
    loops = _loop_vars(info, prefix + stmts, idx)
    vectors = _vector_locals(info, prefix + stmts, idx)
    if guard is not None and ids_in(guard.cond) & vectors:
        raise Unsupported(f"the guard '{text(guard.cond)}' depends on x through "
                          f"'{sorted(ids_in(guard.cond) & vectors)[0]}', a local computed before it")
    prefix, moved = lanes.moved_prefix(prefix, vectors, idx)
    why = lanes.lane_branch_problem(stmts, vectors, idx, info) or lanes.loop_header_problem(stmts, vectors) \
        or lanes.effect_problem(moved + stmts, info)
    if why:
        raise Unsupported(why)
    local_types = {s.name: " ".join(s.type.type.names) for s in lanes.flat(moved + stmts)
                   if isinstance(s, c_ast.Decl) and s.name in vectors}
    lead = 0
    while lead < len(stmts) and not (_names(stmts[lead]) & (vectors | {idx})) \
            and not isinstance(stmts[lead], c_ast.Pragma):     # a pragma stays with the loop it is about
        lead += 1
    if lanes.written(stmts[:lead]) & set().union(*(ids_in(s) for s in moved)):
        lead = 0        # they would run before the statements moved from before the guard, which read them
    ahead, stmts = stmts[:lead], stmts[lead:]
    if not moved:       # `int xy = nx * ny;` after `int c = i + j * nx;`: ahead, where the alignment tests read it
        known = {p.name for p in info.kernel.params} | {t.name for t in body[:idx_pos + 1] + prefix + ahead
                                                        if isinstance(t, c_ast.Decl)}
        hoisted = subscripts.hoistable_uniform(stmts, vectors, idx, info.assigned, known)
        ahead, stmts = ahead + hoisted, [t for t in stmts if not any(t is h for h in hoisted)]
    elem: dict[str, str] = {}
    per_lane = lanes.per_lane_nodes(stmts, vectors, idx)
    defs = subscripts.definitions(moved + stmts, vectors, info.assigned, info.decl_counts)
    accesses, gathers = _accesses(info, stmts, idx, elem, per_lane, (vectors, defs))
    widened = [a for a in accesses if a[2] and id(a[1]) not in per_lane]
    if not widened:
        raise NotWidenable("no access runs along x one element per thread")
    rows: dict[int, c_ast.Node] = {}    # id(subscript) -> its lane locals written out (subscripts.py)
    for array, node, _ in widened:
        written_out = subscripts.written_out(node.subscript, vectors, defs)
        if written_out is None or (written_out is not node.subscript and
                                   subscripts.without_index(written_out, idx) is None):
            raise Unsupported(f"'{sorted(ids_in(node.subscript) & vectors)[0]}' depends on x and is used in the "
                              f"subscript of {array}[{text(node.subscript)}], read or written as a vector")
        rows[id(node.subscript)] = written_out
    if loops:
        _no_reuse_in_loops(info, stmts, loops)
    width = _width(requested, [elem[a] for a, _, _ in widened] + list(local_types.values()), ctx, max_bytes)
    checks: list[str] = []
    starts: dict[str, list] = {}
    tested: dict[str, list] = {}        # array -> (f, its clamps) of each row start tested at run time
    stride_values = streams.stride_values(info, widened, loops)
    for array, node, _ in widened:
        need = width * element_size(elem[array])
        offset = info.by_node[(id(node), "read")] if (id(node), "read") in info.by_node else \
            info.by_node[(id(node), "write")]
        f = sympy.expand(subscripts.index_of(offset) - (BID["x"] * BDIM["x"] + TID["x"]))
        f, strides = _loop_strides(f, loops, node, info)
        fixed = [t for t in strides if t.lstrip("-").isdigit() and int(t) % width]
        if fixed:
            plural = "" if fixed[0] in ("1", "-1") else "s"
            raise Unsupported(f"{array}[{text(node.subscript)}]: a loop iteration moves it by {fixed[0]} "
                              f"element{plural}, so its {width}-element vectors are never aligned")
        _one_alignment(array, node, f, starts.setdefault(array, []), width)
        strides = [t for t in strides if not t.lstrip("-").isdigit()]
        for stride in strides:      # every iteration's row start is aligned when the first one's is
            check = f"{stride} % {width} == 0"
            if check not in checks:
                checks.append(check)
        proven_base = ctx.facts.alignment.get(array, 0) >= need
        if proven_base and _multiple(f, width):
            continue
        clamps = subscripts.clamps_in(rows[id(node.subscript)])
        if any(key == clamps and streams.implied(sympy.expand(f - f0), stride_values, width)
               for f0, key in tested.get(array, [])):
            continue    # another tested row start of the array, plus strides tested too
        tested.setdefault(array, []).append((f, clamps))
        subscript = subscripts.zero_folded(substitute(rows[id(node.subscript)],
                                                      {v: c_ast.Constant("int", "0") for v in loops}))
        where = array if _multiple(f, width) else _row(array, subscript, idx)
        check = f"((size_t) {where} & {need - 1}) == 0"
        if check not in checks:
            checks.append(check)
    x_clauses, kept_clauses = [], []
    if guard is not None:
        for clause in g.clauses(guard.cond):
            if idx not in ids_in(clause):
                kept_clauses.append(clause)
                continue
            bound = _upper_bound(clause, idx)
            if bound is None:
                raise Unsupported(f"the guard clause '{text(clause)}' is not 'idx < E'")
            x_clauses.append((clause, bound))
    for clause, bound in x_clauses:
        if not _known_multiple(bound, width, ctx):
            checks.insert(0, f"{idx} + {width - 1} < {text(bound)}")
    launch = _launch(info, ctx, width, guard is not None)
    # -- the rewrite
    first = f"{width} * ({text(idx_decl.init)})"
    idx_decl.init = parse_expr(first)
    along_x = {id(node) for _, node, _ in widened}
    lowering = lanes.Lowering(info, idx, vectors, {**elem, **local_types}, width, along_x)
    vector_body = lowering.statements(moved + stmts,
                                      lambda array, subscript: _row(array, rows.get(id(subscript), subscript), idx))
    written_out = {name for _, node, _ in widened for name in ids_in(node.subscript) & vectors}
    vector_body = subscripts.without_unused(vector_body, written_out)
    scalar_guard = conj([clause for clause, _ in x_clauses])
    if checks:     # the scalar path: the original statements (those moved from before the guard first) per copy
        k = info.fresh("k")
        copy_of = {idx: parse_expr(f"{idx} + {k}")}
        inner = c_ast.Compound([substitute(s, copy_of) for s in stmts])
        if scalar_guard is not None:
            inner = c_ast.Compound([c_ast.If(substitute(scalar_guard, copy_of), inner, None)])
        inner.block_items[:0] = [substitute(s, copy_of) for s in moved]
        loop = parse_vector_statements(f"for (int {k} = 0; {k} < {width}; {k}++) {{}}", set())[0]
        loop.stmt = inner
        split = c_ast.If(parse_expr(" && ".join(f"({c})" if "&" in c else c for c in checks)),
                         c_ast.Compound(vector_body), c_ast.Compound([loop]))
        inner_items = [split]
    else:
        inner_items = vector_body
    note = Comment(f"vectorize: each thread handles {width} consecutive x, one {width}-wide vector access per "
                   f"array{'; unaligned or ragged groups take the scalar path' if checks else ''}")
    if guard is not None:
        guard.cond = conj(kept_clauses + [c for c, _ in x_clauses])
        guard.iftrue = c_ast.Compound(ahead + inner_items)
        kernel.body.block_items = body[:idx_pos] + [note, idx_decl] + prefix + [guard]
    else:
        kernel.body.block_items = body[:idx_pos] + [note, idx_decl] + prefix + ahead + inner_items
    kernel.launch = launch
    names = ", ".join(sorted({f"{a}[{text(n.subscript)}]" for a, n, _ in widened}))
    vtypes = ", ".join(sorted({vector_type(elem[a], width) for a, _, _ in widened}))
    return Widened(f"{width} consecutive x per thread: {names} as {width}-element vectors ({vtypes})"
                   + (f"; tested at run time: {'; '.join(checks)} (else the scalar path)" if checks else
                      "; alignment and the thread space's edge proved, no scalar path"), gathers,
                   streams.streamed(info, stmts, ctx), width * max(element_size(elem[a]) for a, _, _ in widened))


def _one_alignment(array: str, node: c_ast.ArrayRef, f: sympy.Expr, others: list, width: int) -> None:
    """Refuses two vector accesses of one array a constant number of elements apart that V does not divide
    (a stencil's `in[x]`, `in[x + 1]`): no address passes both alignment tests, so every group would take the
    scalar path."""
    for node2, f2 in others:
        apart = sympy.expand(f - f2)
        if apart.is_Integer and int(apart) % width:
            raise Unsupported(f"{array}[{text(node2.subscript)}] and {array}[{text(node.subscript)}] are "
                              f"{abs(int(apart))} element{'s' if abs(int(apart)) != 1 else ''} apart: their "
                              f"{width}-element vectors are never both aligned")
    others.append((node, f))


def _width(requested: int | None, element_types: list[str], ctx, max_bytes: int | None = None) -> int:
    """V: `requested`, or the most elements of the widest element type that fill the target's preferred
    access (16 bytes: float4, double2), lowered until every type has a V-element vector in the type table
    (`__half` has `__half2` and the output's `half8`, which needs a name the program leaves free: _usable)."""
    if requested:
        missing = sorted({t for t in element_types if not _usable(vector_type(t, requested), ctx)})
        if missing:
            raise Unsupported(f"no {requested}-element vector type of {', '.join(missing)} "
                              f"(--vector-width {requested})")
        return requested
    unknown = sorted({t for t in element_types if element_size(t) is None})
    if unknown:
        raise Unsupported(f"no vector type of {', '.join(unknown)}")
    widest = min(ctx.options.target.preferred_vector_bytes, max_bytes or MAX_VECTOR_BYTES)
    width = max(1, widest // max(element_size(t) for t in element_types))
    while width > 1 and not all(_usable(vector_type(t, width), ctx) for t in element_types):
        width //= 2
    if width == 1:
        raise Unsupported(f"no {widest}-byte-or-narrower vector type holds two elements of each of "
                          f"{', '.join(sorted(set(element_types)))}")
    return width


def _usable(vtype: str | None, ctx) -> bool:
    """A vector of the CUDA type table, or one the output defines (`half8`) where the program leaves its name
    free (KernelFacts.definable_vectors)."""
    return vtype is not None and (cuda_types.defined_vector(vtype) is None
                                  or vtype in ctx.facts.definable_vectors)


def _loop_vars(info: KernelInfo, stmts: list, idx: str) -> set[str]:
    """The iterators of the loops among `stmts`, after checking that only declarations, assignments, `if`s
    (lanes.py) and loops with a constant trip count (`for (int j = 0; j < NVAR; j++)`) or one every lane
    shares (streams.uniform_header), kept as loops (each iteration's accesses along x become vectors), of
    such statements are there."""
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, (c_ast.Decl, c_ast.Assignment, c_ast.Pragma)):    # `#pragma unroll`: kept where it is
            continue
        if isinstance(s, c_ast.If):
            names |= set().union(*(_loop_vars(info, b, idx) for b in lanes.branches(s)))
            continue
        if not isinstance(s, c_ast.For):
            raise NotWidenable(f"{lanes.statement_kind(s)} at line {lanes.line_of(s)} (only declarations, assignments, "
                               "'if's and 'for' loops are widened)")
        loop = canonical_loop(s, info.flat_env())
        if loop is None or not isinstance(s.init, c_ast.DeclList) or loop.multiplicative:
            raise NotWidenable(f"the loop at line {lanes.line_of(s)} is not 'for (int j = a; j < b; j += c)' with "
                               "its own iterator")
        if loop.var == idx or idx in ids_in(s.init) or idx in ids_in(s.cond) or idx in ids_in(s.next):
            raise NotWidenable(f"the loop at line {lanes.line_of(s)} depends on x in its header")
        trips = loop.trip_count()
        why = None if trips is not None and trips.is_Integer else \
            "its trip count is not known" if trips is None else streams.uniform_header(info, s, idx)
        if why:
            raise NotWidenable(f"the loop at line {lanes.line_of(s)} has no constant trip count, and {why}")
        names |= {loop.var} | _loop_vars(info, g.items(s.stmt), idx)
    return names


def _no_reuse_in_loops(info: KernelInfo, stmts: list, loops: set[str]) -> None:
    """A kernel with loops is widened only where its loops stream: no global element that other threads or
    iterations read again (`B[k]` read by every thread, `in[(y + j) * w + x]` by the next rows' threads),
    which coalesce, merge and prefetch turn into reuse from shared memory or registers, and which a
    widened launch would take from them."""
    iterators = {sympy.Symbol(v, integer=True) for v in loops}
    across = {TID["y"], BID["y"], TID["z"], BID["z"]}
    params = {p.name for p in info.kernel.arrays}
    for loop in (n for s in stmts for n in walk(s) if isinstance(n, c_ast.For)):
        for n in walk(loop.stmt):
            if not (isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name in params):
                continue
            a = info.by_node.get((id(n), "read")) or info.by_node.get((id(n), "write"))
            if a is None or subscripts.index_of(a) is None:
                raise Unsupported(f"{n.name.name}[{text(n.subscript)}] is not affine")
            symbols = subscripts.index_of(a).free_symbols
            if not {TID["x"], BID["x"]} & symbols:
                raise Unsupported(f"{a.array}[{a.index_text}] in the loop at line {lanes.line_of(loop)} is the same "
                                  "element for every thread in x: reuse left to the later passes")
            if symbols & iterators and symbols & across and not streams.plane_stride(subscripts.index_of(a), iterators):
                raise Unsupported(f"{a.array}[{a.index_text}] in the loop at line {lanes.line_of(loop)} moves with "
                                  "both the loop and y: threads in y read it again, reuse left to the later passes")


def _loop_strides(f: sympy.Expr, loops: set[str], node: c_ast.Node, info: KernelInfo):
    """(f at the loops' first iterations, the run-time tests that every iteration's stride keeps the vectors
    aligned) for an access offset f affine in the loop iterators, each iterator's coefficient a product of
    integer scalar parameters (`j * nelr`: f0 = 0, `nelr % V == 0` unless nelr is a known multiple)."""
    names = {sympy.Symbol(v, integer=True) for v in loops} & f.free_symbols
    if not names:
        return f, []
    params = {p.name for p in info.kernel.params if not p.is_pointer}
    strides = []
    for var in sorted(names, key=str):
        coefficient = sympy.expand(f.coeff(var))
        if f.diff(var, 2) != 0 or coefficient.free_symbols & names \
                or any(str(v) not in params for v in coefficient.free_symbols) \
                or not all(e == 1 for term in sympy.Mul.make_args(coefficient) for _, e in [term.as_base_exp()]):
            raise Unsupported(f"{text(node)}: its offset {f} is not an iterator times a product of the "
                              "kernel's integer parameters")
        strides.append(coefficient)
    first = sympy.expand(f.subs({v: 0 for v in names}))
    return first, [cuda_text(s) if s.is_Atom else f"({cuda_text(s)})" for s in strides]


def _names(stmt: c_ast.Node) -> set[str]:
    """The names a statement reads or writes, a declaration's own name included (`float s = 1.0f;` is about
    s: where s becomes a vector, so does its declaration, and the scalar path declares it per copy)."""
    names = ids_in(stmt)
    return names | {stmt.name} if isinstance(stmt, c_ast.Decl) else names


def _index_local(info: KernelInfo, body: list) -> tuple[int, c_ast.Decl]:
    env = info.flat_env()
    for k, s in enumerate(body):
        if isinstance(s, c_ast.Decl) and s.init is not None and s.name in env and s.name not in info.assigned \
                and info.decl_counts[s.name] == 1 \
                and sympy.expand(env[s.name] - (BID["x"] * BDIM["x"] + TID["x"])) == 0:
            others = [n for j, t in enumerate(body) if j != k for n in walk(t)
                      if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID)
                      and (n.name.name, n.field.name) in _X_BUILTINS]
            if others:
                raise Unsupported("the kernel uses the x builtins other than through its global x index")
            return k, s
    raise NotWidenable(_no_index(info, body, env))


def _no_index(info: KernelInfo, body: list, env: dict) -> str:
    """Why no statement of the body is `int i = blockIdx.x * blockDim.x + threadIdx.x;` (declared once, never
    assigned again), naming the local that comes closest."""
    for s in body:
        if not (isinstance(s, c_ast.Decl) and s.init is not None):
            continue
        value = env.get(s.name)
        if value is None and {"threadIdx", "blockIdx"} & ids_in(s.init):
            return f"'{s.name}' holds an x index but is assigned again or declared twice"
        if value is not None and TID["x"] in value.free_symbols and value.free_symbols - {TID["x"]}:
            return (f"'{s.name}' is {cuda_text(value)}, not the global x index blockIdx.x * blockDim.x + "
                    "threadIdx.x that widening starts from")
    return "no local holds the global x index (int i = blockIdx.x * blockDim.x + threadIdx.x;)"


def _vector_locals(info: KernelInfo, stmts: list, idx: str) -> set[str]:
    """The lane locals (lanes.lane_locals), after checking that each is a scalar of a vector type's element
    and that nothing x-dependent is written where one place would stand for the V lanes."""
    vectors = lanes.lane_locals(stmts, idx)
    params = {p.name for p in info.kernel.arrays}
    for s in lanes.flat(stmts):
        # `v.x = f(x)`: one member for the V lanes (the per-lane copies would all write it)
        if isinstance(s, c_ast.Assignment) and isinstance(s.lvalue, c_ast.StructRef) and \
                (ids_in(s.rvalue) & (vectors | {idx}) or ids_in(s.lvalue) & vectors):
            owner = "a local" if isinstance(s.lvalue.name, c_ast.ID) else "an array element (an array of structs)"
            raise Unsupported(f"'{text(s.lvalue)}' depends on x and is a member of {owner}, which is not widened")
        if isinstance(s, c_ast.Assignment) and isinstance(s.lvalue, c_ast.ArrayRef) and \
                not (isinstance(s.lvalue.name, c_ast.ID) and s.lvalue.name.name in params) and \
                lanes.depends(s, vectors, idx):
            raise Unsupported(f"'{text(s.lvalue)}' depends on x and is an element of a local array, one for the "
                              "V lanes, which is not widened")
        if isinstance(s, c_ast.Decl) and s.name in vectors:
            t = s.type
            if not (isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType)
                    and vector_type(" ".join(n for n in t.type.names), 2)):
                raise Unsupported(f"'{s.name}' depends on x and is not a scalar of a vector type's element")
    return vectors


def _accesses(info: KernelInfo, stmts: list, idx: str, elem: dict, per_lane: set[int], lane_defs) \
        -> tuple[list, list]:
    """(array, ArrayRef, along x?) of each global access, and the gathers (`A[e]` read per lane, e not affine;
    A never written by the kernel, so the lanes may read it in any order; what e reads joins `per_lane`);
    raises for an access that is none of these, or along x not one element per thread (`in[x * cols + y]`,
    left to coalesce, which stages it)."""
    params = {p.name: p for p in info.kernel.arrays}
    out, gathers = [], []
    for s in stmts:
        for n in walk(s):
            if not (isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID)):
                continue
            a = info.by_node.get((id(n), "read")) or info.by_node.get((id(n), "write"))
            if a is not None and a.kind == "clamped" and n.name.name in params:
                along = subscripts.clamped(info, a, n, idx, lane_defs)
                if along is not None:       # the same piece in every lane: one vector
                    elem[a.array] = params[a.array].base_type
                    out.append((a.array, n, True))
                    continue
                _gather(info, n, "is an edge clamp read lane by lane")      # raises where the kernel writes it
                per_lane |= {id(m) for m in walk(n.subscript)}      # each lane its own clamped element: no gather
                continue
            if a is not None and a.kind in _READ_PER_LANE and n.name.name in params:
                gathers.append(_gather(info, n, f"is left as written ({a.why_unresolved})"))
                per_lane |= {id(m) for m in walk(n.subscript)}      # what its subscript reads, per lane too
                continue
            if a is not None and a.kind in AS_WRITTEN:  # a volatile local pointer too
                raise Unsupported(f"{n.name.name}[{text(n.subscript)}] is left as written ({a.why_unresolved})")
            if n.name.name not in params:
                continue
            if a is None or a.index is None:
                gathers.append(_gather(info, n, "is not affine"))
                per_lane |= {id(m) for m in walk(n.subscript)}
                continue
            if any(is_opaque(sym) for sym in a.index.free_symbols) and ids_in(n.subscript) & lane_defs[0]:
                gathers.append(_gather(info, n, "reads at an index each lane loads"))   # `a[k]`, k = idx[i]
                per_lane |= {id(m) for m in walk(n.subscript)}
                continue
            elem[a.array] = params[a.array].base_type
            f = sympy.expand(a.index - (BID["x"] * BDIM["x"] + TID["x"]))
            if not ({TID["x"], BID["x"]} & a.index.free_symbols):
                out.append((a.array, n, False))
            elif not ({TID["x"], BID["x"]} & f.free_symbols):
                out.append((a.array, n, True))
            else:
                raise Unsupported(f"{a.array}[{a.index_text}] is not one element per thread along x")
    return out, gathers


#: The kinds of access (analysis/accesses.py) whose subscript every pass leaves as written that a lane may
#: still read as written: the subscript names a parameter's element, only its step along x is not known.
_READ_PER_LANE = ("quasi-affine", "clamped", "redefined")


def _gather(info: KernelInfo, node: c_ast.ArrayRef, why: str) -> str:
    """`A[e]`, a read per lane; raises where the kernel writes A (or this is a write)."""
    array = node.name.name
    what = f"{array}[{text(node.subscript)}]"
    if (id(node), "write") in info.by_node or (id(node), "read") not in info.by_node:
        raise Unsupported(f"{what} {why} and is written")
    if array in info.written:
        raise Unsupported(f"{what} {why}, and the kernel writes {array}: its lanes could not be read in "
                          "any order")
    return what


def _row(array: str, subscript: c_ast.Node, idx: str) -> str:
    """`P + f` for the subscript `f + idx` (`P` where f is 0): where the thread's vectors start."""
    if isinstance(subscript, c_ast.ID) and subscript.name == idx:
        return array
    if isinstance(subscript, c_ast.BinaryOp) and subscript.op == "+":
        for rest, last in ((subscript.left, subscript.right), (subscript.right, subscript.left)):
            if isinstance(last, c_ast.ID) and last.name == idx and idx not in ids_in(rest):
                return f"({array} + {text(rest)})"
    rest = subscripts.without_index(subscript, idx)
    if rest is not None:
        shown = f"({text(rest)})" if isinstance(rest, c_ast.TernaryOp) else text(rest)
        return f"({array} + {shown})"
    return f"({array} + ({text(subscript)}) - {idx})"


def _multiple(expr: sympy.Expr, width: int) -> bool:
    try:
        poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str)) if expr.free_symbols else None
    except sympy.PolynomialError:
        return False
    coeffs = poly.coeffs() if poly is not None else [expr]
    return all(c.is_Integer and int(c) % width == 0 for c in coeffs)


def _upper_bound(clause: c_ast.Node, idx: str) -> c_ast.Node | None:
    if isinstance(clause, c_ast.BinaryOp) and clause.op == "<" and isinstance(clause.left, c_ast.ID) \
            and clause.left.name == idx and idx not in ids_in(clause.right):
        return clause.right
    return None


def _known_multiple(bound: c_ast.Node, width: int, ctx) -> bool:
    if isinstance(bound, c_ast.Constant):
        return int(bound.value.rstrip("uUlL"), 0) % width == 0
    if isinstance(bound, c_ast.ID) and bound.name in ctx.facts.bindings:
        return ctx.facts.bindings[bound.name] % width == 0
    return False


def _launch(info: KernelInfo, ctx, width: int, guarded: bool) -> LaunchConfig:
    bx, by = ctx.facts.naive_block.xy
    stated = ctx.facts.global_space[0]
    if guarded or (stated is not None and stated % (bx * width) == 0):
        return LaunchConfig(block=(bx, by), outputs_per_block=(bx * width, by))
    if ctx.facts.launched_in_file and not ctx.facts.naive_block_known:   # the cut block covers bx naive threads: only
        # right if the sites' block is bx (a kernel the file does not launch gets a run-time contract instead)
        raise Unsupported(f"the kernel has no guard and the block its launch uses is not known (assumed {bx}x{by})")
    if bx % width or (bx // width) * by < ctx.options.target.warp_size:
        raise Unsupported(f"the kernel has no guard and a {bx}x{by} block cannot be cut {width} times in x")
    return LaunchConfig(block=(bx // width, by), outputs_per_block=(bx, by))
