"""Collecting a kernel's global memory accesses, each with its subscript as a sympy expression."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.analysis.aggregates import is_element_type, param_layout
from gpgpu_opt.analysis.clamps import interior
from gpgpu_opt.analysis.definitions import ReachingValues, as_update, definitions, trip_index
from gpgpu_opt.analysis.loops import Loop, assigned_names, canonical_loop, in_trip_index
from gpgpu_opt.analysis.symbolic import (BDIM, BID, NotAffine, THREAD_SYMBOLS, BLOCK_SYMBOLS, cuda_text, is_affine,
                                         is_opaque, is_quasi_affine, iterator_symbol, opaque, param_symbol,
                                         quasi_terms, to_sympy)
from gpgpu_opt.ast_util import call_args, call_name, ids_in, walk as ast_walk
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.diagnostics import Location
from gpgpu_opt.frontend import math_api
from gpgpu_opt.kernel import Kernel

_INTEGER_TYPES = {"int", "unsigned int", "unsigned", "long", "long int", "unsigned long", "long long",
                  "size_t", "short", "char", "unsigned char", "bool", "signed", "signed int",
                  *cuda_types.integer_aliases("i", 4), *cuda_types.integer_aliases("u", 4)}


def element_bytes(type_name: str) -> int:
    """nvcc's sizeof of an element of a type of the CUDA type table; 4 (a word) for a type it does not
    know, such as a struct (whose fields aggregates.py lays out)."""
    return cuda_types.size_of(type_name) or 4


def is_integer_type(type_name: str) -> bool:
    return type_name in _INTEGER_TYPES or type_name.startswith("unsigned")


@dataclass
class Access:
    array: str
    mode: str                       # 'read' or 'write'
    node: c_ast.ArrayRef
    index_text: str                 # the subscript as C text
    index: sympy.Expr | None        # None when it cannot be expressed (an indirect access)
    loops: list[Loop]               # enclosing canonical loops, outermost first
    element_bytes: int
    location: Location | None
    guarded: bool                   # under an `if`
    kind: str = ""                  # constant / thread / loop / quasi-affine / clamped / redefined /
    #                                 array-of-arrays / volatile / unresolved
    why_unresolved: str | None = None
    extra: dict = field(default_factory=dict)
    #: The subscript of a quasi-affine (`x[i % 7]`, `in[(i - 3) / 2]`) or volatile access, or the interior
    #: piece of an edge clamp (`in[max(i - 1, 0)]`: `i - 1`), for the analysis to evaluate; `index` is None
    #: so that no pass takes the access for one it understands.
    analysis_index: sympy.Expr | None = None
    #: Through a `volatile` pointer: every load and store happens as written, so no pass touches it.
    volatile: bool = False

    @property
    def loop_symbols(self) -> list[sympy.Symbol]:
        return [iterator_symbol(l.var) for l in self.loops]

    @property
    def evaluable_index(self) -> sympy.Expr | None:
        """The subscript as far as evaluating it goes (an affine, quasi-affine or volatile one)."""
        return self.index if self.index is not None else self.analysis_index

    @property
    def understood(self) -> bool:
        """An access a pass may transform: an affine subscript, through a pointer that is not volatile."""
        return self.index is not None and self.kind not in ("unresolved",) + AS_WRITTEN


#: The kinds whose subscript the analysis evaluates but every pass leaves as written.
AS_WRITTEN = ("quasi-affine", "clamped", "redefined", "array-of-arrays", "struct-field", "volatile")


class AccessCollector(c_ast.NodeVisitor):
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.arrays = {p.name: p for p in kernel.arrays}
        self.env: dict[str, sympy.Expr] = {p.name: param_symbol(p.name) for p in kernel.scalars
                                           if p.base_type in _INTEGER_TYPES or p.base_type.startswith("unsigned")}
        #: C types of the integer parameters and locals: how `/`, `%` and `>>` treat their values.
        self.types: dict[str, str] = {p.name: p.base_type for p in kernel.scalars if p.name in self.env}
        self.pointer_aliases: dict[str, tuple[str, sympy.Expr | None]] = {}
        #: Straight-line integer locals defined by an edge clamp (`int w = max(i - 1, 0);`): their interior
        #: piece (their value in `env` stays opaque).
        self.clamped: dict[str, sympy.Expr] = {}
        #: Local pointers to volatile data (`volatile float *p = a + 1;`).
        self.volatile_pointers: set[str] = set()
        self.loops: list[Loop] = []
        self.unanalysable_loops: int = 0
        self.guard_depth = 0
        self.accesses: list[Access] = []
        #: Integer locals assigned more than once (analysis.definitions): opaque in `env`, which the passes
        #: read; their reaching definitions are followed in `reaching`, for the analysis only. A local
        #: declared without an initializer and then assigned once is defined at that assignment.
        self.definitions = definitions(kernel.body)
        self.reassigned = self.definitions.redefined | self.definitions.untracked
        for name in self.reassigned & set(self.env):
            self.env[name] = opaque(name)   # a parameter the kernel assigns
        self.reaching = ReachingValues(self.env, self.definitions)
        for name in self.definitions.redefined & set(self.env):
            self.reaching.values[name] = param_symbol(name)
        self.printer = CudaGenerator()
        #: The field of the element being recorded (`p[i].x`: 'x'), for arrays of structs.
        self.member: str | None = None

    # -- declarations and straight-line definitions -------------------------------------------
    def visit_Decl(self, node: c_ast.Decl):
        if node.init is not None:
            self.visit(node.init)
        if node.name is None:
            return
        self.clamped.pop(node.name, None)
        if isinstance(node.type, c_ast.PtrDecl) and node.init is not None:
            alias = self._pointer_alias(node.init)
            if alias is not None and node.name in self.reassigned:
                # `p += n;` moves it: an access through it is of that array, at an offset not known here;
                # `p = b;` may make it point anywhere (its accesses then stay unseen, as any local's)
                alias = (alias[0], None) if _only_moved(self.kernel.body, node.name) else None
            if alias is not None:
                self.pointer_aliases[node.name] = alias
                if "volatile" in (getattr(node.type.type, "quals", None) or []) + (node.quals or []):
                    self.volatile_pointers.add(node.name)
            return
        if not isinstance(node.type, c_ast.TypeDecl):
            return
        type_name = " ".join(getattr(node.type.type, "names", []))
        if not is_integer_type(type_name):
            return
        self.types[node.name] = type_name
        self.reaching.values[node.name] = opaque(node.name)
        if node.name in self.definitions.redefined and node.init is not None:
            self.reaching.values[node.name] = self.reaching.value_of(node.init, self.types, node.name)
            if is_opaque(self.reaching.values[node.name]):
                self._define_clamp(node.name, node.init)
        if node.init is None or node.name in self.reassigned:
            self.env[node.name] = opaque(node.name)
            return
        self.reaching.values[node.name] = self.reaching.value_of(node.init, self.types, node.name)
        try:
            self.env[node.name] = to_sympy(node.init, self.env, self.types)
        except NotAffine:
            self.env[node.name] = opaque(node.name)
            self._define_clamp(node.name, node.init)

    def _define_clamp(self, name: str, init: c_ast.Node) -> None:
        clamp = self._clamp_interior(init)
        if clamp is not None:
            self.clamped[name] = clamp
        else:
            self.clamped.pop(name, None)

    def _update_local(self, stmt: c_ast.Node) -> None:
        """A statement `x = e;`, `x += e;`, `x++;` on an integer local: its single definition (the value the
        passes see), or a redefinition, which only the reaching values follow. An edge-clamped local moved
        by a step (`W += xy`) stays clamped, its interior moved too."""
        if id(stmt) not in self.definitions.statements:
            return
        name = stmt.lvalue.name if isinstance(stmt, c_ast.Assignment) else stmt.expr.name
        if name not in self.types or name in self.definitions.untracked:
            return
        op, rvalue = as_update(stmt)
        if name in self.definitions.single:
            try:
                self.env[name] = to_sympy(rvalue, self.env, self.types)
            except NotAffine:
                self.env[name] = opaque(name)
        clamp = self.clamped.get(name) if is_opaque(self.reaching.values.get(name, opaque(name))) else None
        self.reaching.update(stmt, self.types)
        if not is_opaque(self.reaching.values[name]):
            self.clamped.pop(name, None)
        elif op == "=":
            self._define_clamp(name, rvalue)
        elif clamp is not None:
            step = self.reaching.value_of(rvalue, self.types, name)
            if is_opaque(step) or name in ids_in(rvalue):
                self.clamped.pop(name, None)
            else:
                self.clamped[name] = sympy.expand(clamp + step if op == "+=" else clamp - step)
        else:
            self.clamped.pop(name, None)

    def _pointer_alias(self, init) -> tuple[str, sympy.Expr | None] | None:
        if isinstance(init, c_ast.ID) and init.name in self.arrays:
            return init.name, sympy.Integer(0)
        if isinstance(init, c_ast.BinaryOp) and init.op == "+":
            for base, off in ((init.left, init.right), (init.right, init.left)):
                if isinstance(base, c_ast.ID) and base.name in self.arrays:
                    try:
                        return base.name, to_sympy(off, self.env, self.types)
                    except NotAffine:
                        return base.name, None
        return None

    # -- control flow ---------------------------------------------------------------------------
    def visit_For(self, node: c_ast.For):
        if node.init is not None:
            self.visit(node.init)
        loop = canonical_loop(node, self.env)
        saved = dict(self.env)
        saved_reaching, saved_clamps = self._enter_loop(loop, node)
        if loop is not None:
            self.env[loop.var] = iterator_symbol(loop.var)
            self.loops.append(loop)
        else:
            self.unanalysable_loops += 1
            for name in assigned_names(node):
                self.env[name] = opaque(name)
        if node.cond is not None:
            self.visit(node.cond)
        self.visit(node.stmt)
        if node.next is not None:
            self.visit(node.next)
        if loop is not None:
            self.loops.pop()
        else:
            self.unanalysable_loops -= 1
        self.env = saved
        self._leave_loop(node, saved_reaching, saved_clamps)

    def _enter_loop(self, loop: Loop | None, node: c_ast.Node) -> tuple[dict, dict]:
        """The reaching values and clamps at the top of every iteration (analysis.definitions): an induction
        variable in closed form, a clamped one with its interior moved likewise, the rest the loop assigns
        opaque."""
        saved_clamps = dict(self.clamped)
        saved, steps = self.reaching.enter_loop(loop, node, self.types)
        for name in assigned_names(node):
            clamp = self.clamped.pop(name, None)
            if clamp is None or name not in steps or not is_opaque(saved.get(name, opaque(name))):
                continue
            op, rvalue = steps[name]
            step = self.reaching.value_of(rvalue, self.types, name)
            if not is_opaque(step) and not any(is_opaque(s) for s in trip_index(loop).free_symbols):
                self.clamped[name] = sympy.expand(clamp + (1 if op == "+=" else -1) * trip_index(loop) * step)
        return saved, saved_clamps

    def _leave_loop(self, node: c_ast.Node, saved_reaching: dict, saved_clamps: dict) -> None:
        self.reaching.leave_loop(saved_reaching, node)
        self.clamped = saved_clamps
        for name in assigned_names(node):
            self.clamped.pop(name, None)

    def visit_While(self, node):
        saved = dict(self.env)
        saved_reaching, saved_clamps = self._enter_loop(None, node)
        for name in assigned_names(node):
            self.env[name] = opaque(name)
        self.unanalysable_loops += 1
        self.generic_visit(node)
        self.unanalysable_loops -= 1
        self.env = saved
        self._leave_loop(node, saved_reaching, saved_clamps)

    visit_DoWhile = visit_While

    def visit_If(self, node: c_ast.If):
        self.visit(node.cond)
        self.guard_depth += 1
        before, clamps_before = self.reaching.branch(), dict(self.clamped)
        self.visit(node.iftrue)
        after_true, clamps_true = self.reaching.branch(), self.clamped
        self.reaching.values, self.clamped = dict(before), dict(clamps_before)
        if node.iffalse is not None:
            self.visit(node.iffalse)
        self.reaching.join(before, after_true, self.reaching.values)
        self.clamped = {n: v for n, v in self.clamped.items() if clamps_true.get(n) == v}
        self.guard_depth -= 1

    # -- accesses -------------------------------------------------------------------------------
    def visit_Assignment(self, node: c_ast.Assignment):
        self.visit(node.rvalue)
        target = _stored_element(node.lvalue)
        if target is not None:
            self._record_member(target, "write", _member(node.lvalue, target))
            if node.op != "=":
                self._record_member(target, "read", _member(node.lvalue, target))
            self._visit_subscripts(target)
        else:
            self.visit(node.lvalue)
            if isinstance(node.lvalue, c_ast.ID):
                self._update_local(node)

    def visit_UnaryOp(self, node: c_ast.UnaryOp):
        target = _stored_element(node.expr) if node.op in ("++", "--", "p++", "p--") else None
        if target is not None:
            self._record_member(target, "read", _member(node.expr, target))
            self._record_member(target, "write", _member(node.expr, target))
            self._visit_subscripts(target)
        elif node.op in ("++", "--", "p++", "p--") and isinstance(node.expr, c_ast.ID):
            self._update_local(node)
        elif node.op == "&" and isinstance(node.expr, c_ast.ArrayRef):
            self._visit_subscripts(node.expr)  # an address, not an access
        else:
            self.generic_visit(node)

    def visit_FuncCall(self, node: c_ast.FuncCall):
        """A cache-hinted load or store (`__ldcs(&a[i])`, `__stcs(&a[i], v)`) and an out-parameter
        (`sincosf(x, &s[i], &c[i])`) are accesses of a[i]; they stay as written (like a volatile one:
        moving the subscript into shared memory would put a global hint on a shared address)."""
        name = call_name(node) or ""
        effect, written = math_api.memory_effect(name), math_api.written_arguments(name)
        for k, arg in enumerate(call_args(node)):
            if effect and isinstance(arg, c_ast.UnaryOp) and arg.op == "&" and isinstance(arg.expr, c_ast.ArrayRef):
                before = len(self.accesses)
                self._record(arg.expr, "write" if k in written else "read")
                for access in self.accesses[before:]:
                    mark_volatile(access)
                    access.why_unresolved = f"an access by {name}: it happens as written"
                self._visit_subscripts(arg.expr)
            else:
                self.visit(arg)

    def visit_ArrayRef(self, node: c_ast.ArrayRef):
        self._record(node, "read")
        self._visit_subscripts(node)

    def visit_StructRef(self, node: c_ast.StructRef):
        """`p[e].f`: a read of field f of an element of an array of structs (aggregates)."""
        if node.type == "." and isinstance(node.name, c_ast.ArrayRef):
            self._record_member(node.name, "read", node.field.name)
            self._visit_subscripts(node.name)
        else:
            self.generic_visit(node)

    def _record_member(self, node: c_ast.ArrayRef, mode: str, member: str | None) -> None:
        """_record (which subclasses extend) of an element, knowing the field accessed, if any."""
        self.member = member
        try:
            self._record(node, mode)
        finally:
            self.member = None

    def _visit_subscripts(self, node: c_ast.ArrayRef):
        self.visit(node.subscript)
        if isinstance(node.name, c_ast.ArrayRef):
            self._visit_subscripts(node.name)

    def _record(self, node: c_ast.ArrayRef, mode: str):
        base = node.name
        if isinstance(base, c_ast.ArrayRef):
            self._record_nested(node, mode)
            return
        if not isinstance(base, c_ast.ID):
            return
        array, offset = base.name, sympy.Integer(0)
        if array in self.pointer_aliases:
            array, offset = self.pointer_aliases[array]
        if array not in self.arrays:
            return  # a local or shared array
        param = self.arrays[array]
        text = self.printer.visit(node.subscript)
        access = Access(array, mode, node, text, None, list(self.loops), element_bytes(param.base_type),
                        Location.of(node), self.guard_depth > 0)
        try:
            if offset is None:
                raise NotAffine("pointer offset")
            if self.unanalysable_loops:
                raise NotAffine("inside a loop that is not in canonical form")
            access.index = sympy.expand(offset + to_sympy(node.subscript, self.env, self.types))
        except NotAffine as why:
            access.why_unresolved = str(why)
        classify(access)
        if mode == "read" and access.kind == "unresolved" and offset is not None and not self.unanalysable_loops:
            clamp = self._clamp_interior(node.subscript)
            if clamp is not None:
                mark_clamped(access, sympy.expand(offset + clamp))
        if access.kind == "unresolved" and offset is not None and not self.unanalysable_loops:
            self._through_reaching_definitions(access, offset, node.subscript)
        if param.is_volatile or base.name in self.volatile_pointers:
            mark_volatile(access)
        if param.inner_dims or param.indirect or not is_element_type(param.base_type):
            mark_aggregate(access, param, param_layout(self.kernel, array), self.member)
        self.accesses.append(access)

    def _record_nested(self, node: c_ast.ArrayRef, mode: str) -> None:
        """`c[z][y][x]` of an array-of-arrays parameter: one access at the flattened subscript
        `(z * Y + y) * X + x`, which the passes leave as written."""
        subscripts = []
        inner = node
        while isinstance(inner, c_ast.ArrayRef):
            subscripts.insert(0, inner.subscript)
            inner = inner.name
        if not (isinstance(inner, c_ast.ID) and inner.name in self.arrays):
            return
        param = self.arrays[inner.name]
        text = "][".join(self.printer.visit(sub) for sub in subscripts)
        access = Access(param.name, mode, node, text, None, list(self.loops),
                        element_bytes(param.base_type), Location.of(node), self.guard_depth > 0)
        if param.indirect or len(subscripts) != len(param.inner_dims) + 1:
            access.kind = "unresolved"
            access.why_unresolved = "an element of an array of pointers or a partial subscript"
        else:
            flat = None
            try:
                if self.unanalysable_loops:
                    raise NotAffine("inside a loop that is not in canonical form")
                flat = to_sympy(subscripts[0], self.env, self.types)
                for sub, dim in zip(subscripts[1:], param.inner_dims):
                    flat = flat * dim + to_sympy(sub, self.env, self.types)
                access.index = sympy.expand(flat)
            except NotAffine as why:
                access.why_unresolved = str(why)
            classify(access)
            mark_aggregate(access, param)
        if param.is_volatile:
            mark_volatile(access)
        self.accesses.append(access)


    def _through_reaching_definitions(self, access: Access, offset: sympy.Expr, subscript: c_ast.Node) -> None:
        """An access the passes cannot see through (a redefined local in its subscript) whose value is
        still one known expression here: kind `redefined`, analysed from that value, left as written."""
        if any(is_opaque(s) for s in offset.free_symbols):
            return
        value = self.reaching.value_of(subscript, self.types, "subscript")
        if is_opaque(value):
            return
        probe = Access(access.array, access.mode, access.node, access.index_text, sympy.expand(offset + value),
                       access.loops, access.element_bytes, access.location, access.guarded)
        classify(probe)
        if probe.kind in ("thread", "loop", "constant"):
            redefined = sorted(ids_in(subscript) & self.definitions.redefined) or sorted(ids_in(subscript))
            access.analysis_index, access.index, access.kind = probe.index, None, "redefined"
            access.why_unresolved = (f"`{redefined[0]}` is assigned more than once (here the subscript is "
                                     f"`{cuda_text(probe.index)}`)")

    def _clamp_interior(self, expr: c_ast.Node) -> sympy.Expr | None:
        """The interior piece of an expression with edge clamps (analysis.clamps), through the clamped
        locals it uses (and the reaching definitions of redefined locals); None when it has none or is not
        piecewise affine."""
        env = dict(self.reaching.values)
        used = [n for n, v in self.clamped.items() if env.get(n) == opaque(n)]
        env.update({n: self.clamped[n] for n in used})
        moving = THREAD_SYMBOLS | BLOCK_SYMBOLS | {iterator_symbol(l.var) for l in self.loops}
        try:
            value, clamps = interior(expr, env, self.types, moving)
        except NotAffine:
            return None
        if not clamps and not set(used) & ids_in(expr):
            return None
        variables = list(THREAD_SYMBOLS | BLOCK_SYMBOLS | {iterator_symbol(l.var) for l in self.loops})
        if not is_affine(value, variables) or quasi_terms(value, variables):
            return None
        return value


def classify(access: Access) -> None:
    """The paper's kinds: constant, thread (predefined) index, loop index, unresolved."""
    expr = access.index
    if expr is None:
        access.kind = "unresolved"
        return
    if in_trip_index(expr, access.loops) is None:
        access.kind, access.index = "unresolved", None
        access.why_unresolved = ("a loop iterator that differs between threads in a way not modelled (a "
                                 "multiplicative loop or an unknown start)")
        return
    loop_syms = set(access.loop_symbols)
    variables = list(THREAD_SYMBOLS | BLOCK_SYMBOLS | loop_syms)
    moving = quasi_terms(expr, THREAD_SYMBOLS | BLOCK_SYMBOLS | loop_syms)
    if moving and not any(is_opaque(s) for s in expr.free_symbols):
        access.kind, access.analysis_index, access.index = "quasi-affine", expr, None
        access.why_unresolved = (f"a quasi-affine subscript: `{cuda_text(moving[0])}` moves with the thread or "
                                 "loop index, but not by a constant step")
        return
    if not is_affine(expr, variables) and not is_quasi_affine(expr, variables):
        access.kind = "unresolved"
        access.why_unresolved = access.why_unresolved or "not affine in thread ids and loop iterators"
        return
    free = expr.free_symbols
    if free & loop_syms:
        access.kind = "loop"
    elif free & (THREAD_SYMBOLS | BLOCK_SYMBOLS):
        access.kind = "thread"
    else:
        access.kind = "constant"


def mark_clamped(access: Access, interior_index: sympy.Expr) -> None:
    """An edge clamp read: the analysis sees its interior piece, every pass leaves it as written."""
    access.analysis_index, access.index = interior_index, None
    access.kind = "clamped"
    access.why_unresolved = (f"an edge clamp: `{cuda_text(interior_index)}` inside the edges, another piece at "
                             "them")


def mark_aggregate(access: Access, param, layout=None, member: str | None = None) -> None:
    """An element of an array of arrays, or of a struct: the analysis evaluates a flattened affine subscript,
    the passes leave the access as written (they rewrite flat element accesses only). A field of a struct
    whose layout is certain (frontend/struct_layouts.StructLayout) is element `stride * e + k` of the field type."""
    if layout is not None and member in layout.fields and access.index is not None \
            and access.kind not in ("unresolved", "quasi-affine"):
        access.analysis_index = sympy.expand(layout.stride * access.index + layout.fields.index(member))
        access.index, access.element_bytes, access.kind = None, layout.field_bytes, "struct-field"
        access.extra["field"] = member
        access.why_unresolved = (f"field '{member}' of an array of structs ('{param.base_type}'): element "
                                 f"{cuda_text(access.analysis_index)} of {layout.field_type}")
    elif param.inner_dims and access.index is not None and access.kind not in ("unresolved", "quasi-affine"):
        access.analysis_index, access.index = access.index, None
        access.kind = "array-of-arrays"
        access.why_unresolved = "an element of an array of arrays"
    elif not param.inner_dims:
        access.analysis_index = access.index = None
        access.kind = "unresolved"
        access.why_unresolved = f"an element of the struct type '{param.base_type}'"


def _only_moved(body: c_ast.Node, name: str) -> bool:
    """Is every change of the pointer `name` a step of it (`+=`, `-=`, `++`, `--`), never a new value, nor
    its address taken?"""
    for n in ast_walk(body):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID) and n.lvalue.name == name \
                and n.op not in ("+=", "-="):
            return False
        if isinstance(n, c_ast.UnaryOp) and n.op == "&" and isinstance(n.expr, c_ast.ID) and n.expr.name == name:
            return False
    return True


def _member(lvalue, target: c_ast.ArrayRef) -> str | None:
    """The field stored, for a store `a[i].x = v` directly to a field of an element (None otherwise)."""
    if isinstance(lvalue, c_ast.StructRef) and lvalue.type == "." and lvalue.name is target:
        return lvalue.field.name
    return None


def _stored_element(lvalue) -> c_ast.ArrayRef | None:
    """The array element an assignment stores to: `a[i]`, or `a[i]` of a member store `a[i].x`."""
    target = lvalue
    while isinstance(target, c_ast.StructRef) and target.type == ".":
        target = target.name
    return target if isinstance(target, c_ast.ArrayRef) else None


def mark_volatile(access: Access) -> None:
    """A volatile access is left as written by every pass: its subscript is kept for the analysis only."""
    access.volatile = True
    if access.index is not None:
        access.analysis_index, access.index = access.index, None
    access.kind = "volatile"
    access.why_unresolved = "a volatile access: each load and store happens as written"


def collect_accesses(kernel: Kernel) -> list[Access]:
    collector = AccessCollector(kernel)
    collector.visit(kernel.body)
    return collector.accesses


__all__ = ["Access", "collect_accesses", "element_bytes", "BDIM", "BID"]
