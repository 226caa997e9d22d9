"""Expression evaluation over the active lanes (a mixin of the Interpreter).

`ev(node, mask)` returns a Value (scalar/vector) or a PtrValue; `lv(node, mask)` an lvalue with
`load(mask)` and `store(value, mask)`. Lanes outside the mask compute garbage but never touch memory,
never fault, and never write variables."""
from __future__ import annotations

import math

import numpy as np
from pycparser import c_ast

from gpgpu_opt.emulator.errors import OutOfBoundsError, UndefinedBehaviorError, UnsupportedConstruct, where
from gpgpu_opt.emulator.masks import m_and, m_andnot, m_any
from gpgpu_opt.emulator.memory import PtrValue, width
from gpgpu_opt.emulator.values import (BOOL, COMPONENTS, INT, LONG, UINT, ULONG, WIDE_FIELDS, CType, Value, VecType,
                                       arith, cast_data, common_type, convert, parse_constant, select, select_value,
                                       truth, type_from_names, unary)
from gpgpu_opt.frontend.environment import BOOL_LITERALS

BUILTIN_VECTORS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
UINT3 = VecType("uint3", UINT, 3)
INT64 = np.dtype(np.int64)


class PtrType:
    """The type of a pointer variable: what it points to."""
    __slots__ = ("view",)

    def __init__(self, view):
        self.view = view

    def __repr__(self) -> str:
        return f"{self.view} *"


class Var:
    __slots__ = ("name", "ctype", "value")

    def __init__(self, name, ctype, value):
        self.name = name
        self.ctype = ctype
        self.value = value


class VarLV:
    __slots__ = ("var", "node")

    def __init__(self, var: Var, node):
        self.var = var
        self.node = node

    @property
    def ctype(self):
        return self.var.ctype

    def load(self, mask):
        if self.var.value is None:
            raise UndefinedBehaviorError(f"use of uninitialised pointer '{self.var.name}' at {where(self.node)}")
        return self.var.value

    def store(self, val, mask) -> None:
        var = self.var
        if mask is False:
            return
        if isinstance(var.ctype, PtrType):
            old = var.value
            if mask is None or old is None:
                var.value = PtrValue(val.buffer, val.offset, var.ctype.view, None)
            elif old.buffer is val.buffer:
                var.value = PtrValue(val.buffer, select(mask, val.offset, old.offset), var.ctype.view, None)
            else:
                raise UnsupportedConstruct(f"pointer '{var.name}' pointing into different arrays in different "
                                           f"threads at {where(self.node)}")
        elif mask is None:
            var.value = val
        else:
            var.value = select_value(mask, val, var.value)


class CompLV:
    """A component of a vector variable: `v.x`."""
    __slots__ = ("var", "comp", "node")

    def __init__(self, var: Var, comp: int, node):
        self.var = var
        self.comp = comp
        self.node = node

    @property
    def ctype(self):
        return self.var.ctype.base

    def load(self, mask):
        return Value(self.var.ctype.base, self.var.value.data[self.comp])

    def store(self, val, mask) -> None:
        if mask is False:
            return
        data = list(self.var.value.data)
        data[self.comp] = val.data if mask is None else select(mask, val.data, data[self.comp])
        self.var.value = Value(self.var.ctype, tuple(data))


class MemLV:
    """An element of an array in memory."""
    __slots__ = ("mem", "buffer", "offset", "view", "node")

    def __init__(self, mem, buffer, offset, view, node):
        self.mem = mem
        self.buffer = buffer
        self.offset = offset
        self.view = view
        self.node = node

    @property
    def ctype(self):
        return self.view

    def load(self, mask):
        return self.mem.load(self.buffer, self.offset, self.view, mask, self.node)

    def store(self, val, mask) -> None:
        if mask is False:
            return
        self.mem.store(self.buffer, self.offset, self.view, val, mask, self.node)


def _component(field: str, t: VecType, node) -> int:
    i = COMPONENTS.find(field) if t.n <= 4 else WIDE_FIELDS.get(t.name, {}).get(field, -1)
    if i < 0 or i >= t.n:
        raise UnsupportedConstruct(f"member '.{field}' of {t} at {where(node)}")
    return i


class _Evaluators(dict):
    """Expressions.ev_<NodeClass> by node class, each looked up once (then one dict lookup per node); a
    class without one maps to `_unsupported`, which says so at the node."""

    def __missing__(self, node_class):
        fn = self[node_class] = getattr(Expressions, "ev_" + node_class.__name__, _unsupported)
        return fn


def _unsupported(self, node, mask):
    raise UnsupportedConstruct(f"{type(node).__name__} expression at {where(node)}")


class Expressions:
    def ev(self, node, mask):
        return EVALUATORS[node.__class__](self, node, mask)

    def lv(self, node, mask):
        if isinstance(node, c_ast.ID):
            var = self.lookup(node.name)
            if var is None or var.ctype == "array":
                raise UnsupportedConstruct(f"assignment to '{node.name}' at {where(node)}")
            if var.ctype == "shared":
                return MemLV(self.mem, var.value.buffer, var.value.offset, var.value.view, node)
            return VarLV(var, node)
        if isinstance(node, c_ast.ArrayRef):
            r = self.array_ref(node, mask)
            if isinstance(r, PtrValue):
                raise UnsupportedConstruct(f"assignment to an array at {where(node)}")
            return r
        if isinstance(node, c_ast.StructRef):
            if node.type != ".":
                raise UnsupportedConstruct(f"'->' at {where(node)}")
            field = node.field.name
            if isinstance(node.name, c_ast.ID):
                var = self.lookup(node.name.name)
                if var is None:
                    raise UnsupportedConstruct(f"assignment to '{node.name.name}.{field}' at {where(node)}")
                if not isinstance(var.ctype, VecType):
                    raise UnsupportedConstruct(f"member access on non-vector '{var.name}' at {where(node)}")
                return CompLV(var, _component(field, var.ctype, node), node)
            inner = self.lv(node.name, mask)
            if isinstance(inner, MemLV) and isinstance(inner.view, VecType):
                c = _component(field, inner.view, node)
                return MemLV(self.mem, inner.buffer, inner.offset + c, inner.view.base, node)
            raise UnsupportedConstruct(f"member assignment at {where(node)}")
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            p = self.ev(node.expr, mask)
            if not isinstance(p, PtrValue):
                raise UnsupportedConstruct(f"'*' of a non-pointer at {where(node)}")
            return MemLV(self.mem, p.buffer, p.offset, p.view, node)
        raise UnsupportedConstruct(f"assignment to {type(node).__name__} at {where(node)}")

    # ---------------------------------------------------------------- leaves
    def ev_Constant(self, node, mask):
        v = self._constants.get(id(node))
        if v is None:
            v = self._constants[id(node)] = parse_constant(node)
        return v

    def ev_ID(self, node, mask):
        name = node.name
        for scope in reversed(self.frames[-1].scopes):     # self.lookup, inlined: the most frequent node
            var = scope.get(name)
            if var is not None:
                break
        else:
            var = self.file_scope.get(name)
        if var is not None:
            if var.ctype.__class__ is str and var.ctype == "shared":
                p = var.value
                return self.mem.load(p.buffer, p.offset, p.view, mask, node)
            if var.value is None:
                raise UndefinedBehaviorError(f"use of uninitialised pointer '{node.name}' at {where(node)}")
            return var.value
        if node.name == "warpSize":
            return Value(INT, np.int32(32))
        if node.name in BUILTIN_VECTORS:
            return Value(UINT3, tuple(self.builtin(node.name, c) for c in range(3)))
        if node.name in BOOL_LITERALS:
            return Value(BOOL, np.bool_(BOOL_LITERALS[node.name]))
        raise UnsupportedConstruct(f"identifier '{node.name}' (not a local, parameter or CUDA builtin) "
                                   f"at {where(node)}")

    def builtin(self, name: str, c: int):
        b = self.batch
        if name == "threadIdx":
            return b.tid[c]
        if name == "blockIdx":
            return b.bid[c]
        if name == "blockDim":
            return np.uint32(self.geom.block[c])
        return np.uint32(self.geom.grid[c])

    def ev_StructRef(self, node, mask):
        if node.type != ".":
            raise UnsupportedConstruct(f"'->' at {where(node)}")
        field = node.field.name
        if isinstance(node.name, c_ast.ID) and node.name.name in BUILTIN_VECTORS \
                and self.lookup(node.name.name) is None:
            return Value(UINT, self.builtin(node.name.name, _component(field, UINT3, node)))
        base = self.ev(node.name, mask)
        if not isinstance(base, Value) or not isinstance(base.ctype, VecType):
            raise UnsupportedConstruct(f"member '.{field}' of a non-vector at {where(node)}")
        c = _component(field, base.ctype, node)
        return Value(base.ctype.base, base.data[c])

    def ev_ArrayRef(self, node, mask):
        r = self.array_ref(node, mask)
        return r if isinstance(r, PtrValue) else self.mem.load(r.buffer, r.offset, r.view, mask, node)

    def array_ref(self, node, mask):
        name = node.name
        name_class = name.__class__
        if name_class is c_ast.ArrayRef:      # a row of a multi-dimensional array: ev_ArrayRef, inlined
            base = self.array_ref(name, mask)
            if base.__class__ is not PtrValue:
                base = self.mem.load(base.buffer, base.offset, base.view, mask, name)
        elif name_class is c_ast.ID:
            base = self.ev_ID(name, mask)
        else:
            base = EVALUATORS[name_class](self, name, mask)
        if base.__class__ is not PtrValue:
            raise UnsupportedConstruct(f"subscript of a non-array at {where(node)}")
        subscript = node.subscript
        idx = EVALUATORS[subscript.__class__](self, subscript, mask)
        ctype = idx.ctype if idx.__class__ is Value else None
        if ctype.__class__ is not CType or ctype.is_float:
            raise UnsupportedConstruct(f"non-integer array subscript at {where(node)}")
        data = idx.data
        dims = base.dims
        if dims and mask is not False and isinstance(data, np.integer) and \
                (data.dtype.kind == "i" or data.itemsize < 8):
            i = int(data)     # the value the int64 cast gives, kept exact: the dimension check bounds it
        else:
            i = cast_data(data, INT64)
        view = base.view
        k = view.n if view.__class__ is VecType else 1
        if dims:
            self._check_dim(base, i, mask, node)
            if len(dims) > 1:
                off = base.offset + i * (math.prod(dims[1:]) * k)
                return PtrValue(base.buffer, off, view, dims[1:])
            return MemLV(self.mem, base.buffer, base.offset + i * k if k > 1 else base.offset + i, view, node)
        return MemLV(self.mem, base.buffer, base.offset + i * k if k > 1 else base.offset + i, view, node)

    def _check_dim(self, base: PtrValue, i, mask, node) -> None:
        d0 = base.dims[0]
        if mask is False:
            return
        if isinstance(i, np.ndarray):
            if i.size and i.min() >= 0 and i.max() < d0:
                return      # every lane in range, the inactive ones too: no need to find the active ones
            bad = (i < 0) | (i >= d0)
            if mask is not None:
                bad &= mask
            if not np.count_nonzero(bad):
                return
            lane = int(np.argmax(bad))
            val = int(i[lane])
        else:
            if 0 <= i < d0:
                return
            lane = 0 if mask is None else int(np.argmax(mask))
            val = int(i)
        buf = base.buffer
        full = buf.dims or (d0,)
        dim = len(full) - len(base.dims)
        shape = "".join(f"[{d}]" for d in full)
        raise OutOfBoundsError(
            f"kernel '{self.kernel_name}': out-of-bounds index {val} in dimension {dim} of {buf.label} "
            f"declared {buf.name}{shape} (valid 0..{d0 - 1}) by {self.batch.describe_lane(lane)} "
            f"at {where(node)}")

    # ---------------------------------------------------------------- operators
    def ev_UnaryOp(self, node, mask):
        op = node.op
        if op in ("++", "--", "p++", "p--"):
            lv = self.lv(node.expr, mask)
            cur = lv.load(mask)
            one = Value(INT, np.int32(1))
            new = self.add_sub("+" if "+" in op else "-", cur, one, mask, node)
            if not isinstance(new, PtrValue):
                new = convert(new, lv.ctype, node)
            lv.store(new, mask)
            return new if op[0] != "p" else cur
        if op == "&":
            e = node.expr
            if isinstance(e, c_ast.ArrayRef):
                r = self.array_ref(e, mask)
                return PtrValue(r.buffer, r.offset, r.view, None)
            if isinstance(e, c_ast.UnaryOp) and e.op == "*":
                return self.ev(e.expr, mask)
            if isinstance(e, c_ast.ID):
                var = self.lookup(e.name)
                if var is not None and var.ctype == "shared":
                    return var.value
            v = self.ev(e, mask) if isinstance(e, c_ast.ID) else None
            if isinstance(v, PtrValue) and v.dims:
                return PtrValue(v.buffer, v.offset, v.view, None)
            raise UnsupportedConstruct(f"address of a variable (&) at {where(node)}")
        if op == "*":
            return self.lv(node, mask).load(mask)
        if op == "sizeof":
            return Value(ULONG, np.uint64(self.sizeof(node.expr)))
        v = self.ev(node.expr, mask)
        if isinstance(v, PtrValue):
            raise UnsupportedConstruct(f"operator '{op}' on a pointer at {where(node)}")
        return unary(op, v, node)

    def sizeof(self, e) -> int:
        if isinstance(e, c_ast.Typename):
            t = e.type
            if isinstance(t, c_ast.PtrDecl):
                return 8
            if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
                ct = type_from_names(t.type.names, e)
                if ct is None:
                    raise UnsupportedConstruct(f"sizeof(void) at {where(e)}")
                return ct.size
        if isinstance(e, c_ast.ID):
            var = self.lookup(e.name)
            if var is not None:
                if var.ctype == "array":
                    p = var.value
                    return int(np.prod(p.dims)) * p.view.size
                if isinstance(var.ctype, PtrType):
                    return 8
                return var.ctype.size
        raise UnsupportedConstruct(f"sizeof of this expression at {where(e)}")

    def add_sub(self, op, a, b, mask, node):
        """`a + b` / `a - b` including pointer arithmetic."""
        if isinstance(a, PtrValue) or isinstance(b, PtrValue):
            if isinstance(a, PtrValue) and isinstance(b, PtrValue):
                if op == "-" and a.buffer is b.buffer:
                    return Value(LONG, cast_data((a.offset - b.offset) // width(a.view), np.dtype(np.int64)))
                raise UnsupportedConstruct(f"pointer {op} pointer at {where(node)}")
            if isinstance(b, PtrValue):
                if op == "-":
                    raise UnsupportedConstruct(f"integer - pointer at {where(node)}")
                a, b = b, a
            if not isinstance(b.ctype, CType) or b.ctype.is_float:
                raise UnsupportedConstruct(f"pointer arithmetic with a non-integer at {where(node)}")
            i = cast_data(b.data, np.dtype(np.int64)) * width(a.view)
            return PtrValue(a.buffer, a.offset + i if op == "+" else a.offset - i, a.view, None)
        return arith(op, a, b, mask, node)

    def ev_BinaryOp(self, node, mask):
        op = node.op
        if op in ("&&", "||"):
            a = self.ev(node.left, mask)
            ta = self._truth(a, node)
            rest = m_and(mask, ta) if op == "&&" else m_andnot(mask, ta)
            if not isinstance(ta, np.ndarray):
                if (op == "&&") != bool(ta):
                    return Value(BOOL, np.bool_(ta))
                return Value(BOOL, self._truth(self.ev(node.right, mask), node))
            if not m_any(rest):
                return Value(BOOL, ta)
            tb = self._truth(self.ev(node.right, rest), node)
            return Value(BOOL, (ta & tb) if op == "&&" else (ta | tb))
        left, right = node.left, node.right
        a = EVALUATORS[left.__class__](self, left, mask)
        b = EVALUATORS[right.__class__](self, right, mask)
        if a.__class__ is Value and b.__class__ is Value:   # add_sub's and the pointer test's common case
            return arith(op, a, b, mask, node)
        if op in ("+", "-"):
            return self.add_sub(op, a, b, mask, node)
        if isinstance(a, PtrValue) or isinstance(b, PtrValue):
            return compare_pointers(op, a, b, node)
        return arith(op, a, b, mask, node)

    def _truth(self, v, node):
        if isinstance(v, PtrValue):   # `if (bias)`, `!bias`: not null
            return np.logical_not(np.logical_and(v.buffer.null, np.equal(v.offset, 0)))
        if not isinstance(v, Value) or not isinstance(v.ctype, CType):
            raise UnsupportedConstruct(f"truth value of a pointer or vector at {where(node)}")
        return truth(v.data)

    def ev_TernaryOp(self, node, mask):
        c = self._truth(self.ev(node.cond, mask), node)
        if not isinstance(c, np.ndarray):
            return self.ev(node.iftrue if c else node.iffalse, mask)
        a = self.ev(node.iftrue, m_and(mask, c))
        b = self.ev(node.iffalse, m_andnot(mask, c))
        if isinstance(a, PtrValue) or isinstance(b, PtrValue):
            if isinstance(a, PtrValue) and isinstance(b, PtrValue) and a.buffer is b.buffer:
                return PtrValue(a.buffer, select(c, a.offset, b.offset), a.view, None)
            raise UnsupportedConstruct(f"'?:' choosing between different arrays at {where(node)}")
        if isinstance(a.ctype, CType) and isinstance(b.ctype, CType):
            t = common_type(a.ctype, b.ctype) if a.ctype is not b.ctype else a.ctype
            a, b = convert(a, t, node), convert(b, t, node)
        elif a.ctype is not b.ctype:
            raise UnsupportedConstruct(f"'?:' on {a.ctype} and {b.ctype} at {where(node)}")
        return select_value(c, a, b)

    def ev_Cast(self, node, mask):
        v = self.ev(node.expr, mask)
        t = node.to_type.type
        if isinstance(t, c_ast.PtrDecl):
            inner = t.type
            if not (isinstance(inner, c_ast.TypeDecl) and isinstance(inner.type, c_ast.IdentifierType)):
                raise UnsupportedConstruct(f"cast to this pointer type at {where(node)}")
            view = type_from_names(inner.type.names, node)
            if not isinstance(v, PtrValue):
                raise UnsupportedConstruct(f"cast of a non-pointer to a pointer at {where(node)}")
            if view is None:
                raise UnsupportedConstruct(f"cast to void * at {where(node)}")
            base = view.base if isinstance(view, VecType) else view
            if base.dtype != v.buffer.scalar.dtype:
                raise UnsupportedConstruct(f"cast of a {v.buffer.scalar} array to {view} * (reinterpreting "
                                           f"bits) at {where(node)}")
            return PtrValue(v.buffer, v.offset, view, None)
        if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
            target = type_from_names(t.type.names, node)
            if target is None:
                return Value(INT, np.int32(0))         # (void) expr
            if isinstance(v, PtrValue):
                if isinstance(target, CType) and target.kind == "u" and target.size == 8:
                    # (size_t)p, for alignment tests: every buffer starts at address 0, which is aligned
                    # as cudaMalloc's are (256 bytes).
                    return Value(target, cast_data(v.offset * v.buffer.scalar.size, target.dtype))
                raise UnsupportedConstruct(f"cast of a pointer to {target} at {where(node)}")
            return convert(v, target, node)
        raise UnsupportedConstruct(f"cast at {where(node)}")

    def ev_Assignment(self, node, mask):
        lv = self.lv(node.lvalue, mask)
        rhs = self.ev(node.rvalue, mask)
        if node.op != "=":
            op = node.op[:-1]
            cur = lv.load(mask)
            rhs = self.add_sub(op, cur, rhs, mask, node) if op in "+-" else \
                arith(op, cur, rhs, mask, node) if isinstance(cur, Value) else None
            if rhs is None:
                raise UnsupportedConstruct(f"'{node.op}' on a pointer at {where(node)}")
        target = lv.ctype
        if isinstance(target, PtrType):
            if not isinstance(rhs, PtrValue):
                raise UnsupportedConstruct(f"assignment of a non-pointer to a pointer at {where(node)}")
        elif isinstance(rhs, PtrValue):
            raise UnsupportedConstruct(f"assignment of a pointer to {target} at {where(node)}")
        else:
            rhs = convert(rhs, target, node)
        lv.store(rhs, mask)
        return rhs

    def ev_ExprList(self, node, mask):
        v = None
        for e in node.exprs:
            v = self.ev(e, mask)
        return v

    def ev_FuncCall(self, node, mask):
        return self.call(node, mask)


EVALUATORS = _Evaluators()


def compare_pointers(op: str, a, b, node) -> Value:
    """`p == q`, `p != q` (and `<`... within one array), `p != 0` / `p == nullptr` (lowered to 0): the
    arguments are distinct arrays (their binding refuses overlaps), and a pointer is null only where it is
    a null argument (Buffer.null) at offset 0."""
    if op not in ("==", "!=", "<", ">", "<=", ">="):
        raise UnsupportedConstruct(f"operator '{op}' on pointers at {where(node)}")
    if isinstance(a, PtrValue) and isinstance(b, PtrValue):
        if a.buffer is b.buffer:
            return arith(op, Value(LONG, a.offset), Value(LONG, b.offset), None, node)
        if op in ("==", "!="):
            return Value(BOOL, np.bool_(op == "!="))
        raise UnsupportedConstruct(f"operator '{op}' on pointers into different arrays at {where(node)}")
    pointer, other = (a, node.right) if isinstance(a, PtrValue) else (b, node.left)
    if op not in ("==", "!=") or not _null_constant(other):
        raise UnsupportedConstruct(f"operator '{op}' on a pointer and an integer at {where(node)}")
    null = np.logical_and(pointer.buffer.null, np.equal(pointer.offset, 0))
    return Value(BOOL, null if op == "==" else np.logical_not(null))


def _null_constant(node) -> bool:
    """`0`, `0L`, `(void *) 0`, `(float *) 0`: a null pointer constant."""
    while isinstance(node, c_ast.Cast):
        node = node.expr
    return isinstance(node, c_ast.Constant) and node.type in ("int", "long", "unsigned int", "long int") and \
        node.value.rstrip("uUlL") in ("0", "0x0")
