"""Another thread's view of a C expression, for the coalesce pass's tile loaders: a subscript or condition
copied as another thread (and iteration) of the block would evaluate it (`Witness`), the checks and
folding of the load predicates built that way, and printing the sympy values it substitutes back as C.

A thread loads tile elements that other threads read; the load's address and predicate are the reading
thread's subscript and conditions with the thread index and the loop iterator replaced by the reader's.
"""
from __future__ import annotations

import copy

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import BDIM, BID, GDIM, TID, is_opaque, iterator_symbol, param_symbol
from gpgpu_opt.ast_util import ids_in, is_member_of, walk
from gpgpu_opt.rewriting.guards import slack
from gpgpu_opt.rewriting.cbuild import Unsupported, builtin, const, mul, text

_BUILTIN_AST = {}
for _name, _table in (("threadIdx", TID), ("blockIdx", BID), ("blockDim", BDIM), ("gridDim", GDIM)):
    for _axis, _sym in _table.items():
        _BUILTIN_AST[_sym] = (_name, _axis)

_ORDER = {"blockIdx": 0, "threadIdx": 2, "blockDim": 1, "gridDim": 1}


# -- sympy -> c_ast ---------------------------------------------------------------------------------
def _terms_of(node: c_ast.Node, sign: int, out: list) -> None:
    """Flatten a +/- chain so that substituting a sum into a sum needs no parentheses."""
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        _terms_of(node.left, sign, out)
        _terms_of(node.right, sign if node.op == "+" else -sign, out)
    else:
        out.append((sign, node))


def _symbol_key(sym) -> tuple:
    if sym in _BUILTIN_AST:
        name, axis = _BUILTIN_AST[sym]
        return (_ORDER[name], axis)
    return (3, str(sym))


def sym_to_ast(expr: sympy.Expr, names: dict | None = None) -> c_ast.Node:
    """An integer sympy polynomial as C: `blockIdx.x * 16 + rr`, terms ordered block, thread, others,
    constant last. `names` maps symbols to the C expressions they stand for."""
    names = names or {}
    expr = sympy.expand(expr)
    terms: list[tuple[tuple, int, list]] = []
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Integer:
            raise Unsupported(f"non-integer term {term}")
        factors = [] if rest == 1 else list(sympy.Mul.make_args(rest))
        syms = []
        for f in factors:
            if isinstance(f, sympy.Pow) and f.exp.is_Integer and f.exp > 0 and isinstance(f.base, sympy.Symbol):
                syms.extend([f.base] * int(f.exp))
            elif isinstance(f, sympy.Symbol):
                syms.append(f)
            else:
                raise Unsupported(f"cannot print {f} as an index")
        syms.sort(key=_symbol_key)
        key = min((_symbol_key(s) for s in syms), default=(9,))
        terms.append((key, int(coeff), syms))
    terms.sort(key=lambda t: t[0])
    flat: list[tuple[int, c_ast.Node]] = []
    for _, coeff, syms in terms:
        if not syms:
            flat.append((1 if coeff >= 0 else -1, const(abs(coeff))))
            continue
        asts = [_symbol_ast(s, names) for s in syms]
        if len(asts) == 1 and abs(coeff) == 1:
            _terms_of(asts[0], 1 if coeff > 0 else -1, flat)
            continue
        node = asts[0]
        for a in asts[1:]:
            node = c_ast.BinaryOp("*", node, a)
        flat.append((1 if coeff > 0 else -1, mul(node, abs(coeff))))
    if not flat:
        return const(0)
    positives = [t for t in flat if t[0] > 0]
    first = positives[0] if positives else None
    node = first[1] if first else c_ast.UnaryOp("-", flat[0][1])
    rest = [t for t in flat if t is not (first if first else flat[0])]
    for sign, t in rest:
        node = c_ast.BinaryOp("+" if sign > 0 else "-", node, t)
    return node


def _symbol_ast(sym, names: dict) -> c_ast.Node:
    if sym in names:
        return copy.deepcopy(names[sym])
    if sym in _BUILTIN_AST:
        return builtin(*_BUILTIN_AST[sym])
    if is_opaque(sym):
        raise Unsupported(f"'{sym.name[1:]}' has no value the pass can see")
    return c_ast.ID(sym.name)


# -- another thread's view: witnesses and predicates --------------------------------------------------
_WSYM = {k: sympy.Symbol(f"_w_{k}", integer=True) for k in ("x", "y", "u")}
_BUILTIN_NAMES = {"threadIdx", "blockIdx", "blockDim", "gridDim"}


class Witness:
    """Copies a subscript or condition as another thread (and iteration) of the block would evaluate it:
    threadIdx axes and the loop iterator are replaced, and so are the locals that depend on them."""

    def __init__(self, info, env: dict, block, axes: dict, iters: dict, visible: set[str],
                 allowed: set[str]):
        self.info, self.env, self.block = info, env, block
        self.axes = axes          # 'x'/'y' -> c_ast (None: unchanged)
        self.iters = iters        # iterator name -> c_ast
        self.visible = visible
        self.allowed = allowed
        sym_map = {}
        names = {}
        for axis, node in axes.items():
            if node is None:
                continue
            if isinstance(node, c_ast.Constant) and node.type == "int":
                sym_map[TID[axis]] = sympy.Integer(int(node.value))
            else:
                sym_map[TID[axis]] = _WSYM[axis]
                names[_WSYM[axis]] = node
        for k, (name, node) in enumerate(iters.items()):
            s = sympy.Symbol(f"_w_it{k}", integer=True)
            sym_map[iterator_symbol(name)] = s
            names[s] = node
        self.sym_map, self.names = sym_map, names

    def __call__(self, node: c_ast.Node) -> c_ast.Node:
        out = self._copy(node)
        stray = ids_in(out) - self.visible - self.allowed - _BUILTIN_NAMES - set(self.info.params)
        if stray:
            raise Unsupported(f"'{sorted(stray)[0]}' is not available where the tile is loaded")
        return out

    def _copy(self, node):
        if is_member_of(node, "threadIdx"):
            repl = self.axes.get(node.field.name)
            return copy.deepcopy(repl) if repl is not None else copy.deepcopy(node)
        if isinstance(node, c_ast.StructRef):
            return copy.deepcopy(node)
        if isinstance(node, c_ast.ID):
            return self._id(node)
        if isinstance(node, c_ast.ArrayRef):
            raise Unsupported("a condition on the access reads memory")
        if isinstance(node, (c_ast.FuncCall, c_ast.Assignment)) or \
                isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
            raise Unsupported("a condition on the access calls a function or has side effects")
        new = copy.copy(node)
        for attr in node.__slots__:
            if attr in ("coord", "__weakref__"):
                continue
            value = getattr(node, attr, None)
            if isinstance(value, c_ast.Node):
                setattr(new, attr, self._copy(value))
            elif isinstance(value, list) and value and isinstance(value[0], c_ast.Node):
                setattr(new, attr, [self._copy(v) for v in value])
        return new

    def _id(self, node: c_ast.ID) -> c_ast.Node:
        name = node.name
        if name in self.iters:
            return copy.deepcopy(self.iters[name])
        if name in self.info.scalars and name not in self.info.decl_counts:
            return copy.deepcopy(node)
        if name in self.info.params:
            return copy.deepcopy(node)
        if name in self.env and self.info.decl_counts.get(name, 0) <= 1:
            d = self.env[name]
            if any(s.name.startswith("?") for s in d.free_symbols):
                raise Unsupported(f"the value of '{name}' changes in the kernel")
            if d == iterator_symbol(name) or d == param_symbol(name):
                if name in self.visible:
                    return copy.deepcopy(node)
                raise Unsupported(f"'{name}' is not available where the tile is loaded")
            d = d.subs({BDIM["x"]: self.block[0], BDIM["y"]: self.block[1], BDIM["z"]: 1})
            if not (d.free_symbols & set(self.sym_map)) and name in self.visible:
                return copy.deepcopy(node)
            return sym_to_ast(d.subs(self.sym_map), self.names)
        if name in self.visible and name not in self.info.assigned and name not in self.info.thread_vars:
            return copy.deepcopy(node)
        raise Unsupported(f"the value of '{name}' at another thread or iteration is not known")


def check_monotone(clause: c_ast.Node, env: dict, unpinned: list[str], block) -> None:
    """A guard clause on a thread axis the tile does not index must be an upper bound on it (`x < n`):
    then the block's first thread along that axis reads whatever any other thread there reads."""
    if not unpinned:
        return
    dep = depends_on(clause, env, unpinned)
    if not dep:
        return
    found = slack(clause, env)
    if found is None:
        comparison = isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=", ">", ">=")
        raise Unsupported(f"the guard '{text(clause)}' "
                          + ("cannot be analysed" if comparison else "is not an upper bound on the thread index"))
    d = found[0].subs({BDIM["x"]: block[0], BDIM["y"]: block[1]})
    for axis in dep:
        c = d.coeff(TID[axis])
        if not (c.is_number and c <= 0):
            raise Unsupported(f"the guard '{text(clause)}' is not an upper bound on the thread index")


def depends_on(node: c_ast.Node, env: dict, axes: list[str]) -> list[str]:
    found = set()
    for n in walk(node):
        if is_member_of(n, "threadIdx") and n.field.name in axes:
            found.add(n.field.name)
        elif isinstance(n, c_ast.ID) and n.name in env:
            for axis in axes:
                if TID[axis] in env[n.name].free_symbols:
                    found.add(axis)
    return sorted(found)


def fold(clause: c_ast.Node):
    """Constant comparisons (`0 < 3` from a loop that always runs) fold to True/False."""
    if isinstance(clause, c_ast.BinaryOp) and clause.op in ("<", "<=", ">", ">=", "==", "!=") \
            and all(isinstance(s, c_ast.Constant) and s.type == "int" for s in (clause.left, clause.right)):
        try:
            l, r = (int(s.value.rstrip("uUlL"), 0) for s in (clause.left, clause.right))
        except ValueError:
            return clause
        return {"<": l < r, "<=": l <= r, ">": l > r, ">=": l >= r, "==": l == r, "!=": l != r}[clause.op]
    return clause
