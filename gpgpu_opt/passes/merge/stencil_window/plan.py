"""Is the kernel a small stencil over one array, and which window does a thread keep (stencil_window/__init__)."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import NotAffine, iterator_symbol, to_sympy
from gpgpu_opt.ast_util import walk
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import NotAccumulation, known
from gpgpu_opt.passes.merge.dependence import G, builtin_axis, global_value
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported, text

#: A warp's lanes are consecutive x: blocks are a warp wide, and this many rows of threads.
BLOCK_ROWS = 8
#: Rows of outputs per thread. H200, 8192^2, with every row's loads issued together: 4 rows against 2 is
#: 0.1341 ms against 0.1404 for a 3x3 blur, equal for Jacobi and imregionmax, 1% slower for demosaic.
ROWS_PER_THREAD = 4
#: A stencil reaches at most this far from its output in x (a shuffle brings one neighbouring lane's
#: elements) and in y; wider filters (conv's 16x16) are left to the halo tiles.
MAX_REACH = 4
#: Reads per output above which the window's registers would crowd out occupancy.
MAX_READS = 25


class NotStencil(NotAccumulation):
    """Not a small stencil over one array (no note: most kernels)."""


@dataclass
class Read:
    node: c_ast.ArrayRef
    dy: dict                    # offset in rows: {loop variable or 1: coefficient}
    dx: dict                    # offset in columns, likewise


@dataclass
class Bound:
    """`lo <= index` (lower) or `index < hi` (upper) of one axis, as a sympy expression of parameters."""
    axis: str
    lower: bool
    value: sympy.Expr


@dataclass
class Window:
    array: str
    element: str                # the array's element type
    pitch: sympy.Expr           # elements from one row to the next
    reads: list[Read]
    reach: dict                 # axis -> (min offset, max offset) over all reads
    bounds: list[Bound]         # the naive guard's bounds on the global indices (and x, y >= 0)
    uniform: list[c_ast.Node]   # guard clauses that do not depend on the thread
    vector: int                 # V: outputs per thread in x, loaded as one V-wide vector per row
    rows: int                   # R: outputs per thread in y
    load_width: int             # L: a row's V elements are V / L loads of L-wide vectors (1: elements)
    load_test: str              # what is checked at run time for them: "", "pitch" or "address"
    why: str
    interior: Interior | None = None    # the unguarded fast path where every copy's guard holds
    block: tuple[int, int] = (32, BLOCK_ROWS)
    loop_ranges: dict = field(default_factory=dict)

    @property
    def outputs_per_block(self) -> tuple[int, int]:
        return self.block[0] * self.vector, self.block[1] * self.rows


def plan_stencil_window(kernel, ctx: PassContext, info: KernelInfo) -> Window:
    if not ctx.options.target.has_warp_shuffle:
        raise NotStencil("the target has no warp shuffles (the halo tiles take small stencils there)")
    used = {builtin_axis(n, "xy") for n in walk(kernel.body)} - {None}
    if used != {"x", "y"}:
        raise NotStencil("not a 2-D thread space")
    array, reads, pitch, ranges = _stencil_reads(info, ctx)
    request = ctx.options.merge_request
    info.check_kernel()
    _check_index_uses(info)
    _check_stores(info, array, ctx)
    reach = {a: (min(_extreme(r.dy if a == "y" else r.dx, ranges, min) for r in reads),
                 max(_extreme(r.dy if a == "y" else r.dx, ranges, max) for r in reads)) for a in "xy"}
    if max(abs(v) for a in "xy" for v in reach[a]) > MAX_REACH:
        raise NotStencil("the stencil reaches too far for a register window")
    bounds, uniform = _guard(info, reads, ctx)
    element = info.params[array].base_type
    vector, load_width, load_test, why = _vector(array, element, pitch, ctx, request)
    if max(-reach["x"][0], reach["x"][1]) > vector:
        raise Unsupported(f"the stencil reaches {max(-reach['x'][0], reach['x'][1])} columns, more than the "
                          f"{vector} a neighbouring lane holds")
    rows = request.y if request is not None else ROWS_PER_THREAD
    window = Window(array, element, pitch, reads, reach, bounds, uniform, vector, rows, load_width, load_test,
                    why, loop_ranges=ranges)
    interior = _plan_interior(info, ctx, array, reads, vector)
    if isinstance(interior, str):
        window.why += f"; no interior fast path: {interior}"
    else:
        window.interior = interior
        if interior.note:
            window.why += f"; {interior.note}"
    outputs = window.outputs_per_block
    if not ctx.facts.stated_space_tiled_by(outputs):
        problem = info.coverage_problem(ctx.facts.naive_block, outputs)
        if problem:
            raise Unsupported(problem)
    for axis in "xy":
        if not any(b.axis == axis and not b.lower for b in bounds):
            raise Unsupported(f"no guard bounds the global {axis} index and the program states no thread space, "
                              "so the window's loads cannot be kept inside what the naive kernel reads")
    return window


# -- the reads ------------------------------------------------------------------------------------------
def _stencil_reads(info: KernelInfo, ctx: PassContext):
    """The one array read at several constant offsets (y + dy) * P + x + dx from the thread's element."""
    by_array: dict[str, list] = {}
    for a in info.accesses:
        if a.mode == "read" and a.array in info.params:
            by_array.setdefault(a.array, []).append(a)
    candidates = []
    for name, accesses in by_array.items():
        if name in info.written:
            continue
        try:
            candidates.append((name, *_offsets(accesses, info, ctx)))
        except NotStencil:
            continue
    if len(candidates) != 1:
        raise NotStencil("no single array read at constant offsets around the thread's element")
    name, reads, pitch, ranges = candidates[0]
    if len({(tuple(sorted(r.dy.items(), key=str)), tuple(sorted(r.dx.items(), key=str))) for r in reads}) < 2 \
            and not any(k != 1 for r in reads for k in (*r.dx, *r.dy)):
        raise NotStencil("one read per output: nothing to share")
    if len(reads) > MAX_READS:
        raise NotStencil("too many reads per output for a register window")
    return name, reads, pitch, ranges


def _offsets(accesses, info: KernelInfo, ctx: PassContext):
    pitch = None
    reads, ranges = [], {}
    for a in accesses:
        if a.index is None:
            raise NotStencil("an index cannot be analysed")
        frames = g.frames_to(a.node, info.parents, info.body)
        loops = [f.node for f in frames if f.kind == "for"]
        if any(f.kind == "else" for f in frames):
            raise NotStencil("a read under an else branch")
        syms = {}
        for loop in loops:
            var, lo, hi = _constant_loop(loop, info, ctx)
            ranges[var] = (lo, hi)
            syms[iterator_symbol(var)] = var
        value = sympy.expand(known(global_value(a.node.subscript, {**info.flat_env(), **a.extra.get("env", {})}),
                                   ctx))
        if sympy.diff(value, G["x"]) != 1:
            raise NotStencil("x does not step the column by one")
        p = sympy.diff(value, G["y"])
        if p.free_symbols & set(G.values()) or any(s.name.startswith("?") for s in p.free_symbols):
            raise NotStencil("the pitch is not fixed")
        if pitch is not None and sympy.expand(p - pitch) != 0:
            raise NotStencil("reads with different pitches")
        pitch = p
        rest = sympy.expand(value - G["x"] - p * G["y"])
        dy, dx = {}, {}
        for term in sympy.Add.make_args(rest):
            loop_syms = term.free_symbols & set(syms)
            if len(loop_syms) > 1:
                raise NotStencil("a product of loop indices")
            key = syms[next(iter(loop_syms))] if loop_syms else 1
            coef = sympy.expand(term / sympy.Symbol(key, integer=True)) if loop_syms else term
            ry, rx = _split(coef, p)
            dy[key] = dy.get(key, 0) + ry
            dx[key] = dx.get(key, 0) + rx
        reads.append(Read(a.node, {k: v for k, v in dy.items() if v}, {k: v for k, v in dx.items() if v}))
    return reads, pitch, ranges


def _split(coef: sympy.Expr, pitch: sympy.Expr) -> tuple[int, int]:
    """coef = dy * pitch + dx with integers dy, dx (dx small)."""
    if coef.is_Integer:
        if pitch.is_Integer and pitch > 2 * MAX_REACH:
            dy = int(sympy.floor(sympy.Rational(int(coef), int(pitch)) + sympy.Rational(1, 2)))
            return dy, int(coef) - dy * int(pitch)
        return 0, int(coef)
    symbols = sorted(pitch.free_symbols, key=str)
    if not symbols:
        raise NotStencil("an offset that is not a multiple of the pitch")
    s = symbols[0]
    dy = sympy.expand(coef.coeff(s) / pitch.coeff(s))
    dx = sympy.expand(coef - dy * pitch)
    if not (dy.is_Integer and dx.is_Integer):
        raise NotStencil("an offset that is not a constant number of rows and columns")
    return int(dy), int(dx)


def _constant_loop(loop: c_ast.For, info: KernelInfo, ctx: PassContext) -> tuple[str, int, int]:
    var, start, _ = g.loop_var(loop)
    cond, step = loop.cond, loop.next
    env = info.flat_env()
    ok_step = isinstance(step, c_ast.UnaryOp) and step.op in ("p++", "++") and \
        isinstance(step.expr, c_ast.ID) and step.expr.name == var
    if var is None or var in info.assigned - {var} or not ok_step or not (
            isinstance(cond, c_ast.BinaryOp) and cond.op in ("<", "<=") and isinstance(cond.left, c_ast.ID)
            and cond.left.name == var):
        raise NotStencil("a read in a loop that is not a constant count")
    try:
        lo = known(to_sympy(start, env), ctx)
        hi = known(to_sympy(cond.right, env), ctx)
    except NotAffine:
        raise NotStencil("a read in a loop of unknown bounds") from None
    if not (lo.is_Integer and hi.is_Integer):
        raise NotStencil("a read in a loop of unknown bounds")
    for n in walk(loop.stmt):
        if isinstance(n, (c_ast.Assignment, c_ast.UnaryOp)) and getattr(n, "lvalue", getattr(n, "expr", None)) \
                is not None and isinstance(getattr(n, "lvalue", None), c_ast.ID) and n.lvalue.name == var:
            raise NotStencil("the loop index is assigned in the loop")
    return var, int(lo), int(hi) - (0 if cond.op == "<=" else 1)


def _extreme(offset: dict, ranges: dict, pick) -> int:
    total = offset.get(1, 0)
    for var, coef in offset.items():
        if var != 1:
            lo, hi = ranges[var]
            total += pick(coef * lo, coef * hi)
    return total


# -- what the kernel may do besides ------------------------------------------------------------------
def _check_index_uses(info: KernelInfo) -> None:
    env = info.flat_env()
    for n in walk(info.body):
        axis = builtin_axis(n, "xy")
        if axis:
            top = info.index_expression(n)
            try:
                value = global_value(top, env)
            except NotAffine:
                value = None
            if value != G[axis]:
                raise Unsupported(f"'{text(top)}' is not the global {axis} index itself")


def _check_stores(info: KernelInfo, array: str, ctx: PassContext) -> None:
    """The copies store to distinct elements, and the window loaded first reads what the naive threads did:
    the array is not written, and where another pointer may alias it, no thread stores before its reads."""
    env = info.flat_env()
    for a in info.accesses:
        if a.mode != "write":
            continue
        where = f"{a.array}[{a.index_text}]"
        try:
            value = global_value(a.node.subscript, {**env, **a.extra.get("env", {})})
        except NotAffine:
            raise Unsupported(f"the store to {where} cannot be analysed") from None
        for axis in "xy":
            step = sympy.diff(value, G[axis])
            if step == 0 or step.free_symbols & set(G.values()) or any(s.name.startswith("?") for s in step.free_symbols):
                raise Unsupported(f"the store to {where} does not move with the global {axis} index")
    if ctx.facts.aliasing is not None and ctx.facts.aliasing.restrict:
        return
    order = {id(n): k for k, n in enumerate(walk(info.body))}
    stores = [order[id(a.node)] for a in info.accesses if a.mode == "write"]
    reads = [order[id(a.node)] for a in info.accesses if a.mode == "read" and a.array == array]
    if stores and reads and min(stores) < max(reads):
        raise Unsupported(f"{array} may alias an array the kernel stores to before its last read of {array}")


# -- the guard -----------------------------------------------------------------------------------------
def _guard(info: KernelInfo, reads: list[Read], ctx: PassContext) -> tuple[list[Bound], list[c_ast.Node]]:
    """The bounds the naive guard puts on x and y where the reads are. Every read must be under the same
    conditions, each a bound on one global index or a condition on parameters."""
    conds = None
    for r in reads:
        frames = g.frames_to(r.node, info.parents, info.body)
        mine = [id(f.node) for f in frames if f.kind == "if"]
        if conds is not None and mine != conds[0]:
            raise Unsupported("the reads are under different conditions")
        conds = (mine, [f.node for f in frames if f.kind == "if"])
    env = info.flat_env()
    bounds = [Bound("x", True, sympy.Integer(0)), Bound("y", True, sympy.Integer(0))]
    uniform = []
    for node in conds[1]:
        for clause in g.clauses(node.cond):
            if info.uniform(clause):
                uniform.append(clause)
                continue
            bounds.append(_bound(clause, env, ctx))
    for axis, stated in zip("xy", ctx.facts.global_space):
        if stated is not None:
            bounds.append(Bound(axis, False, sympy.Integer(stated)))
    return bounds, uniform


def _bound(clause: c_ast.Node, env: dict, ctx: PassContext) -> Bound:
    why = Unsupported(f"the guard clause '{text(clause)}' is not a bound on one global index")
    if not (isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=", ">", ">=")):
        raise why
    try:
        left, right = (known(global_value(s, env), ctx) for s in (clause.left, clause.right))
    except NotAffine:
        raise why from None
    # positive > 0 with the clause
    positive = {"<": right - left, "<=": right - left + 1, ">": left - right, ">=": left - right + 1}[clause.op]
    positive = sympy.expand(positive)
    cx, cy = sympy.diff(positive, G["x"]), sympy.diff(positive, G["y"])
    if (cx != 0) == (cy != 0):
        raise why
    axis, c = ("x", cx) if cx != 0 else ("y", cy)
    rest = sympy.expand(positive - c * G[axis])
    if c not in (1, -1) or rest.free_symbols & set(G.values()) or any(s.name.startswith("?") for s in rest.free_symbols):
        raise why
    # c = -1: index < rest (upper); c = 1: index > -rest, i.e. index >= 1 - rest (lower)
    return Bound(axis, c == 1, rest if c == -1 else sympy.expand(1 - rest))


# -- the interior fast path (interior.py) -----------------------------------------------------------------
@dataclass
class VectorStore:
    node: c_ast.Assignment      # `P[y * pitch + x + offset] = e` in S
    array: str
    pitch: sympy.Expr
    offset: int
    width: int                  # elements per vector store (V / width stores per row)
    tests: list[str]            # alignment checked at run time
    pair_tests: list[str] | None = None     # the same for float2 stores, where rows fail the float4 tests


@dataclass
class Interior:
    guard: c_ast.If | None      # the naive `if (G) { S }`, None where the body is unguarded
    bounds: list                # plan.Bound of G's clauses on x and y
    uniform: list[str]          # G's clauses on parameters
    stores: list[VectorStore]
    note: str                   # why a store stays scalar, or ""


def _plan_interior(info: KernelInfo, ctx: PassContext, array: str, reads: list[Read],
                   vector: int) -> Interior | str:
    """The fast path's plan, or why the kernel keeps only guarded copies. An unguarded body (a stated thread
    space the launch tiles) has no guard to drop, only its stores to widen."""
    body = g.items(info.body)
    lead = next((k for k, s in enumerate(body) if not isinstance(s, c_ast.Decl)), len(body))
    guard = body[-1] if lead == len(body) - 1 and isinstance(body[-1], c_ast.If) else None
    if guard is None and any(f.kind == "if" for r in reads for f in g.frames_to(r.node, info.parents, info.body)):
        return "the body is not declarations then one `if (G) { S }`"
    if guard is not None and guard.iffalse is not None:
        return "the guard has an else branch"
    env = info.flat_env()
    bounds, uniform = [], []
    for clause in g.clauses(guard.cond) if guard is not None else []:
        if info.uniform(clause):
            uniform.append(text(clause))
            continue
        try:
            bounds.append(_bound(clause, env, ctx))
        except Unsupported as why:
            return str(why)
    stores, notes = [], []
    for stmt in g.items(guard.iftrue) if guard is not None else body[lead:]:
        if isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ArrayRef):
            store = _vector_store(stmt, info, ctx, array, vector, env)
            if isinstance(store, str):
                notes.append(store)
            else:
                stores.append(store)
    if guard is None and not stores:
        return "no guard to drop and no store to widen"
    return Interior(guard, bounds, uniform, stores, "; ".join(notes))


def _vector_store(stmt: c_ast.Assignment, info: KernelInfo, ctx: PassContext, array: str, vector: int,
                  env: dict) -> VectorStore | str:
    target = stmt.lvalue.name
    name = target.name if isinstance(target, c_ast.ID) else None
    where = f"the store {text(stmt.lvalue)} stays scalar"
    param = info.params.get(name)
    if param is None or stmt.op != "=" or name == array:
        return f"{where}: not a plain store to a parameter array"
    if param.base_type != "float":
        return f"{where}: {param.base_type} is not widened"
    accesses = [a for a in info.accesses if a.array == name]
    if len(accesses) != 1:
        return f"{where}: {name} is read or stored elsewhere in the kernel"
    try:
        value = sympy.expand(known(global_value(stmt.lvalue.subscript, {**env, **accesses[0].extra.get("env", {})}),
                                   ctx))
    except NotAffine:
        return f"{where}: its index cannot be analysed"
    pitch = sympy.diff(value, G["y"])
    offset = sympy.expand(value - G["x"] - pitch * G["y"])
    if sympy.diff(value, G["x"]) != 1 or pitch.free_symbols & set(G.values()) or not offset.is_Integer:
        return f"{where}: not `{name}[y * pitch + x + c]`"
    if not (ctx.facts.aliasing is not None and ctx.facts.aliasing.restrict):
        order = {id(n): k for k, n in enumerate(walk(info.body))}
        if any(a.mode == "read" and order[id(a.node)] > order[id(stmt)] for a in info.accesses):
            return f"{where}: {name} may alias an array read after the store"
    width = vector_width(pitch, vector)
    while width > 1 and int(offset) % width:
        width //= 2
    if width == 1:
        return f"{where}: its rows cannot be kept aligned"
    return VectorStore(stmt, name, pitch, int(offset), width, store_tests(name, pitch, width, ctx),
                       store_tests(name, pitch, width // 2, ctx) if width == 4 and int(offset) % 2 == 0 else None)


def store_tests(name: str, pitch: sympy.Expr, width: int, ctx: PassContext) -> list[str]:
    """What must hold at run time for rows of `name` to take `width`-wide stores (none: proved)."""
    tests = []
    if ctx.facts.alignment.get(name, 0) < 4 * width:
        tests.append(f"((size_t) {name} & {4 * width - 1}) == 0")
    if not (pitch.is_Integer and int(pitch) % width == 0):
        tests.append(f"{ccode(pitch)} % {width} == 0")
    return tests


# -- the vector width -----------------------------------------------------------------------------------
def _vector(array: str, element: str, pitch: sympy.Expr, ctx: PassContext, request) -> tuple[int, int, str, str]:
    """V outputs per thread in x, and how a row's V elements are loaded: as V / L aligned L-wide vectors
    (L = V where the pitch allows, L = 2 for a pitch like `width + 2`), checked at run time where the
    alignment is not proved: the pitch (the base from cudaMalloc at every launch), or the row's address."""
    known_pitch = known(pitch, ctx)
    if request is not None:
        vector = request.x
        if vector not in (1, 2, 4):
            raise Unsupported(f"--merge {request}: x must be 1, 2 or 4 (a float, float2 or float4 per row)")
        why = f"asked for with --merge {request}"
    else:
        # Four columns per thread: float4 stores of the outputs' rows (the lead's H200 measurements), even
        # where the input's pitch allows only float2 or element loads.
        vector = 4 if element == "float" else 2
        why = f"{vector} columns per thread"
    width = vector_width(known_pitch, vector) if element == "float" else 1
    if width == 1:
        return vector, 1, "", why + "; element loads"
    base = ctx.facts.alignment.get(array, 0) >= 4 * width
    proved = base and known_pitch.is_Integer
    test = "" if proved else "pitch" if base else "address"
    how = {"": "proved", "pitch": "the pitch checked at run time (the base from cudaMalloc at every launch)",
           "address": "each row's address checked at run time"}[test]
    return vector, width, test, why + f"; float{width} row loads, {how}"


def vector_width(pitch: sympy.Expr, most: int) -> int:
    """The widest vector (<= most) that rows of this pitch can keep aligned: a known pitch's, or for one
    like `w + c` the widest dividing c (run-time checks confirm it)."""
    constant = pitch.as_coeff_Add()[0]
    if not constant.is_Integer:
        return 1
    width = most
    while width > 1 and int(constant) % width:
        width //= 2
    return width


def ccode(expr: sympy.Expr) -> str:
    """C text of a parameter expression, parenthesised unless an atom."""
    s = sympy.ccode(sympy.expand(expr))
    return s if expr.is_Atom else f"({s})"
