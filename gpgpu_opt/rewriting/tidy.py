"""The tidy step after each pass: what a person would not have written, taken out of a generated kernel.

- A single-use copy of a register or of shared memory: `const float A_val = A_frag[r]; ... sum[r][c] += A_val *
  B_val;` reads `sum[r][c] += A_frag[r] * B_frag[c];`. Only a `const` local whose value is a local scalar or an
  element of a local or `__shared__` array of the same type at a subscript of names, constants, `+`, `-` and `*`,
  used once, later in the same block, with only `const` copies between and nothing it reads written there.
  Copies of global memory (an element a pointer parameter points to) only once the last pass has run (the
  passes read them as the loads they stage or widen), and only into a plain statement (an assignment or a
  declaration, not a loop that would load it again).
- A guard clause already implied: `in_range = load_row < n && 0 < n && load_k < n` inside `if (0 < n)`, or
  inside `for (k0 = 0; k0 < n; ...)`, reads `load_row < n && load_k < n`. Only clauses over names the kernel
  neither declares nor assigns (its parameters), implied by an enclosing `if`'s clause or a loop counting up
  from its start.

Both keep the meaning exactly (the same values, the same loads); the emulated check runs the tidied kernel.
"""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.rewriting import guards as g


def tidy(func: c_ast.FuncDef, last: bool = False) -> None:
    """Tidy the kernel in place (`last`: no pass runs after this, so copies of global memory go too)."""
    assigned = _assigned_names(func.body)
    _substitute_single_use(func, assigned, _pointer_parameters(func) if last else {})
    _fold_implied(func.body, [], assigned | _locals_of(func.body))


def _text(node: c_ast.Node) -> str:
    return CudaGenerator().visit(node)


# -- single-use copies ----------------------------------------------------------------------------------
def _substitute_single_use(func: c_ast.FuncDef, assigned: set[str], pointers: dict[str, str]) -> None:
    arrays = _local_arrays(func.body) | _shared_arrays(func.body) | pointers
    scalars = _local_scalars(func.body)
    uses = _use_counts(func.body)
    for compound in [n for n in walk(func.body) if isinstance(n, c_ast.Compound)]:
        items = compound.block_items or []
        k = 0
        while k < len(items):
            decl = items[k]
            value = _copy_value(decl, arrays, scalars)
            if value is None or uses.get(decl.name, 0) != 1:
                k += 1
                continue
            reads = {n.name for n in walk(value) if isinstance(n, c_ast.ID)}
            at = _use_site(items, k, decl.name, reads)
            if at is not None and _base(value) in pointers and not isinstance(items[at], (c_ast.Assignment, c_ast.Decl)):
                at = None
            if at is None:
                k += 1
                continue
            _replace_use(items[at], decl.name, value)
            del items[k]
            uses = _use_counts(func.body)
    return None


def _copy_value(decl, arrays: dict[str, str], scalars: dict[str, str]) -> c_ast.Node | None:
    """The value of `const T x = v;` where v is a local scalar or a local or shared array's element of type T."""
    if not (isinstance(decl, c_ast.Decl) and "const" in (decl.quals or []) and isinstance(decl.type, c_ast.TypeDecl)
            and isinstance(decl.type.type, c_ast.IdentifierType) and decl.init is not None and not decl.storage):
        return None
    declared = " ".join(decl.type.type.names)
    v = decl.init
    if isinstance(v, c_ast.ID) and scalars.get(v.name) == declared:
        return v
    if isinstance(v, c_ast.ArrayRef):
        base, indices = v, []
        while isinstance(base, c_ast.ArrayRef):
            indices.append(base.subscript)
            base = base.name
        if isinstance(base, c_ast.ID) and arrays.get(base.name) == declared and \
                all(_plain_index(i) for i in indices):
            return v
    return None


def _base(ref: c_ast.Node) -> str | None:
    while isinstance(ref, c_ast.ArrayRef):
        ref = ref.name
    return ref.name if isinstance(ref, c_ast.ID) else None


_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})


def _plain_index(node: c_ast.Node) -> bool:
    """A subscript of names, constants, `threadIdx.x` and the like, `+`, `-` and `*`: it reads nothing but the
    names and does nothing."""
    if isinstance(node, (c_ast.ID, c_ast.Constant)):
        return True
    if isinstance(node, c_ast.StructRef):
        return node.type == "." and isinstance(node.name, c_ast.ID) and node.name.name in _BUILTINS
    return isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*") and _plain_index(node.left) \
        and _plain_index(node.right)


def _use_site(items: list, k: int, name: str, reads: set[str]) -> int | None:
    """The item after items[k] that uses `name`, where only `const` copies stand between (nothing that writes
    what the copy reads); None otherwise."""
    for at in range(k + 1, len(items)):
        item = items[at]
        if any(isinstance(n, c_ast.ID) and n.name == name for n in walk(item)):
            return at if not (_assigned_names(item) & reads) or _only_reads_before(item, name) else None
        if not (isinstance(item, c_ast.Decl) and "const" in (item.quals or []) and item.init is not None
                and not _calls(item)):
            return None
    return None


def _only_reads_before(item, name: str) -> bool:
    """`acc += x * y`: the use is on the right of the one assignment, which writes another name."""
    return isinstance(item, c_ast.Assignment) and not any(
        isinstance(n, c_ast.ID) and n.name == name for n in walk(item.lvalue))


def _replace_use(item: c_ast.Node, name: str, value: c_ast.Node) -> None:
    for node in walk(item):
        for field, child in node.children():
            if isinstance(child, c_ast.ID) and child.name == name:
                _set(node, field, copy.deepcopy(value))


def _set(node: c_ast.Node, field: str, value: c_ast.Node) -> None:
    if "[" in field:
        name, index = field[:-1].split("[")
        getattr(node, name)[int(index)] = value
    else:
        setattr(node, field, value)


# -- implied clauses ------------------------------------------------------------------------------------
def _fold_implied(node: c_ast.Node, known: list[str], changeable: set[str]) -> None:
    """Drop, from each `&&` chain under `node`, the clauses whose text `known` holds."""
    if isinstance(node, c_ast.If):
        _fold_in(node, "cond", known, changeable)
        inner = known + [_text(c) for c in g.clauses(node.cond) if _fixed(c, changeable)]
        _fold_implied(node.iftrue, inner, changeable)
        if node.iffalse is not None:
            _fold_implied(node.iffalse, known, changeable)
        return
    if isinstance(node, c_ast.For):
        _fold_implied(node.stmt, known + _loop_facts(node, changeable), changeable)
        return
    if isinstance(node, c_ast.Decl) and node.init is not None:
        _fold_in(node, "init", known, changeable)
        return
    for _, child in node.children():
        _fold_implied(child, known, changeable)


def _fold_in(node: c_ast.Node, field: str, known: list[str], changeable: set[str]) -> None:
    expr = getattr(node, field)
    if not (isinstance(expr, c_ast.BinaryOp) and expr.op == "&&") or not known:
        return
    clauses = list(g.clauses(expr))
    kept = [c for c in clauses if not (_text(c) in known and _fixed(c, changeable))]
    if kept and len(kept) < len(clauses):
        folded = kept[0]
        for c in kept[1:]:
            folded = c_ast.BinaryOp("&&", folded, c)
        setattr(node, field, folded)


def _loop_facts(loop: c_ast.For, changeable: set[str]) -> list[str]:
    """`for (v = c; v < E; v += s)` with c a non-negative constant and s positive: `c < E` holds in the body."""
    var, start, _ = g.loop_var(loop)
    cond, nxt = loop.cond, loop.next
    if var is None or not (isinstance(start, c_ast.Constant) and start.value.isdigit()):
        return []
    if not (isinstance(cond, c_ast.BinaryOp) and cond.op == "<" and isinstance(cond.left, c_ast.ID)
            and cond.left.name == var and _fixed(cond.right, changeable)):
        return []
    steps = [n for n in (nxt.exprs if isinstance(nxt, c_ast.ExprList) else [nxt])]
    if not any(_counts_up(s, var) for s in steps):
        return []
    return [_text(c_ast.BinaryOp("<", copy.deepcopy(start), cond.right))]


def _counts_up(step, var: str) -> bool:
    if isinstance(step, c_ast.UnaryOp) and step.op in ("++", "p++"):
        return isinstance(step.expr, c_ast.ID) and step.expr.name == var
    return isinstance(step, c_ast.Assignment) and step.op == "+=" and isinstance(step.lvalue, c_ast.ID) \
        and step.lvalue.name == var and isinstance(step.rvalue, c_ast.Constant) and step.rvalue.value.isdigit() \
        and int(step.rvalue.value) > 0


def _fixed(node: c_ast.Node, changeable: set[str]) -> bool:
    """Does the expression read only names the kernel never assigns, and nothing else that can change?"""
    for n in walk(node):
        if isinstance(n, c_ast.ID) and n.name in changeable:
            return False
        if isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall, c_ast.StructRef, c_ast.Assignment)):
            return False
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "*", "&"):
            return False
    return True


# -- facts about names ----------------------------------------------------------------------------------
def _assigned_names(node: c_ast.Node) -> set[str]:
    out = set()
    for n in walk(node):
        if isinstance(n, c_ast.Assignment):
            target = n.lvalue
            while isinstance(target, (c_ast.ArrayRef, c_ast.StructRef)):
                target = target.name
            if isinstance(target, c_ast.ID):
                out.add(target.name)
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") \
                and isinstance(n.expr, c_ast.ID):
            out.add(n.expr.name)
    return out


def _locals_of(body: c_ast.Node) -> set[str]:
    """Every name the kernel declares: a clause over a local may not mean in one block what it meant in the
    block around it (a name declared again), so only clauses over the parameters are known facts."""
    return {n.name for n in walk(body) if isinstance(n, c_ast.Decl) and n.name}


def _local_arrays(body: c_ast.Node) -> dict[str, str]:
    out = {}
    for n in walk(body):
        if isinstance(n, c_ast.Decl) and isinstance(n.type, c_ast.ArrayDecl) and not n.storage:
            t = n.type
            while isinstance(t, c_ast.ArrayDecl):
                t = t.type
            if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
                out[n.name] = " ".join(t.type.names)
    return out


def _shared_arrays(body: c_ast.Node) -> dict[str, str]:
    out = {}
    for n in walk(body):
        if isinstance(n, c_ast.Decl) and isinstance(n.type, c_ast.ArrayDecl) and n.storage == ["__shared__"]:
            t = n.type
            while isinstance(t, c_ast.ArrayDecl):
                t = t.type
            if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
                out[n.name] = " ".join(t.type.names)
    return out


def _pointer_parameters(func: c_ast.FuncDef) -> dict[str, str]:
    """Each parameter `T *p` (const or not) by its pointee type T, where the body declares no other `p`."""
    params = func.decl.type.args.params if func.decl.type.args else []
    out = {}
    for p in params:
        if isinstance(p, c_ast.Decl) and isinstance(p.type, c_ast.PtrDecl) \
                and isinstance(p.type.type, c_ast.TypeDecl) and isinstance(p.type.type.type, c_ast.IdentifierType):
            out[p.name] = " ".join(p.type.type.type.names)
    declared = _locals_of(func.body)
    return {name: t for name, t in out.items() if name not in declared}


def _local_scalars(body: c_ast.Node) -> dict[str, str]:
    return {n.name: " ".join(n.type.type.names) for n in walk(body) if isinstance(n, c_ast.Decl) and n.name
            and isinstance(n.type, c_ast.TypeDecl) and isinstance(n.type.type, c_ast.IdentifierType)
            and not n.storage}


def _use_counts(body: c_ast.Node) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in walk(body):
        if isinstance(n, c_ast.ID):
            out[n.name] = out.get(n.name, 0) + 1
    return out


def _calls(node: c_ast.Node) -> bool:
    return any(isinstance(n, c_ast.FuncCall) for n in walk(node))


__all__ = ["tidy"]
