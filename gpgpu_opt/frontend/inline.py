"""Inlining `__device__` helpers that take C++ references, where a kernel calls them.

Real CUDA C++ passes values out of small helpers through references (Rodinia's cfd:
`compute_velocity(density, momentum, velocity);` with `float3& velocity`). C has no references, and the
passes and the emulator work on C, so such a helper cannot be kept as a call. Where the references are bound
to the caller's own variables, the call means the helper's body with each reference parameter replaced by
the variable it is bound to; that is what this module writes into the kernel, as a person would have:

    float3 velocity;  compute_velocity(density, momentum, velocity);   // velocity.x = momentum.x / density;
    float speed_sqd = compute_speed_sqd(velocity);                     // ...; float speed_sqd = velocity.x * ...;

This is done in the front end, before any pass: the kernel every pass and every emulator check starts from
is the inlined one, and the helper (whose C text `cxx_lowering` reads with its references as values, see
`reference_parameters`) is never used as a call. The helper's own text, and the host copy of a
`__host__ __device__` helper, stay as written in the output.

A whitelist; anything else makes the kernel pass through with a note naming the helper and why:
- the call is a statement, a declaration's initializer or an assignment's value, in a block;
- each argument bound to a reference is a variable of the kernel (a parameter or a local, neither a pointer
  nor an array, of the parameter's exact type) or a member `v.x` of a vector-typed one: its designation cannot
  change while the body runs, so the substitution is exact; two references bound to overlapping variables
  (`v` and `v`, `v` and `v.x`) are refused unless the helper writes neither;
- the helper's body: declarations (no `static`, no `__shared__`), expressions, `if`, loops, blocks, and a
  `return` only as its last statement; no address taken of a reference parameter, no label, no `switch`;
- a value parameter becomes a fresh local initialized with its argument (or, when the helper never writes it
  and the argument is a kernel variable of the same type the helper does not write, that variable itself);
  the helper's locals are renamed where their names are taken in the kernel; a name the helper uses from
  file scope must not be declared in the kernel (it would be captured).

Such helpers pass their results through vector-typed locals (`float3 velocity;` written `velocity.x = ...`).
In a kernel that had helpers inlined, a local of a vector type that is only ever used member by member is
then split into one scalar per member used (`float velocity_x;`): the same values, and scalars are what
vectorize widens to one value per lane.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.ast_util import fresh_name, ids_in, transform, walk
from gpgpu_opt.cuda_types import VECTOR_TYPES

_VECTOR_BASES = {v.name: (v.base, "xyzw"[:v.n]) for v in VECTOR_TYPES}
_STATEMENTS = (c_ast.Decl, c_ast.Assignment, c_ast.UnaryOp, c_ast.FuncCall, c_ast.If, c_ast.For, c_ast.While,
               c_ast.DoWhile, c_ast.Compound, c_ast.EmptyStatement, c_ast.Break, c_ast.Continue, c_ast.Return,
               c_ast.TernaryOp, c_ast.BinaryOp, c_ast.Cast, c_ast.ID, c_ast.Constant, c_ast.StructRef,
               c_ast.ArrayRef, c_ast.ExprList, c_ast.DeclList)


@dataclass(frozen=True)
class ReferenceHelper:
    """A `__device__` helper with reference parameters: its C (references read as values) and their names."""
    func: c_ast.FuncDef
    references: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.func.decl.name


class NotInlined(Exception):
    """Why a call of a reference helper cannot be inlined (the caller passes the function through)."""


def inline_reference_helpers(func: c_ast.FuncDef, helpers: dict[str, ReferenceHelper]) -> tuple[c_ast.FuncDef, list[str]]:
    """`func` with every call of a helper of `helpers` inlined (a copy; `func` is not changed), and the names
    of the helpers inlined, in order. NotInlined says why a call cannot be."""
    called = [n.name.name for n in walk(func) if _calls(n, helpers)]
    if not called:
        return func, []
    func = copy.deepcopy(func)
    _Inliner(func, helpers).run()
    split_vector_locals(func)
    left = next((n for n in walk(func.body) if _calls(n, helpers)), None)
    if left is not None:
        raise NotInlined(f"the call of '{left.name.name}' at line {left.coord.line} is not a statement, a "
                         f"declaration's initializer or an assignment's value, or the helper calls itself")
    return func, list(dict.fromkeys(called))


def _calls(node: c_ast.Node, helpers: dict[str, ReferenceHelper]) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and node.name.name in helpers


class _Inliner:
    def __init__(self, func: c_ast.FuncDef, helpers: dict[str, ReferenceHelper]):
        self.func, self.helpers = func, helpers
        self.taken = {n.name for n in walk(func) if isinstance(n, (c_ast.ID, c_ast.Decl)) and n.name}
        for helper in helpers.values():   # a fresh local must not capture a name a helper uses from file scope
            own = {p.name for p in _parameters(helper.func)} | \
                {n.name for n in walk(helper.func.body) if isinstance(n, c_ast.Decl)}
            self.taken |= _free_names(helper.func.body, own)
        self.types = _variable_types(func)

    def run(self) -> None:
        for block in [n for n in walk(self.func.body) if isinstance(n, c_ast.Compound)]:
            items: list[c_ast.Node] = []
            for item in block.block_items or []:
                items.extend(self._statement(item))
            block.block_items = items

    def _statement(self, item: c_ast.Node) -> list[c_ast.Node]:
        """`item`, or the statements it means once its call of a reference helper is inlined."""
        if _calls(item, self.helpers):
            body, result = self._inline(item)
            if result is not None and _has_effect(result):
                raise NotInlined(f"'{item.name.name}' returns a value with a side effect that the call drops")
            return body
        if isinstance(item, c_ast.Decl) and item.init is not None and _calls(item.init, self.helpers):
            if item.name in ids_in(item.init):
                raise NotInlined(f"'{item.name}' is passed to '{item.init.name.name}' in its own initializer")
            body, result = self._inline(item.init)
            item.init = self._converted(result, item.init, _type_names(item.type))
            return body + [item]
        # `a[i] = f(x)`: the right operand is evaluated before the left (C++17), so after the helper's body
        if isinstance(item, c_ast.Assignment) and _calls(item.rvalue, self.helpers):
            body, result = self._inline(item.rvalue)
            item.rvalue = self._converted(result, item.rvalue, self._lvalue_type(item.lvalue))
            return body + [item]
        return [item]

    # -- one call -----------------------------------------------------------------------------------------

    def _inline(self, call: c_ast.FuncCall) -> tuple[list[c_ast.Node], c_ast.Node | None]:
        """The helper's statements for `call`, and the expression it returns (None for void)."""
        helper = self.helpers[call.name.name]
        name = helper.name
        params = _parameters(helper.func)
        args = call.args.exprs if call.args is not None else []
        if len(args) != len(params):
            raise NotInlined(f"'{name}' is called with {len(args)} arguments for {len(params)} parameters")
        body = helper.func.body.block_items or []
        _check_body(helper, body)
        written = _written_names(helper.func.body)
        locals_ = _local_declarations(helper)
        free = _free_names(helper.func.body, {p.name for p in params} | set(locals_))
        captured = sorted(free & set(self.types))
        if captured:
            raise NotInlined(f"'{name}' uses '{captured[0]}' from file scope, which the caller declares too")

        mapping: dict[str, c_ast.Node] = {}
        bound: list[tuple[str, c_ast.Node]] = []   # (reference parameter, the variable it is bound to)
        for param, arg in zip(params, args):
            if isinstance(param.type, c_ast.ArrayDecl):
                raise NotInlined(f"'{name}' takes the array parameter '{param.name}'")
            if param.name in helper.references:
                mapping[param.name] = self._bound_variable(name, param, arg)
                bound.append((param.name, arg))
        _check_overlaps(name, bound, written)
        written_variables = {_root(arg) for p, arg in bound if p in written}
        prologue: list[c_ast.Node] = []
        for param, arg in zip(params, args):
            if param.name in helper.references:
                continue
            if param.name not in written and self._same_variable_type(arg, param) and \
                    arg.name not in written_variables:
                mapping[param.name] = c_ast.ID(arg.name, arg.coord)
            else:
                local = fresh_name(param.name, self.taken)
                mapping[param.name] = c_ast.ID(local, arg.coord)
                prologue.append(c_ast.Decl(local, [], [], [], [], _renamed_type(param.type, local), arg, None,
                                           coord=call.coord))
        for local in locals_:
            mapping[local] = c_ast.ID(fresh_name(local, self.taken))
        statements = [_substituted(s, mapping) for s in body]
        result = None
        if statements and isinstance(statements[-1], c_ast.Return):
            result = statements.pop().expr
        return prologue + statements, result

    def _bound_variable(self, helper: str, param: c_ast.Decl, arg: c_ast.Node) -> c_ast.Node:
        """The kernel variable the reference `param` is bound to (a copy of `arg`), or NotInlined."""
        where = f"'{helper}': its reference parameter '{param.name}'"
        if not _plain_lvalue(arg):
            raise NotInlined(f"{where} is bound to an expression that is not a variable of the caller")
        var = _root(arg)
        types = self.types.get(var)
        if types is None:
            raise NotInlined(f"{where} is bound to '{var}', which is not a local or parameter of the caller")
        if len(types) > 1:
            raise NotInlined(f"{where} is bound to '{var}', which the caller declares with different types")
        (var_type,) = types
        if isinstance(arg, c_ast.StructRef):
            base, fields = _VECTOR_BASES.get(var_type[-1] if var_type else "", (None, ""))
            if base is None or arg.field.name not in fields:
                raise NotInlined(f"{where} is bound to a member of '{var}', which is not of a vector type")
            var_type = (base,)
        if _without_const(var_type) != _without_const(_type_names(param.type)):
            raise NotInlined(f"{where} is bound to '{var}' of another type")
        return arg

    def _same_variable_type(self, arg: c_ast.Node, param: c_ast.Decl) -> bool:
        types = self.types.get(arg.name) if isinstance(arg, c_ast.ID) else None
        return types is not None and len(types) == 1 and \
            _without_const(next(iter(types))) == _without_const(_type_names(param.type))

    def _lvalue_type(self, lvalue: c_ast.Node) -> tuple[str, ...] | None:
        types = self.types.get(lvalue.name) if isinstance(lvalue, c_ast.ID) else None
        return next(iter(types)) if types is not None and len(types) == 1 else None

    def _converted(self, result: c_ast.Node | None, call: c_ast.FuncCall,
                   target: tuple[str, ...] | None) -> c_ast.Node:
        """The value the call stands for: the returned expression, cast to the helper's return type unless the
        variable it initializes has that type already (then the conversion is the same)."""
        helper = self.helpers[call.name.name]
        if result is None:
            raise NotInlined(f"'{helper.name}' returns no value, and its call's value is used")
        returns = helper.func.decl.type.type
        if target is not None and _without_const(target) == _without_const(_type_names(returns)):
            return result
        return c_ast.Cast(c_ast.Typename(None, [], None, _renamed_type(returns, None)), result, call.coord)


# -- the helper's body --------------------------------------------------------------------------------------


def _parameters(func: c_ast.FuncDef) -> list[c_ast.Decl]:
    args = func.decl.type.args
    params = [p for p in (args.params if args is not None else []) if isinstance(p, c_ast.Decl)]
    if len(params) == 1 and params[0].name is None:    # f(void)
        return []
    return params


def _check_body(helper: ReferenceHelper, body: list[c_ast.Node]) -> None:
    name = helper.name
    for k, statement in enumerate(body):
        for node in walk(statement):
            if not isinstance(node, _STATEMENTS + (c_ast.TypeDecl, c_ast.IdentifierType, c_ast.Typename,
                                                   c_ast.PtrDecl, c_ast.ArrayDecl, c_ast.InitList)):
                raise NotInlined(f"'{name}' has a {type(node).__name__} statement, which is not inlined")
            if isinstance(node, c_ast.Return) and (node is not statement or k != len(body) - 1):
                raise NotInlined(f"'{name}' returns other than at its end (line {node.coord.line})")
            if isinstance(node, c_ast.Decl) and node.storage:
                raise NotInlined(f"'{name}' declares the {' '.join(node.storage)} variable '{node.name}'")
            if isinstance(node, c_ast.UnaryOp) and node.op == "&" and _root(node.expr) in helper.references:
                raise NotInlined(f"'{name}' takes the address of its reference parameter '{_root(node.expr)}'")


def _local_declarations(helper: ReferenceHelper) -> list[str]:
    """The helper's locals, each declared once and never named like a parameter (else NotInlined)."""
    names = [n.name for n in walk(helper.func.body) if isinstance(n, c_ast.Decl)]
    params = {p.name for p in _parameters(helper.func)}
    repeated = next((n for n in names if names.count(n) > 1 or n in params), None)
    if repeated is not None:
        raise NotInlined(f"'{helper.name}' declares '{repeated}' more than once")
    return names


def _free_names(body: c_ast.Node, own: set[str]) -> set[str]:
    """The names `body` uses that are not the helper's (globals, functions)."""
    return ids_in(body) - own


def _written_names(body: c_ast.Node) -> set[str]:
    """The variables assigned, incremented or whose address is taken, anywhere in `body` (by their root)."""
    written = set()
    for node in walk(body):
        if isinstance(node, c_ast.Assignment):
            written.add(_root(node.lvalue))
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--", "&"):
            written.add(_root(node.expr))
    return written - {None}


def _has_effect(expr: c_ast.Node) -> bool:
    return any(isinstance(n, (c_ast.Assignment, c_ast.FuncCall)) or
               isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--") for n in walk(expr))


def _substituted(statement: c_ast.Node, mapping: dict[str, c_ast.Node]) -> c_ast.Node:
    """A copy of the helper's statement with its names replaced (declarations renamed too)."""
    def replace(n: c_ast.Node):
        if isinstance(n, c_ast.ID) and n.name in mapping:
            return copy.deepcopy(mapping[n.name])
        if isinstance(n, c_ast.Decl) and n.name in mapping:
            new = mapping[n.name].name
            n.name = new
            n.type = _renamed_type(n.type, new)
        return None

    return transform(copy.deepcopy(statement), replace, skip_member_names=True)


def _renamed_type(node: c_ast.Node, name: str | None) -> c_ast.Node:
    """A copy of a declarator with its declared name set to `name` (None for a type name)."""
    node = copy.deepcopy(node)
    for n in walk(node):
        if isinstance(n, c_ast.TypeDecl):
            n.declname = name
    return node


# -- the caller's variables ---------------------------------------------------------------------------------


def _variable_types(func: c_ast.FuncDef) -> dict[str, set[tuple[str, ...]]]:
    """Each parameter and local of `func` that is a plain variable (not a pointer, not an array), with the
    types it is declared with; a name also declared as a pointer, an array or a function maps to ()."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for decl in [*_parameters(func), *(n for n in walk(func.body) if isinstance(n, c_ast.Decl))]:
        if decl.name is None:
            continue
        plain = isinstance(decl.type, c_ast.TypeDecl) and isinstance(decl.type.type, c_ast.IdentifierType)
        found.setdefault(decl.name, set()).add(_type_names(decl.type) if plain else ("<not a plain variable>",))
    return found


def _type_names(node: c_ast.Node) -> tuple[str, ...]:
    """`const float` as ('const', 'float'); () for a type that is not a plain named one."""
    if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType):
        return tuple(node.quals) + tuple(node.type.names)
    return ()


def _without_const(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in names if n not in ("const", "volatile"))


def _plain_lvalue(node: c_ast.Node) -> bool:
    """A variable `v` or a member `v.x` of one."""
    return isinstance(node, c_ast.ID) or isinstance(node, c_ast.StructRef) and node.type == "." and \
        isinstance(node.name, c_ast.ID)


def _root(node: c_ast.Node) -> str | None:
    while isinstance(node, (c_ast.StructRef, c_ast.ArrayRef)):
        node = node.name
    return node.name if isinstance(node, c_ast.ID) else None


def _check_overlaps(helper: str, bound: list[tuple[str, c_ast.Node]], written: set[str]) -> None:
    """Two references bound to overlapping variables, one of them written by the helper: refused."""
    for k, (p, a) in enumerate(bound):
        for q, b in bound[k + 1:]:
            if _root(a) != _root(b):
                continue
            distinct_members = isinstance(a, c_ast.StructRef) and isinstance(b, c_ast.StructRef) and \
                a.field.name != b.field.name
            if not distinct_members and (p in written or q in written):
                raise NotInlined(f"'{helper}': its reference parameters '{p}' and '{q}' are bound to the same "
                                 f"variable '{_root(a)}', and the helper writes one of them")


# -- vector locals as scalars -------------------------------------------------------------------------------


def split_vector_locals(func: c_ast.FuncDef) -> list[str]:
    """Split, in place, each local of a vector type declared once without an initializer and used only as
    `v.x`, `v.y`... into one scalar local per member used (`v_x`...); returns the names split."""
    taken = {n.name for n in walk(func) if isinstance(n, (c_ast.ID, c_ast.Decl)) and n.name}
    declared = [n.name for n in walk(func) if isinstance(n, c_ast.Decl)] + [p.name for p in _parameters(func)]
    uses: dict[str, list[c_ast.StructRef]] = {}
    whole: set[str] = set()
    for node in _variables_and_members(func.body):
        if isinstance(node, c_ast.StructRef):
            uses.setdefault(node.name.name, []).append(node)
        else:
            whole.add(node.name)
    split: dict[str, dict[str, str]] = {}   # local -> member -> scalar
    for block in [n for n in walk(func.body) if isinstance(n, c_ast.Compound)]:
        items = []
        for item in block.block_items or []:
            members = _splittable_members(item, declared, whole, uses)
            if members is None:
                items.append(item)
                continue
            base = _VECTOR_BASES[item.type.type.names[0]][0]
            split[item.name] = {m: fresh_name(f"{item.name}_{m}", taken) for m in members}
            items.extend(c_ast.Decl(name, [], [], [], [], c_ast.TypeDecl(name, [], None, c_ast.IdentifierType([base])),
                                    None, None, coord=item.coord) for name in split[item.name].values())
        block.block_items = items

    def scalar(n: c_ast.Node):
        if isinstance(n, c_ast.StructRef) and isinstance(n.name, c_ast.ID) and n.name.name in split:
            return c_ast.ID(split[n.name.name][n.field.name], n.coord)
        return None

    transform(func.body, scalar)
    scalars = {name for members in split.values() for name in members.values()}
    if not any(isinstance(n, (c_ast.Switch, c_ast.Label, c_ast.Goto)) for n in walk(func.body)):
        # (a jump past a declaration with an initializer is an error in C++: none can cross one here)
        for block in [n for n in walk(func.body) if isinstance(n, c_ast.Compound)]:
            _declare_at_first_assignment(block, scalars)
    return list(split)


def _declare_at_first_assignment(block: c_ast.Compound, scalars: set[str]) -> None:
    """`float v_x; ... v_x = e;` as `float v_x = e;` where the assignment, in the same block, is the first
    statement that names v_x (every later use is then in its scope, as before)."""
    items = block.block_items or []
    for decl in [d for d in items if isinstance(d, c_ast.Decl) and d.name in scalars]:
        at = items.index(decl)
        first = next((k for k in range(at + 1, len(items)) if decl.name in _names_in(items[k])), None)
        if first is None:
            continue
        item = items[first]
        if isinstance(item, c_ast.Assignment) and item.op == "=" and isinstance(item.lvalue, c_ast.ID) and \
                item.lvalue.name == decl.name and decl.name not in _names_in(item.rvalue):
            decl.init, decl.coord = item.rvalue, item.coord
            items[first] = decl
            del items[at]
    block.block_items = items


def _names_in(node: c_ast.Node) -> set[str]:
    return {n.name for n in walk(node) if isinstance(n, (c_ast.ID, c_ast.Decl)) and n.name}


def _splittable_members(item: c_ast.Node, declared: list[str], whole: set[str],
                        uses: dict[str, list[c_ast.StructRef]]) -> list[str] | None:
    """The members used of the local `item` declares, in order, when it can be split; else None."""
    if not isinstance(item, c_ast.Decl) or item.init is not None or item.storage or item.quals or \
            not isinstance(item.type, c_ast.TypeDecl) or not isinstance(item.type.type, c_ast.IdentifierType) or \
            item.type.quals or len(item.type.type.names) != 1 or item.type.type.names[0] not in _VECTOR_BASES:
        return None
    name = item.name
    if declared.count(name) != 1 or name in whole or name not in uses:
        return None
    fields = _VECTOR_BASES[item.type.type.names[0]][1]
    used = {ref.field.name for ref in uses[name]}
    if any(ref.type != "." for ref in uses[name]) or not used <= set(fields):
        return None
    return [f for f in fields if f in used]


def _variables_and_members(node: c_ast.Node):
    """Each `v.m` of a variable v (as the StructRef) and each other use of a variable (as the ID)."""
    if isinstance(node, c_ast.StructRef):
        if isinstance(node.name, c_ast.ID):
            yield node
        else:
            yield from _variables_and_members(node.name)
        return
    if isinstance(node, c_ast.ID):
        yield node
    for _, child in node.children():
        yield from _variables_and_members(child)
