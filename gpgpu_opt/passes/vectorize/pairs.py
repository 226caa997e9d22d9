"""The paper's vectorization rule (§3.1): two accesses `P[2*e + N]` and `P[2*e + N + 1]` (N even) of one
basic block, both loads or both stores, become one access of a two-element vector (`float2` for float):
`.x` is the LOWER address, `.y` the higher (the original compiler swapped them).

Why it is right:
- `2*e + N` with N even is even whatever e is (the subscript halves exactly: every term has an even
  factor), so the pair is one naturally aligned vector element `((const float2 *)P)[e + N/2]` whenever P
  itself is 8-byte aligned, which analysis/alignment.py proves from the program's launches (a cudaMalloc
  buffer, an even offset); without that proof the scalar accesses stay, with a note;
- loads: the vector is loaded where the first of them was; no store to P (nor, where pointers may alias, to
  any array) lies between it and the last use it replaces;
- stores: the first value is kept in a local and both are stored at the second store; nothing between
  them reads P (nor, where pointers may alias, any array) or calls a function, so no one sees the
  first store late.
Runs of declarations and assignments between control statements are the basic blocks looked at.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.ast_util import substitute, transform, walk
from gpgpu_opt.cuda_types import element_size
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import text
from gpgpu_opt.rewriting.vector import constructor, parse_vector_statements, vector_type


@dataclass
class Pair:
    array: str
    mode: str                       # 'read' or 'write'
    low: sympy.Expr                 # the lower subscript
    half: c_ast.Node                # the vector subscript (low / 2)
    members: dict = field(default_factory=dict)   # id(ArrayRef) -> 0 (.x) or 1 (.y)
    statements: list = field(default_factory=list)  # positions in the run, in order
    low_text: str = ""

    def describe(self, vector: str) -> str:
        return f"{self.array}[{self.low_text}] and the element after it {'loaded' if self.mode == 'read' else 'stored'} " \
               f"as one {vector}, {self.array}[{self.low_text}] in .x"


def halve(node: c_ast.Node) -> c_ast.Node | None:
    """`node / 2` as an expression without division, where every term of `node` has an even factor."""
    if isinstance(node, c_ast.Constant) and node.type == "int":
        value = int(node.value.rstrip("uUlL"), 0)
        return c_ast.Constant("int", str(value // 2)) if value % 2 == 0 else None
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        left, right = halve(node.left), halve(node.right)
        if left is None or right is None:
            return None
        if isinstance(right, c_ast.Constant) and right.value == "0":
            return left
        return c_ast.BinaryOp(node.op, left, right)
    if isinstance(node, c_ast.BinaryOp) and node.op == "*":
        for const, other in ((node.left, node.right), (node.right, node.left)):
            h = halve(const) if isinstance(const, c_ast.Constant) else None
            if h is not None:
                return other if h.value == "1" else c_ast.BinaryOp("*", h, other)
    return None


def runs(body: c_ast.Compound):
    """Each Compound's maximal runs of declarations and assignments (lists the caller may rewrite)."""
    for node in walk(body):
        if not isinstance(node, c_ast.Compound) or not node.block_items:
            continue
        run: list[int] = []
        for k, stmt in enumerate(node.block_items + [None]):
            if isinstance(stmt, (c_ast.Decl, c_ast.Assignment)):
                run.append(k)
                continue
            if len(run) > 1:
                yield node, run
            run = []


class PairFinder:
    """The pairs of one run of statements, and why the others were not paired."""

    def __init__(self, info: KernelInfo, stmts: list[c_ast.Node], restrict: bool):
        self.info = info
        self.stmts = stmts
        self.restrict = restrict
        self.params = {p.name: p for p in info.kernel.arrays}
        self.refused: list[str] = []

    def _refs(self, k: int, mode: str):
        stmt = self.stmts[k]
        target = stmt.lvalue if isinstance(stmt, c_ast.Assignment) else None
        for n in walk(stmt):
            if not (isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name in self.params):
                continue
            if n is target and (mode == "read" or stmt.op != "="):
                continue                # a store's element is never replaced by a loaded vector's
            if (mode == "write") == (n is target):
                access = self.info.by_node.get((id(n), mode))
                if access is not None and access.index is not None:
                    yield n, access

    def _touches(self, k: int, array: str | None, mode: str) -> bool:
        """Statement k reads (or writes) `array` (None: any array, where pointers may alias), or calls."""
        stmt = self.stmts[k]
        if any(isinstance(n, c_ast.FuncCall) for n in walk(stmt)):
            return True
        names = {a.array for a in self.info.accesses if a.mode == mode and any(a.node is n for n in walk(stmt))}
        return bool(names) if (array is None or not self.restrict) else array in names

    def pairs(self, mode: str) -> list[Pair]:
        found: dict[tuple[str, sympy.Expr], Pair] = {}
        refs = [(k, n, a) for k in range(len(self.stmts)) for n, a in self._refs(k, mode)]
        for k, n, a in refs:
            half = halve(n.subscript)
            if half is not None:
                found.setdefault((a.array, a.index), Pair(a.array, mode, a.index, half, low_text=text(n.subscript)))
        for k, n, a in refs:
            for key, member in (((a.array, a.index), 0), ((a.array, sympy.expand(a.index - 1)), 1)):
                pair = found.get(key)
                if pair is not None:
                    pair.members[id(n)] = member
                    if k not in pair.statements:
                        pair.statements.append(k)
        return [p for p in found.values() if set(p.members.values()) == {0, 1} and self._safe(p)]

    def _safe(self, pair: Pair) -> bool:
        first, last = pair.statements[0], pair.statements[-1]
        where = f"{pair.array}[{pair.low_text}]"
        if pair.mode == "read":
            between = [k for k in range(first, last + 1) if self._touches(k, pair.array, "write")]
            if between:
                self.refused.append(f"{where}: a store between the pair's loads; scalar loads kept")
                return False
            return True
        if len(pair.statements) != 2 or sum(1 for m in pair.members.values()) != 2:
            self.refused.append(f"{where}: the pair's elements are stored more than once; scalar stores kept")
            return False
        between = [k for k in range(first + 1, last + 1) if self._touches(k, pair.array, "read")
                   or (k < last and self._touches(k, pair.array, "write"))]
        if between or any(isinstance(n, c_ast.FuncCall) for n in walk(self.stmts[first])):
            self.refused.append(f"{where}: the array is read or called into between the pair's stores; "
                                "scalar stores kept")
            return False
        return True


def vectorize_run(info: KernelInfo, compound: c_ast.Compound, run: list[int], ctx, done: list[str]) -> None:
    """Rewrite the pairs of one run in place; `done` collects what was paired, notes say what was not."""
    stmts = [compound.block_items[k] for k in run]
    finder = PairFinder(info, stmts, bool(ctx.facts.aliasing and ctx.facts.aliasing.restrict))
    inserts: dict[int, list[c_ast.Node]] = {}
    replaced: dict[int, c_ast.Node] = {}
    vectors: set[str] = set()
    done_here: set[str] = set()
    vector_of = ""
    for pair in finder.pairs("read") + finder.pairs("write"):
        param = finder.params[pair.array]
        vector = vector_type(param.base_type, 2)
        need = 2 * (element_size(param.base_type) or 1)
        if vector is None:
            finder.refused.append(f"{pair.array}: no two-element vector of {param.base_type}")
            continue
        if ctx.facts.alignment.get(pair.array, 0) < need:
            finder.refused.append(f"{pair.array}[{pair.low_text}]: {pair.array} is not known to be "
                                  f"{need}-byte aligned (no launch in this file passes it a cudaMalloc buffer at "
                                  "an even offset); scalar accesses kept")
            continue
        const = "const " if param.is_const or pair.mode == "read" else ""
        ref = f"(({const}{vector} *){pair.array})[{text(pair.half)}]"
        if pair.mode == "read":
            name = info.fresh(f"{pair.array}2")
            vectors.add(name)
            inserts.setdefault(pair.statements[0], []).extend(
                parse_vector_statements(f"const {vector} {name} = {ref};", {vector}))
            for stmt in stmts:
                _replace_refs(stmt, pair.members, name)
        else:
            _combine_stores(info, stmts, pair, ref, vector, param.base_type, replaced)
        done.append(pair.describe(vector))
        done_here.add(f"{pair.array} {'read' if pair.mode == 'read' else 'written'}")
        vector_of = vector
    if done_here:
        first = min(inserts or replaced)
        what = sorted(done_here)
        what = ", ".join(what[:-1]) + " and " + what[-1] if len(what) > 1 else what[0]
        note = Comment(f"vectorize: {what} as {vector_of} pairs, one access for two elements, .x the lower")
        inserts.setdefault(first, []).insert(0, note)
    for k in sorted(set(inserts) | set(replaced), reverse=True):
        position = run[k]
        if k in replaced:
            compound.block_items[position:position + 1] = replaced[k] if isinstance(replaced[k], list) \
                else [replaced[k]]
        compound.block_items[position:position] = inserts.get(k, [])
    fold_copies(info, compound, vectors)
    for why in finder.refused:
        ctx.log.skip(why.split(":")[0], why.split(": ", 1)[1])


def _replace_refs(stmt: c_ast.Node, members: dict, name: str) -> None:
    def component(n: c_ast.Node):
        return c_ast.StructRef(c_ast.ID(name), ".", c_ast.ID("xy"[members[id(n)]])) if id(n) in members else None

    transform(stmt, component)


def fold_copies(info: KernelInfo, compound: c_ast.Compound, vectors: set[str]) -> None:
    """`const float a_val = a2.x;` (a load the normal form named) is dropped for `a2.x` at its uses."""
    items = compound.block_items
    k = 0
    while k < len(items):
        d = items[k]
        if isinstance(d, c_ast.Decl) and isinstance(d.init, c_ast.StructRef) and isinstance(d.init.name, c_ast.ID) \
                and d.init.name.name in vectors and "const" in (d.quals or []) and info.decl_counts[d.name] == 1 \
                and d.name not in info.assigned:
            items[k + 1:] = [substitute(s, {d.name: d.init}) for s in items[k + 1:]]
            del items[k]
            continue
        k += 1


def _combine_stores(info: KernelInfo, stmts: list, pair: Pair, ref: str, vector: str, base: str,
                    replaced: dict) -> None:
    first, last = pair.statements
    values = {pair.members[id(stmts[k].lvalue)]: stmts[k].rvalue for k in (first, last)}
    if last == first + 1:
        replaced[last] = parse_vector_statements(f"{ref} = {constructor(vector)}(__x, __y);", {vector})[0]
        replaced[last].rvalue.args.exprs = [values[0], values[1]]
        replaced[first] = []
        return
    first_member = pair.members[id(stmts[first].lvalue)]
    name = info.fresh(f"{pair.array}_{'xy'[first_member]}")
    keep = parse_vector_statements(f"const {base} {name} = __v;", set())[0]
    keep.init = values[first_member]
    replaced[first] = keep
    store = parse_vector_statements(f"{ref} = {constructor(vector)}(__x, __y);", {vector})[0]
    store.rvalue.args.exprs = [c_ast.ID(name), values[1]] if first_member == 0 else [values[0], c_ast.ID(name)]
    replaced[last] = store
