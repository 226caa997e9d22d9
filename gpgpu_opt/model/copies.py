"""What nvcc makes of the code the passes write, where counting the source statement by statement is wrong:
- a shared load that is the same in every unrolled copy of a loop is loaded once (common subexpression);
- shared loads of consecutive words across the unrolled copies are one vector load (LDS.128) per 16 bytes,
  and a warp's load costs the wavefronts its bank conflicts make (the staging pass's conflict degree);
- a guard that differs between more unrolled copies than there are predicate registers is recomputed in
  each copy, its compares and the guarded statement a chain of dependent instructions;
- a guard on loop iterators alone (`if (j >= 0 && j < 16)`, j = row - r) runs its body only on the
  iterations where it holds;
- an index that permutes the blocks (`... % gridDim.y`, the partition pass's diagonal order) or rotates a
  loop's iterations (`(step + blockIdx.x) % steps`) touches what the plain index touches: it stands in for
  that index."""
from __future__ import annotations

import copy
import itertools
import math

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.loops import Loop
from gpgpu_opt.analysis.symbolic import BDIM, BID, GDIM, TID, NotAffine, iterator_symbol, lambdified, to_sympy
from gpgpu_opt.ast_util import is_member_of, replace_child, walk
from gpgpu_opt.rewriting.tiles.geometry import _degree as conflict_degree

#: Predicate registers a thread has (P0-P6): more distinct guards than this are recomputed where used.
PREDICATE_REGISTERS = 7
#: A guarded body of at most this many instructions is predicated (a longer one is branched around: then the
#: chain is the compares and the branch).
PREDICATED_BODY = 2
#: Widest shared-memory load, in bytes (LDS.128).
VECTOR_BYTES = 16
#: Iterations enumerated at most to find the fraction of them on which a guard holds.
_GUARD_SAMPLES = 4096
_COMPARE = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge, "==": sympy.Eq, "!=": sympy.Ne}
_UNIFORM = frozenset(BID.values()) | frozenset(GDIM.values()) | frozenset(BDIM.values())


def clauses(cond: c_ast.Node) -> list[c_ast.Node]:
    """The conjuncts of a condition."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "&&":
        return clauses(cond.left) + clauses(cond.right)
    return [cond]


def guard_fraction(cond: c_ast.Node, env: dict, subs: dict, loops: list[Loop]) -> float:
    """The fraction of the enclosing loops' iterations on which `cond` holds, where it depends on their
    iterators and constants only; 1 otherwise (a guard on thread or block indices holds for most warps)."""
    relations = []
    for clause in clauses(cond):
        if not (isinstance(clause, c_ast.BinaryOp) and clause.op in _COMPARE):
            return 1.0
        try:
            left, right = (to_sympy(side, env).subs(subs) for side in (clause.left, clause.right))
        except NotAffine:
            return 1.0
        relations.append((_COMPARE[clause.op], left - right))
    symbols = set().union(*(r.free_symbols for _, r in relations))
    ranges = {}
    for loop in loops:
        sym = iterator_symbol(loop.var)
        trips = loop.trip_count()
        if sym not in symbols or trips is None or loop.multiplicative:
            continue
        start, trips = loop.start.subs(subs), trips.subs(subs)
        if start.is_number and trips.is_number:
            ranges[sym] = [int(start) + loop.step * t for t in range(max(0, int(trips)))]
    if not symbols or symbols - set(ranges) or math.prod(len(v) for v in ranges.values()) > _GUARD_SAMPLES:
        return 1.0
    names = list(ranges)
    fns = [(rel, lambdified(names, diff, "math")) for rel, diff in relations]
    points = list(itertools.product(*(ranges[s] for s in names)))
    if not points:
        return 0.0
    held = sum(all(bool(rel(fn(*p), 0)) for rel, fn in fns) for p in points)
    return held / len(points)


def recomputed(copies: int) -> bool:
    """Whether guards that differ between `copies` unrolled copies are recomputed in each copy."""
    return copies > PREDICATE_REGISTERS


def permutation_surrogate(init: c_ast.Node, env: dict, loops: list[Loop]) -> sympy.Expr | None:
    """The index a permuting `%` stands for: `u % gridDim.d` (u uniform in the block) ranges over the
    blocks as blockIdx.d does; `(i + u) % N` with i a loop's iterator over 0..N-1 visits its iterations in
    a rotated order. The other terms of `init` are kept. None where there is no such `%`."""
    init = copy.deepcopy(init)
    stand_ins: dict[str, sympy.Expr] = {}
    for node in list(walk(init)):
        for name, child in node.children():
            if isinstance(child, c_ast.BinaryOp) and child.op == "%":
                sym = _surrogate(child, env, loops)
                if sym is not None:
                    stand_in = f"__permuted{len(stand_ins)}"
                    stand_ins[stand_in] = sym
                    replace_child(node, name, c_ast.ID(stand_in))
    if isinstance(init, c_ast.BinaryOp) and init.op == "%":
        sym = _surrogate(init, env, loops)
        return sym
    if not stand_ins:
        return None
    try:
        return to_sympy(init, {**env, **stand_ins})
    except NotAffine:
        return None


def _surrogate(node: c_ast.BinaryOp, env: dict, loops: list[Loop]) -> sympy.Expr | None:
    right = node.right
    if is_member_of(right, "gridDim"):
        return BID[right.field.name] if _block_uniform(node.left, env) else None
    if not isinstance(right, c_ast.ID):
        return None
    try:
        dividend = sympy.expand(to_sympy(node.left, env))
    except NotAffine:
        return None
    for loop in loops:
        sym = iterator_symbol(loop.var)
        if (loop.is_upward and loop.step == 1 and loop.start == 0 and loop.comparison == "<"
                and isinstance(loop.node.cond.right, c_ast.ID) and loop.node.cond.right.name == right.name
                and dividend.coeff(sym) == 1 and (dividend - sym).free_symbols <= _UNIFORM):
            return sym
    return None


def _block_uniform(node: c_ast.Node, env: dict) -> bool:
    """Whether `node` is the same for all threads of a block (block and grid indices, constants)."""
    builtin = set()
    for n in walk(node):
        if isinstance(n, c_ast.StructRef):
            if isinstance(n.name, c_ast.ID) and n.name.name not in ("blockIdx", "gridDim", "blockDim"):
                return False
            builtin |= {id(n.name), id(n.field)}
        elif isinstance(n, c_ast.ID) and id(n) not in builtin:
            value = env.get(n.name)
            if value is None or not value.free_symbols <= _UNIFORM:
                return False
    return True


def shared_load_cost(subscripts: list[c_ast.Node], dims: list[int], element_bytes: int, env: dict, subs: dict,
                     unrolled: list[tuple[sympy.Symbol, int]], block: tuple[int, int], banks: int,
                     bank_bytes: int, warp: int) -> tuple[float, float]:
    """(load instructions, wavefronts) per execution of one shared load in the innermost unrolled copies:
    copies that load the same word share one load, the innermost unrolled loop's copies that load words of
    one aligned 16-byte chunk are one vector load, and a warp's load takes as many wavefronts as its worst
    bank holds words (bank conflicts)."""
    try:
        index = sum((to_sympy(s, env) * math.prod(dims[i + 1:]) for i, s in enumerate(subscripts)), sympy.Integer(0))
    except (NotAffine, TypeError):
        return 1.0, 1.0
    index = sympy.expand(index.subs({k: v for k, v in subs.items() if k not in TID.values()}))
    instructions, lanes = 1.0, [0]
    for position, (sym, trips) in enumerate(unrolled):
        if sym not in index.free_symbols:
            instructions /= trips                    # the same word in every copy: loaded once
        elif position == len(unrolled) - 1:
            chunks, lanes = _vector_chunks(index, sym, trips, element_bytes)
            instructions *= chunks / trips
            index = index.subs(sym, 0)
    rest = {s: 0 for s in index.free_symbols if s not in (TID["x"], TID["y"])}  # threadIdx.z: one plane
    words_per_element = max(1, element_bytes // bank_bytes)
    try:
        fn = lambdified([TID["x"], TID["y"]], index.subs(rest), "math")
        words = [(int(fn(t % block[0], t // block[0] % max(block[1], 1))) + lane) * words_per_element
                 for t in range(min(warp, block[0] * block[1])) for lane in lanes]
    except (TypeError, ValueError):
        return instructions, instructions
    return instructions, instructions * conflict_degree(words, banks, words_per_element)


def _vector_chunks(index: sympy.Expr, sym: sympy.Symbol, trips: int, element_bytes: int) -> tuple[int, list[int]]:
    """The aligned 16-byte chunks the copies of an unrolled loop read (their offsets from the first copy's
    element, where the rest of the index is a multiple of the vector), and the element offsets of one."""
    width = max(1, VECTOR_BYTES // element_bytes)
    first = index.subs(sym, 0)
    offsets = [index.subs(sym, v) - first for v in range(trips)]
    aligned = all(c % width == 0 for c in sympy.Poly(first, *first.free_symbols).coeffs()) \
        if first.free_symbols else int(first) % width == 0
    if not aligned or not all(o.is_Integer for o in offsets):
        return trips, [0]
    chunks = {int(o) // width for o in offsets}
    return len(chunks), list(range(min(width, len(offsets) // len(chunks))))


def mentions(node: c_ast.Node, names: set[str]) -> bool:
    return any(isinstance(n, c_ast.ID) and n.name in names for n in walk(node))
