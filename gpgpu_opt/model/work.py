"""Work per thread, counted on the kernel's AST with the loop trip counts the sizes give: FP32 and integer
instructions, global requests (with the sectors and 128-byte lines of each, from analysis/coalescing, and
how many of their sectors miss L1), shared accesses, shuffles, barriers, and how many global loads a
thread has in flight at once (its ILP: loads issued between two waits). model/copies.py says what nvcc
makes of unrolled copies (common and vector shared loads, recomputed guards, permuted indices)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import sympy
from pycparser import c_ast

from gpgpu_opt.analysis.accesses import Access, AccessCollector
from gpgpu_opt.analysis.coalescing import analyse_request, substitutions
from gpgpu_opt.analysis.loops import assigned_names, canonical_loop
from gpgpu_opt.analysis.reuse import _footprint
from gpgpu_opt.analysis.symbolic import (BDIM, BID, GDIM, TID, NotAffine, is_opaque, iterator_symbol, opaque,
                                         lambdified, to_sympy)
from gpgpu_opt.ast_util import call_args, call_name, is_call_to, walk
from gpgpu_opt.cuda_types import is_floating
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.model import copies, syntax
from gpgpu_opt.targets import Target

#: nvcc unrolls a loop it cannot unroll fully by this factor (the loads of 4 iterations then in flight).
NVCC_UNROLL = 4
#: ... and unrolls fully a loop of at most this many iterations known at compile time.
FULL_UNROLL_LIMIT = 32
#: ... and only while the unrolled body stays within this many instructions (LLVM's partial-unroll budget for
#: NVPTX: its threshold of 300 over 4): a loop over a register tile's guarded FMAs stays rolled.
UNROLL_BUDGET = 75
#: Instructions a rolled loop iteration costs besides its body (counter, compare and branch).
LOOP_OVERHEAD = 2
#: Loop iterations of the per-block footprint sample (the L1 hit estimate), in all.
_FOOTPRINT_SAMPLES = 4096
_FLOAT_CALLS = {"sqrtf", "expf", "logf", "sinf", "cosf", "fabsf", "fmaxf", "fminf", "__expf", "rsqrtf", "powf",
                "exp", "log", "sqrt", "fabs", "fmax", "fmin", "pow", "tanhf", "erff"}


@dataclass
class GlobalRequest:
    """One global access of the kernel: how often a thread executes it and what one warp request costs."""
    array: str
    mode: str                   # 'read' or 'write'
    per_thread: float           # executions per thread
    element_bytes: int
    sectors: float              # 32-byte sectors per warp request
    lines: float                # 128-byte lines per warp request (L1 wavefronts)
    l1_miss: float              # fraction of the sectors that go to L2 (loads; 1 for stores)
    extent_bytes: float | None  # bytes of the array the whole grid touches, when it can be bounded


@dataclass
class Work:
    """Per thread (a warp executes the same counts as warp instructions)."""
    fp_instructions: float = 0.0
    flops: float = 0.0
    int_instructions: float = 0.0
    other_instructions: float = 0.0     # loop overhead, branches, selects, calls
    shared_accesses: float = 0.0       # load and store instructions
    shared_wavefronts: float = 0.0     # what they cost the shared-memory pipe (bank conflicts, vectors)
    dependent_instructions: float = 0.0  # in chains that wait for each other (recomputed guards)
    shuffles: float = 0.0
    barriers: float = 0.0
    global_loads: float = 0.0
    load_waits: float = 0.0             # times a thread waits for global loads in flight
    requests: list[GlobalRequest] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    @property
    def global_instructions(self) -> float:
        return sum(r.per_thread for r in self.requests)

    @property
    def instructions(self) -> float:
        return (self.fp_instructions + self.int_instructions + self.other_instructions + self.shared_accesses
                + self.shuffles + self.barriers + self.global_instructions)

    @property
    def loads_in_flight(self) -> float:
        """Global loads a thread issues before it waits (ILP)."""
        return self.global_loads / self.load_waits if self.load_waits else 0.0

    def as_dict(self) -> dict:
        return {"fp_instructions": round(self.fp_instructions, 2), "flops": round(self.flops, 2),
                "int_instructions": round(self.int_instructions, 2),
                "other_instructions": round(self.other_instructions, 2),
                "shared_accesses": round(self.shared_accesses, 2),
                "shared_wavefronts": round(self.shared_wavefronts, 2),
                "dependent_instructions": round(self.dependent_instructions, 2), "shuffles": round(self.shuffles, 2),
                "barriers": round(self.barriers, 2), "global_loads": round(self.global_loads, 2),
                "loads_in_flight": round(self.loads_in_flight, 2),
                "requests": [{"array": r.array, "mode": r.mode, "per_thread": round(r.per_thread, 2),
                              "sectors": round(r.sectors, 2), "lines": round(r.lines, 2),
                              "l1_miss": round(r.l1_miss, 3)} for r in self.requests]}


@dataclass
class _WaitGroup:
    """The global loads of one rolled loop's iteration (or of the code outside rolled loops)."""
    body_scale: float
    unroll: int
    loads: float = 0.0


class _Counter(AccessCollector):
    def __init__(self, kernel: Kernel, subs: dict, target: Target, block: tuple[int, int]):
        super().__init__(kernel)
        self.subs = subs
        self.target, self.block = target, block
        self.unrolled: list[tuple[sympy.Symbol, int]] = []   # the unrolled loops inside the innermost rolled one
        self.shared_shapes: dict[str, tuple[list[int], int]] = {}
        self.work = Work()
        self.scale = 1.0
        self.scale_of: dict[int, float] = {}
        self.float_names = {p.name for p in kernel.params if is_floating(p.base_type)}
        self.shared_names: set[str] = set()
        self.variant: set[str] = set()
        self.groups = [_WaitGroup(1.0, 1)]
        self.pragmas = syntax.unroll_pragmas(kernel.body)

    # -- loops --------------------------------------------------------------------------------
    def visit_For(self, node: c_ast.For):
        if node.init is not None:
            self.visit(node.init)
        loop = canonical_loop(node, self.env) or canonical_loop(syntax.counter_only(node), self.env)
        trips = self._trips(node, loop)
        pragma = self.pragmas.get(id(node), 0)
        unrolled = trips is not None and (pragma == -1 or (pragma == 0 and trips <= FULL_UNROLL_LIMIT))
        trips = 1.0 if trips is None else trips
        saved_env, saved_scale = dict(self.env), self.scale
        if loop is not None:
            self.env[loop.var] = iterator_symbol(loop.var)
            self.loops.append(loop)
        else:
            self.unanalysable_loops += 1
            for name in assigned_names(node):
                self.env[name] = opaque(name)
        self.scale *= trips
        saved_unrolled = self.unrolled
        if unrolled and loop is not None:
            self.variant.discard(loop.var)    # a constant in each unrolled copy
            self.unrolled = self.unrolled + [(iterator_symbol(loop.var), int(trips))]
        if not unrolled:
            self.unrolled = []
            self.variant |= assigned_names(node)
            self.groups.append(_WaitGroup(self.scale, 1))
        before = self.work.instructions
        if node.cond is not None and not unrolled:
            self.visit(node.cond)
        self.visit(node.stmt)
        if not unrolled:
            body = (self.work.instructions - before) / self.scale
            factor = pragma if pragma > 1 else _runtime_unroll(trips, body)
            self.work.other_instructions += LOOP_OVERHEAD * self.scale / factor
            group = self.groups.pop()
            if group.loads:
                self.work.load_waits += group.body_scale / (1 if _has_barrier(node.stmt) else factor)
        self.unrolled = saved_unrolled
        if loop is not None:
            self.loops.pop()
        else:
            self.unanalysable_loops -= 1
        self.env, self.scale = saved_env, saved_scale

    def visit_While(self, node):
        self.work.assumptions.append("a while loop is counted as one iteration")
        super().visit_While(node)

    def _trips(self, node: c_ast.For, loop) -> float | None:
        """Iterations at the sizes (thread 0's, for a loop that starts at its thread id); None if unknown."""
        if loop is not None and not loop.multiplicative and loop.trip_count() is not None:
            value = loop.trip_count().subs(self.subs)
            if value.is_number:
                return max(0.0, float(value))
        simulated = syntax.simulate(node, self.env, self.subs)
        if simulated is None:
            self.work.assumptions.append(f"a loop at line {node.coord.line if node.coord else '?'} is counted "
                                         "as one iteration (its trip count is not known)")
        return simulated

    # -- declarations and statements ------------------------------------------------------------
    def visit_Decl(self, node: c_ast.Decl):
        if node.name is not None:
            base = node.type
            while isinstance(base, (c_ast.ArrayDecl, c_ast.PtrDecl)):
                base = base.type
            if isinstance(base, c_ast.TypeDecl) and isinstance(base.type, c_ast.IdentifierType) \
                    and is_floating(" ".join(base.type.names)):
                self.float_names.add(node.name)
            if "__shared__" in (node.storage or []):
                self.shared_names.add(node.name)
                self.shared_shapes[node.name] = syntax.shape(node.type)
            if node.init is not None and self._is_variant(node.init):
                self.variant.add(node.name)
        super().visit_Decl(node)
        value = self.env.get(node.name) if node.name else None
        if value is None or not is_opaque(value) or node.init is None:
            return
        if "const" in (node.quals or []):    # fixed in its scope, whatever another variable of its name does
            try:
                value = self.env[node.name] = to_sympy(node.init, self.env)
            except NotAffine:
                pass
        if is_opaque(value) and ("const" in (node.quals or []) or node.name not in self.reassigned):
            self.env[node.name] = copies.permutation_surrogate(node.init, self.env, self.loops) or value

    def visit_Assignment(self, node: c_ast.Assignment):
        if isinstance(node.lvalue, c_ast.ID) and len(self.groups) > 1:
            self.variant.add(node.lvalue.name)
        if node.op != "=":
            if self._is_float(node.lvalue):
                fused = node.op in ("+=", "-=") and _is_mul(node.rvalue) and self._is_float(node.rvalue)
                self._fp(1, 2 if fused else 1)
                if fused:
                    self.visit(node.rvalue.left)
                    self.visit(node.rvalue.right)
                    self._store(node.lvalue, node.op)
                    return
            elif self._is_variant(node):
                self.work.int_instructions += self.scale
        super().visit_Assignment(node)

    def _store(self, lvalue, op):
        if isinstance(lvalue, c_ast.ArrayRef):
            self._record(lvalue, "write")
            if op != "=":
                self._record(lvalue, "read")
            self._visit_subscripts(lvalue)

    def visit_BinaryOp(self, node: c_ast.BinaryOp):
        if node.op in ("+", "-") and self._is_float(node):
            fused = next((s for s in (node.left, node.right) if _is_mul(s) and self._is_float(s)), None)
            if fused is not None:
                self._fp(1, 2)
                other = node.right if fused is node.left else node.left
                for child in (fused.left, fused.right, other):
                    self.visit(child)
                return
        if node.op in ("+", "-", "*", "/") and self._is_float(node):
            self._fp(4 if node.op == "/" else 1, 1)
        elif self._is_variant(node):
            self.work.int_instructions += self.scale
        self.generic_visit(node)

    def visit_TernaryOp(self, node):
        self.work.other_instructions += self.scale
        self.generic_visit(node)

    def visit_If(self, node):
        """A guard costs its compares where it varies (or is recomputed in each of many unrolled copies:
        then the compares and the guarded statement wait on each other); its branches run on the share of
        the loops' iterations where it holds."""
        copied = math.prod(t for _, t in self.unrolled)
        varying = self._is_variant(node.cond) or (
            copies.recomputed(copied) and any(s in self.unrolled_symbols for s in self._symbols(node.cond)))
        compares = len(copies.clauses(node.cond)) if varying else 0
        self.work.int_instructions += compares * self.scale
        self.visit(node.cond)
        held = copies.guard_fraction(node.cond, self.env, self.subs, self.loops)
        self.guard_depth += 1
        saved = self.scale
        before = self.work.instructions
        for branch, share in ((node.iftrue, held), (node.iffalse, 1.0 - held)):
            if branch is not None and share > 0:
                self.scale = saved * share
                self.visit(branch)
        if varying and copies.recomputed(copied):
            guarded = (self.work.instructions - before) / saved    # per execution of the guard
            self.work.dependent_instructions += (compares + min(guarded, copies.PREDICATED_BODY)) * saved
        self.scale = saved
        self.guard_depth -= 1

    @property
    def unrolled_symbols(self) -> set:
        return {s for s, _ in self.unrolled}

    def _symbols(self, node) -> set:
        found = set()
        for part in copies.clauses(node):
            for side in (getattr(part, "left", None), getattr(part, "right", None)):
                try:
                    found |= to_sympy(side, self.env).free_symbols if side is not None else set()
                except NotAffine:
                    pass
        return found

    def visit_FuncCall(self, node: c_ast.FuncCall):
        name, args = call_name(node) or "", call_args(node)
        if name == "__pipeline_memcpy_async" and len(args) >= 2:
            # cp.async: a global load (of the in-range address) stored straight into shared memory
            for arg, mode in ((args[1], "read"), (args[0], "write")):
                if isinstance(arg, c_ast.UnaryOp) and arg.op == "&" and isinstance(arg.expr, c_ast.ArrayRef):
                    ref = arg.expr
                    if isinstance(ref.subscript, c_ast.TernaryOp):
                        ref = c_ast.ArrayRef(ref.name, ref.subscript.iftrue, ref.coord)
                    self._record(ref, mode)
            self.work.other_instructions += self.scale
            return
        if name == "__syncthreads":
            self.work.barriers += self.scale
        elif name.startswith("__shfl"):
            self.work.shuffles += self.scale
        else:
            self.work.other_instructions += self.scale
        self.generic_visit(node)

    # -- accesses ---------------------------------------------------------------------------------
    def _record(self, node: c_ast.ArrayRef, mode: str):
        before = len(self.accesses)
        vector = syntax.vector_view(node)
        if vector is not None:     # ((float4 *) b)[i]: one access of the vector's bytes, i in vectors
            node = c_ast.ArrayRef(vector[0], node.subscript, node.coord)
        super()._record(node, mode)
        if vector is not None and len(self.accesses) > before:
            self.accesses[-1].element_bytes = vector[1]
        if len(self.accesses) > before:
            self.scale_of[id(self.accesses[-1])] = self.scale
            if mode == "read":
                self.work.global_loads += self.scale
                self.groups[-1].loads += self.scale / self.groups[-1].body_scale
        elif _base_name(node) in self.shared_names:
            instructions, wavefronts = 1.0, 1.0
            if mode == "read":
                dims, element = self.shared_shapes.get(_base_name(node), ([], 4))
                instructions, wavefronts = copies.shared_load_cost(
                    syntax.subscripts(node), dims, element, self.env, self.subs, self.unrolled, self.block,
                    self.target.shared_banks, self.target.bank_bytes, self.target.warp_size)
            self.work.shared_accesses += instructions * self.scale
            self.work.shared_wavefronts += wavefronts * self.scale

    # -- helpers ---------------------------------------------------------------------------------
    def _fp(self, instructions: float, flops: float):
        self.work.fp_instructions += instructions * self.scale
        self.work.flops += flops * self.scale

    def _is_variant(self, node) -> bool:
        return any(isinstance(n, c_ast.ID) and n.name in self.variant for n in walk(node))

    def _is_float(self, node) -> bool:
        if isinstance(node, c_ast.Constant):
            return node.type in ("float", "double")
        if isinstance(node, c_ast.ID):
            return node.name in self.float_names
        if isinstance(node, c_ast.ArrayRef):
            return _base_name(node) in self.float_names
        if isinstance(node, c_ast.BinaryOp):
            if node.op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
                return False
            return self._is_float(node.left) or self._is_float(node.right)
        if isinstance(node, c_ast.UnaryOp):
            return self._is_float(node.expr)
        if isinstance(node, c_ast.Cast):
            return is_floating(" ".join(getattr(node.to_type.type.type, "names", [])))
        if isinstance(node, c_ast.TernaryOp):
            return self._is_float(node.iftrue) or self._is_float(node.iffalse)
        if call_name(node) is not None:
            name, args = call_name(node), call_args(node)
            return name in _FLOAT_CALLS or (name.startswith("__shfl") and len(args) > 1 and self._is_float(args[1]))
        return False


def count_work(kernel: Kernel, target: Target, block: tuple[int, int], grid: tuple[int, int],
               sizes: dict[str, int]) -> Work:
    """The work of one thread of `kernel` launched with `block` x `grid` at `sizes`."""
    bindings = {k: int(v) for k, v in sizes.items() if float(v).is_integer()}
    subs = {sympy.Symbol(k, integer=True): v for k, v in sizes.items()}
    subs.update({BDIM["x"]: block[0], BDIM["y"]: block[1], BDIM["z"]: 1, GDIM["x"]: grid[0], GDIM["y"]: grid[1],
                 GDIM["z"]: 1, TID["x"]: 0, TID["y"]: 0, TID["z"]: 0, BID["x"]: 0, BID["y"]: 0, BID["z"]: 0})
    counter = _Counter(kernel, subs, target, block)
    counter.visit(kernel.body)
    work = counter.work
    top = counter.groups[0]
    if top.loads:
        work.load_waits += 1
    lines_target = replace(target, transaction_bytes=128) if target.coalescing_rule == "sectors" else target
    for access in counter.accesses:
        per_thread = counter.scale_of[id(access)]
        coalescing = analyse_request(access, target, block, bindings)
        if coalescing is None:
            work.assumptions.append(f"{access.array}[{access.index_text}]: one sector per thread (not analysable)")
            sectors = lines = float(target.request_threads)
        else:
            sectors = coalescing.transactions_per_request
            lines = analyse_request(access, lines_target, block, bindings).transactions_per_request
        miss = _l1_miss(access, block, bindings, sectors, target) if access.mode == "read" else 1.0
        work.requests.append(GlobalRequest(access.array, access.mode, per_thread, access.element_bytes, sectors,
                                           lines, miss, _extent_bytes(access, block, grid, bindings)))
    return work


def _l1_miss(access: Access, block, bindings, sectors: float, target: Target) -> float:
    """The sectors a block fetches once over the sectors its requests ask for (the rest hit L1), over a
    sample of its loop iterations."""
    if access.evaluable_index is None or access.kind == "unresolved" or target.coalescing_rule != "sectors":
        return 1.0
    subs, _ = substitutions(access, block, bindings)
    samples = 1
    for loop in access.loops:
        trips = loop.trip_count()
        trips = trips.subs(subs) if trips is not None else None
        samples *= min(48, int(trips)) if trips is not None and trips.is_number else 48
    if samples > _FOOTPRINT_SAMPLES or samples == 0:
        return 1.0
    elements = _footprint(access, subs, block)
    unique = len({e * access.element_bytes // target.transaction_bytes for e in elements})
    warps = -(-block[0] * block[1] // target.request_threads)
    return min(1.0, unique / (samples * warps * max(sectors, 1e-9)))


def _extent_bytes(access: Access, block, grid, bindings) -> float | None:
    """Bytes between the lowest and the highest element the grid touches (corners of every variable)."""
    if access.evaluable_index is None or access.kind == "unresolved":
        return None
    subs, _ = substitutions(access, block, bindings)
    fixed = {k: v for k, v in subs.items() if k not in (BID["x"], BID["y"])}
    expr = access.evaluable_index.subs(fixed)
    ranges = {TID["x"]: (0, block[0] - 1), TID["y"]: (0, block[1] - 1), BID["x"]: (0, grid[0] - 1),
              BID["y"]: (0, grid[1] - 1)}
    for loop in access.loops:
        values = loop.value_range()
        if values is None:
            return None
        first, last = (v.subs(fixed).subs({TID["x"]: 0, TID["y"]: 0, TID["z"]: 0}) for v in values)
        if not (first.is_number and last.is_number):
            return None
        ranges[iterator_symbol(loop.var)] = (int(first), int(last))
    symbols = [s for s in ranges if s in expr.free_symbols]
    if expr.free_symbols - set(symbols) - {TID["z"], BID["z"]}:
        return None
    fn = lambdified(symbols, expr.subs({TID["z"]: 0, BID["z"]: 0}), "math")
    corners = [fn(*c) for c in itertools.product(*(ranges[s] for s in symbols))] or [float(expr)]
    return (max(corners) - min(corners) + 1) * access.element_bytes








def _runtime_unroll(trips: float, body: float) -> int:
    """The factor nvcc unrolls a rolled loop by: NVCC_UNROLL, halved until the body fits UNROLL_BUDGET."""
    factor = NVCC_UNROLL if trips >= NVCC_UNROLL else 1
    while factor > 1 and factor * body > UNROLL_BUDGET:
        factor //= 2
    return factor








def _has_barrier(node) -> bool:
    return any(is_call_to(n, "__syncthreads") for n in walk(node))


def _is_mul(node) -> bool:
    return isinstance(node, c_ast.BinaryOp) and node.op == "*"


def _base_name(node: c_ast.ArrayRef) -> str | None:
    while isinstance(node, c_ast.ArrayRef):
        node = node.name
    return node.name if isinstance(node, c_ast.ID) else None


__all__ = ["Work", "GlobalRequest", "count_work"]
