"""Statement execution in SIMT lockstep: every statement runs for a mask of active lanes and returns
the lanes that continue after it. `break`/`continue`/`return` remove lanes from the flow; loops run
until no lane is active; a kernel `return` marks lanes exited."""
from __future__ import annotations

import numpy as np
from pycparser import c_ast

from gpgpu_opt.emulator import ptx
from gpgpu_opt.emulator.builtins import Builtins
from gpgpu_opt.emulator.errors import EmulationError, UndefinedBehaviorError, UnsupportedConstruct, where
from gpgpu_opt.emulator.expressions import EVALUATORS, Expressions, PtrType, Var
from gpgpu_opt.emulator.masks import m_and, m_andnot, m_bits, m_norm, m_or
from gpgpu_opt.emulator.memory import Buffer, PtrValue, width
from gpgpu_opt.emulator.values import (CType, Value, VecType, arith, cast_data, convert, select_value,
                                       type_from_names, zero_value)


#: A loop still running after this many iterations is reported instead of hanging the emulator.
MAX_LOOP_ITERATIONS = 1 << 24


class LoopCtx:
    __slots__ = ("brk", "cont", "is_switch")

    def __init__(self, is_switch=False):
        self.brk = False
        self.cont = False
        self.is_switch = is_switch


class Frame:
    __slots__ = ("name", "scopes", "rtype", "retval", "loops", "is_kernel")

    def __init__(self, name, bindings, rtype, is_kernel=False):
        self.name = name
        self.scopes = [bindings]
        self.rtype = rtype
        self.retval = zero_value(rtype) if rtype is not None else None
        self.loops: list[LoopCtx] = []
        self.is_kernel = is_kernel


class _Executors(dict):
    """Interpreter.exec_<NodeClass> by node class, each looked up once; any other node is an expression
    statement (exec_expression, which refuses what is not one)."""

    def __missing__(self, node_class):
        fn = self[node_class] = getattr(Interpreter, "exec_" + node_class.__name__, Interpreter.exec_expression)
        return fn


class Interpreter(Expressions, Builtins):

    def __init__(self, funcdef: c_ast.FuncDef, device_functions, geom, mem, stats, params: dict[str, Var]):
        self.funcdef = funcdef
        self.kernel_name = funcdef.decl.name
        self.device_functions = device_functions or {}
        self.geom = geom
        self.mem = mem
        self.stats = stats
        self.params = params
        self._constants = {}
        self._decl_types: dict[int, tuple] = {}
        self._block_declares: dict[int, tuple] = {}
        self._plain_decls: dict[int, tuple] = {}
        self.frames: list[Frame] = []
        self.batch = None
        self.shared: dict[int, Buffer] = {}
        #: File-scope `__constant__`/`__device__` variables, seen where no local or parameter hides them.
        self.file_scope: dict[str, Var] = {}
        #: The launch's dynamic shared memory: the size of an `extern __shared__` array.
        self.dynamic_shared_bytes = 0

    def run_batch(self, batch) -> None:
        self.batch = batch
        self.mem.batch = batch
        self.shared = {}
        self.frames = [Frame(self.kernel_name, dict(self.params), None, is_kernel=True)]
        self.exec(self.funcdef.body, None)
        self.frames = []

    # ---------------------------------------------------------------- scopes
    def lookup(self, name: str):
        for scope in reversed(self.frames[-1].scopes):
            var = scope.get(name)
            if var is not None:
                return var
        return self.file_scope.get(name)

    def push_frame(self, name, bindings, rtype) -> None:
        self.frames.append(Frame(name, bindings, rtype))

    def decl_type(self, t, node):
        """The scalar/vector type of a TypeDecl (None for void), decoded once per node (the entry keeps
        the node alive, so its id is not reused)."""
        known = self._decl_types.get(id(t))
        if known is not None:
            return known[1]
        if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
            ctype = type_from_names(t.type.names, node)
            self._decl_types[id(t)] = (t, ctype)
            return ctype
        raise UnsupportedConstruct(f"declaration of this type ({type(getattr(t, 'type', t)).__name__}) "
                                   f"at {where(node)}")

    def bind_param(self, p: c_ast.Decl, v, node) -> Var:
        t = p.type
        if isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)):
            view = self.decl_type(t.type, p)
            if not isinstance(v, PtrValue):
                raise UnsupportedConstruct(f"non-pointer argument for pointer parameter '{p.name}' at {where(node)}")
            return Var(p.name, PtrType(view), self._repoint(v, view, node))
        ctype = self.decl_type(t, p)
        if isinstance(v, PtrValue):
            raise UnsupportedConstruct(f"pointer argument for parameter '{p.name}' at {where(node)}")
        return Var(p.name, ctype, convert(v, ctype, node))

    def _repoint(self, v: PtrValue, view, node) -> PtrValue:
        base = view.base if isinstance(view, VecType) else view
        if view is None or base.dtype != v.buffer.scalar.dtype:
            raise UnsupportedConstruct(f"{v.view} pointer used as {view} * at {where(node)}")
        return PtrValue(v.buffer, v.offset, view, None)

    # ---------------------------------------------------------------- statements
    def exec(self, node, mask):
        return EXECUTORS[node.__class__](self, node, mask)

    def exec_expression(self, node, mask):
        if not isinstance(node, (c_ast.Assignment, c_ast.FuncCall, c_ast.UnaryOp, c_ast.BinaryOp, c_ast.ExprList,
                                 c_ast.TernaryOp, c_ast.Cast, c_ast.ID, c_ast.Constant, c_ast.ArrayRef,
                                 c_ast.StructRef)):
            raise UnsupportedConstruct(f"{type(node).__name__} statement at {where(node)}")
        self.ev(node, mask)
        return mask

    def exec_Compound(self, node, mask):
        if mask is False:
            return False
        items = node.block_items or ()
        if not self._declares(node, items):     # no binding to hold: the enclosing scope serves
            for item in items:
                mask = EXECUTORS[item.__class__](self, item, mask)
                if mask is False:
                    break
            return mask
        scopes = self.frames[-1].scopes
        scopes.append({})
        try:
            for item in items:
                mask = EXECUTORS[item.__class__](self, item, mask)
                if mask is False:
                    break
        finally:
            scopes.pop()
        return mask

    def _declares(self, node, items) -> bool:
        """Whether a block declares a name itself (only its own Decl/DeclList items bind in its scope)."""
        known = self._block_declares.get(id(node))
        if known is None:
            known = self._block_declares[id(node)] = \
                (node, any(isinstance(i, (c_ast.Decl, c_ast.DeclList)) for i in items))
        return known[1]

    def exec_EmptyStatement(self, node, mask):
        return mask

    def exec_Pragma(self, node, mask):
        return mask

    def exec_Comment(self, node, mask):     # gpgpu_opt.cuda_nodes.Comment: a `//` line inserted by a pass
        return mask

    def exec_Verbatim(self, node, mask):
        raise UnsupportedConstruct(f"a statement kept as written ('{node.text[:40]}') at {where(node)}")

    def exec_InlineAsm(self, node, mask):
        """Inline PTX through the model of its instruction (emulator/ptx.py): the operands' values, outputs
        first (a `+` output's value read before), grouped as the template groups them; the outputs stored for
        the executing lanes."""
        if mask is False:
            return mask
        try:
            opcode, groups = ptx.parse_template(node.template)
        except ptx.PtxError as err:
            raise UnsupportedConstruct(f"{err} at {where(node)}") from None
        outputs = [(o, self.lv(o.expr, mask)) for o in node.outputs]
        values = [lv.load(mask).data if o.constraint.startswith("+") else None for o, lv in outputs]
        values += [self._asm_input(o, mask) for o in node.inputs]
        if any(values[i] is None for group in groups[1:] for i in group) or \
                any(i >= len(values) for group in groups for i in group):
            raise UnsupportedConstruct(f"an operand of '{opcode}' that is not given or is write-only at {where(node)}")
        n = self.batch.N
        try:
            results = ptx.run(opcode, [[values[i] for i in group] for group in groups[1:]], len(groups[0]),
                              self.batch.lane_in_warp, m_bits(mask, n))
        except ptx.PtxError as err:
            raise UndefinedBehaviorError(f"kernel '{self.kernel_name}': {err} at {where(node)}") from None
        for i, data in zip(groups[0], results):
            if i >= len(outputs):
                raise UnsupportedConstruct(f"'{opcode}' writes operand %{i}, an input, at {where(node)}")
            lv = outputs[i][1]
            lv.store(Value(lv.ctype, cast_data(data, lv.ctype.dtype)), mask)
        return mask

    def _asm_input(self, operand, mask):
        """An input operand's value as its constraint reads it: "f" a float, "d" a double, "r" 32 bits."""
        v = self.ev(operand.expr, mask)
        kind = operand.constraint.lstrip("=+&")
        wanted = {"f": ("f", 4), "d": ("f", 8), "r": ("iu", 4), "l": ("iu", 8), "h": ("iu", 2)}.get(kind)
        ctype = v.ctype
        if wanted is None or isinstance(ctype, VecType) or isinstance(ctype, PtrType) \
                or ctype.kind not in wanted[0] or ctype.size != wanted[1]:
            raise UnsupportedConstruct(f"asm operand \"{operand.constraint}\" of type {ctype} at {where(operand)}")
        return v.data

    def exec_If(self, node, mask):
        c = self._truth(self.ev(node.cond, mask), node)
        if not isinstance(c, np.ndarray):
            if c:
                return self.exec(node.iftrue, mask)
            return self.exec(node.iffalse, mask) if node.iffalse is not None else mask
        mt = m_norm(m_and(mask, c))
        mf = m_norm(m_andnot(mask, c))
        ot = self.exec(node.iftrue, mt) if mt is not False else False
        if node.iffalse is not None and mf is not False:
            mf = self.exec(node.iffalse, mf)
        return m_norm(m_or(ot, mf))

    def _loop(self, node, mask, cond, body, nxt, cond_first=True):
        frame = self.frames[-1]
        ctx = LoopCtx()
        frame.loops.append(ctx)
        done = False
        active = mask
        check = cond_first
        iterations = 0
        try:
            while True:
                iterations += 1
                if iterations > MAX_LOOP_ITERATIONS:
                    raise EmulationError(f"kernel '{self.kernel_name}': loop at {where(node)} still running after "
                                         f"{MAX_LOOP_ITERATIONS} iterations (an infinite loop?)")
                if check and cond is not None:
                    c = self._truth(self.ev(cond, active), node)
                    done = m_or(done, m_andnot(active, c))
                    active = m_norm(m_and(active, c))
                    if active is False:
                        break
                check = True
                out = self.exec(body, active)
                active = m_norm(m_or(out, ctx.cont))
                ctx.cont = False
                if ctx.brk is not False:
                    done = m_or(done, ctx.brk)
                    ctx.brk = False
                if active is False:
                    break
                if nxt is not None:
                    self.ev(nxt, active)
        finally:
            frame.loops.pop()
        return m_norm(done)

    def exec_For(self, node, mask):
        scopes = self.frames[-1].scopes
        scopes.append({})
        try:
            if node.init is not None:
                self.exec(node.init, mask)
            return self._loop(node, mask, node.cond, node.stmt, node.next)
        finally:
            scopes.pop()

    def exec_While(self, node, mask):
        return self._loop(node, mask, node.cond, node.stmt, None)

    def exec_DoWhile(self, node, mask):
        return self._loop(node, mask, node.cond, node.stmt, None, cond_first=False)

    def exec_Break(self, node, mask):
        loops = self.frames[-1].loops
        if not loops:
            raise UnsupportedConstruct(f"'break' outside a loop or switch at {where(node)}")
        loops[-1].brk = m_or(loops[-1].brk, mask)
        return False

    def exec_Continue(self, node, mask):
        loop = next((c for c in reversed(self.frames[-1].loops) if not c.is_switch), None)
        if loop is None:
            raise UnsupportedConstruct(f"'continue' outside a loop at {where(node)}")
        loop.cont = m_or(loop.cont, mask)
        return False

    def exec_Return(self, node, mask):
        frame = self.frames[-1]
        if mask is False:
            return False
        if frame.is_kernel:
            if node.expr is not None:
                self.ev(node.expr, mask)
            self.batch.exited |= m_bits(mask, self.batch.N)
            return False
        if node.expr is not None and frame.rtype is not None:
            v = self.ev(node.expr, mask)
            if isinstance(v, PtrValue):
                raise UnsupportedConstruct(f"returning a pointer at {where(node)}")
            v = convert(v, frame.rtype, node)
            frame.retval = v if mask is None else select_value(mask, v, frame.retval)
        return False

    def exec_Switch(self, node, mask):
        v = self.ev(node.cond, mask)
        if not isinstance(v, Value) or not isinstance(v.ctype, CType) or v.ctype.is_float:
            raise UnsupportedConstruct(f"switch on a non-integer at {where(node)}")
        items = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
        items = items or []
        matches = {}
        any_match = False
        for item in items:
            if isinstance(item, c_ast.Case):
                m = self._truth(arith("==", v, self.ev(item.expr, None), mask, item), item)
                matches[id(item)] = m
                any_match = any_match | m
        frame = self.frames[-1]
        ctx = LoopCtx(is_switch=True)
        frame.loops.append(ctx)
        frame.scopes.append({})
        running = False
        try:
            for item in items:
                if isinstance(item, c_ast.Case):
                    running = m_norm(m_or(running, m_and(mask, matches[id(item)])))
                elif isinstance(item, c_ast.Default):
                    running = m_norm(m_or(running, m_andnot(mask, any_match)))
                else:
                    raise UnsupportedConstruct(f"statement before the first case label at {where(item)}")
                for s in item.stmts or ():
                    if running is False:
                        break
                    running = self.exec(s, running)
        finally:
            frame.loops.pop()
            frame.scopes.pop()
        return m_norm(m_or(running, ctx.brk))

    def exec_Label(self, node, mask):
        raise UnsupportedConstruct(f"label '{node.name}' (goto) at {where(node)}")

    def exec_Goto(self, node, mask):
        raise UnsupportedConstruct(f"goto at {where(node)}")

    def exec_Typedef(self, node, mask):
        raise UnsupportedConstruct(f"local typedef at {where(node)}")

    def exec_DeclList(self, node, mask):
        for d in node.decls:
            self.exec_Decl(d, mask)
        return mask

    # ---------------------------------------------------------------- declarations
    def exec_Decl(self, d: c_ast.Decl, mask):
        plain = self._plain_decls.get(id(d))
        if plain is None:
            plain = self._plain_decls[id(d)] = (d, self._plain_scalar_type(d))
        ctype = plain[1]
        if ctype is not None:       # the common case, decoded once: `int i = e;`
            init = d.init
            v = EVALUATORS[init.__class__](self, init, mask)
            if isinstance(v, PtrValue):
                raise UnsupportedConstruct(f"scalar '{d.name}' initialised with a pointer at {where(d)}")
            self.frames[-1].scopes[-1][d.name] = Var(d.name, ctype, convert(v, ctype, d))
            return mask
        return self._exec_any_decl(d, mask)

    def _plain_scalar_type(self, d: c_ast.Decl):
        """The type of a local scalar declared with a plain initialiser (`int i = e;`), else None."""
        t = d.type
        if d.storage or not isinstance(t, c_ast.TypeDecl) or not isinstance(t.type, c_ast.IdentifierType) \
                or d.init is None or isinstance(d.init, c_ast.InitList):
            return None
        return self.decl_type(t, d)

    def _exec_any_decl(self, d: c_ast.Decl, mask):
        storage = d.storage or []
        if any(s not in ("__shared__",) for s in storage) and sorted(storage) != ["__shared__", "extern"]:
            raise UnsupportedConstruct(f"'{' '.join(storage)}' declaration of '{d.name}' at {where(d)}")
        t = d.type
        scope = self.frames[-1].scopes[-1]
        if isinstance(t, c_ast.FuncDecl):
            raise UnsupportedConstruct(f"local function declaration '{d.name}' at {where(d)}")
        if "__shared__" in storage:
            if not isinstance(t, c_ast.ArrayDecl):
                scope[d.name] = self._shared_scalar(d)
                return mask
            scope[d.name] = Var(d.name, "array", self._array(d, shared=True))
            return mask
        if isinstance(t, c_ast.ArrayDecl):
            scope[d.name] = Var(d.name, "array", self._array(d, shared=False))
            return mask
        if isinstance(t, c_ast.PtrDecl):
            if not isinstance(t.type, c_ast.TypeDecl):
                raise UnsupportedConstruct(f"pointer to pointer '{d.name}' at {where(d)}")
            view = self.decl_type(t.type, d)
            value = None
            if d.init is not None:
                v = self.ev(d.init, mask)
                if not isinstance(v, PtrValue):
                    raise UnsupportedConstruct(f"pointer '{d.name}' initialised with a non-pointer at {where(d)}")
                value = self._repoint(v, view, d)
            scope[d.name] = Var(d.name, PtrType(view), value)
            return mask
        ctype = self.decl_type(t, d)
        if ctype is None:
            raise UnsupportedConstruct(f"void variable '{d.name}' at {where(d)}")
        if d.init is None:
            value = zero_value(ctype)
        elif isinstance(d.init, c_ast.InitList):
            exprs = d.init.exprs
            if isinstance(ctype, VecType):
                comps = [convert(self.ev(e, mask), ctype.base, d).data for e in exprs]
                comps += [ctype.base.dtype.type(0)] * (ctype.n - len(comps))
                value = Value(ctype, tuple(comps))
            elif len(exprs) == 1:
                value = convert(self.ev(exprs[0], mask), ctype, d)
            else:
                raise UnsupportedConstruct(f"initialiser list for scalar '{d.name}' at {where(d)}")
        else:
            v = self.ev(d.init, mask)
            if isinstance(v, PtrValue):
                raise UnsupportedConstruct(f"scalar '{d.name}' initialised with a pointer at {where(d)}")
            value = convert(v, ctype, d)
        scope[d.name] = Var(d.name, ctype, value)
        return mask

    def _const_int(self, e, d) -> int:
        v = self.ev(e, None)
        if not isinstance(v, Value) or isinstance(v.data, np.ndarray) or not isinstance(v.ctype, CType) \
                or v.ctype.is_float:
            raise UnsupportedConstruct(f"array size of '{d.name}' is not an integer constant at {where(d)}")
        return int(v.data)

    def _array(self, d: c_ast.Decl, shared: bool, t=None) -> PtrValue:
        if shared and id(d) in self.shared:
            buf = self.shared[id(d)]
            return PtrValue(buf, np.int64(0), buf.view, buf.dims)
        dims = []
        t = t or d.type
        while isinstance(t, c_ast.ArrayDecl):
            dims.append(None if t.dim is None else self._const_int(t.dim, d))
            t = t.type
        if not isinstance(t, c_ast.TypeDecl):
            raise UnsupportedConstruct(f"array of pointers '{d.name}' at {where(d)}")
        view = self.decl_type(t, d)
        flat_init = _flatten_init(d.init) if d.init is not None else None
        if dims[0] is None and shared and "extern" in (d.storage or []) and len(dims) == 1:
            if not isinstance(view, CType) or self.dynamic_shared_bytes < view.size:
                raise UnsupportedConstruct(f"extern __shared__ array '{d.name}' of {view} with "
                                           f"{self.dynamic_shared_bytes} bytes of dynamic shared memory at {where(d)}")
            dims[0] = self.dynamic_shared_bytes // view.size
        if dims[0] is None:
            if flat_init is None or len(dims) > 1:
                raise UnsupportedConstruct(f"array '{d.name}' without a size (extern __shared__?) at {where(d)}")
            dims[0] = len(flat_init) // width(view) if isinstance(view, VecType) else len(flat_init)
        if any(x is None or x <= 0 for x in dims):
            raise UnsupportedConstruct(f"array '{d.name}' with a non-positive size at {where(d)}")
        scalar = view.base if isinstance(view, VecType) else view
        words = int(np.prod(dims)) * width(view)
        unit = max(1, 16 // scalar.size)
        stride = (words + unit - 1) // unit * unit
        b = self.batch
        copies = b.nblocks if shared else b.N
        fill = np.nan if scalar.is_float else 0
        data = np.full(copies * stride, fill, scalar.dtype)
        buf = Buffer(d.name, "shared" if shared else "local", data, scalar, words, tuple(dims), view)
        buf.stride = stride
        buf.lane_base = (b.slot if shared else b.lane) * stride
        if shared:
            if d.init is not None:
                raise UnsupportedConstruct(f"__shared__ array '{d.name}' with an initialiser at {where(d)}")
            if self.mem.check_races:
                buf.race = self.mem.tracker(buf, copies * stride, track_reads=True)
            self.shared[id(d)] = buf
        elif flat_init is not None:
            if len(flat_init) > words:
                raise UnsupportedConstruct(f"too many initialisers for '{d.name}' at {where(d)}")
            data.reshape(copies, stride)[:, :] = 0
            for j, e in enumerate(flat_init):
                v = convert(self.ev(e, None), scalar, e)
                data.reshape(copies, stride)[:, j] = v.data
        return PtrValue(buf, np.int64(0), view, tuple(dims))

    def _shared_scalar(self, d: c_ast.Decl) -> Var:
        """`__shared__ float s;`: a one-element shared array that the name reads and writes."""
        if d.init is not None:
            raise UnsupportedConstruct(f"__shared__ variable '{d.name}' with an initialiser at {where(d)}")
        p = self._array(d, shared=True, t=c_ast.ArrayDecl(d.type, c_ast.Constant("int", "1"), []))
        return Var(d.name, "shared", PtrValue(p.buffer, p.offset, p.view, None))


EXECUTORS = _Executors()


def _flatten_init(init) -> list:
    if not isinstance(init, c_ast.InitList):
        raise UnsupportedConstruct(f"array initialiser at {where(init)}")
    out = []
    for e in init.exprs:
        if isinstance(e, c_ast.InitList):
            out.extend(_flatten_init(e))
        else:
            out.append(e)
    return out
