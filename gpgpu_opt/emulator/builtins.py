"""CUDA builtin functions (a mixin of the Interpreter): math, barriers, warp shuffles and votes,
`__ldg`, atomics, vector constructors, the asynchronous copies of <cuda_pipeline.h>; and calls of
`__device__` helpers."""
from __future__ import annotations

import functools

import numpy as np
from pycparser import c_ast

from gpgpu_opt.emulator.errors import DivergentBarrierError, UndefinedBehaviorError, UnsupportedConstruct, where
from gpgpu_opt.emulator.masks import m_and, m_bits
from gpgpu_opt.emulator.memory import PtrValue
from gpgpu_opt.emulator.threads import WARP
from gpgpu_opt.emulator.expressions import MemLV
from gpgpu_opt.emulator.values import (INT, UINT, VECTOR_TYPES, CType, Value, VecType, cast_data, cast_to,
                                       common_type, convert, promote, truth, type_from_names)
from gpgpu_opt.frontend.math_api import BY_NAME


_ATOMICS = {"atomicAdd": "add", "atomicSub": "sub", "atomicMax": "max", "atomicMin": "min", "atomicAnd": "and",
            "atomicOr": "or", "atomicXor": "xor", "atomicExch": "exch", "atomicCAS": "cas", "atomicInc": "inc",
            "atomicDec": "dec"}
_NOOPS = {"__threadfence", "__threadfence_block", "__threadfence_system"}
_PIPELINE = {"__pipeline_memcpy_async", "__pipeline_commit", "__pipeline_wait_prior"}


class Builtins:
    def call(self, node: c_ast.FuncCall, mask):
        if not isinstance(node.name, c_ast.ID):
            raise UnsupportedConstruct(f"call through a function pointer at {where(node)}")
        name = node.name.name
        args = list(node.args.exprs) if node.args else []
        if name in self.device_functions:
            return self.call_device(name, args, mask, node)
        if name == "__syncthreads":
            self.barrier(mask, node)
            return None
        if name in ("__syncthreads_count", "__syncthreads_and", "__syncthreads_or"):
            return self.barrier_reduce(name, args, mask, node)
        if name == "__syncwarp":
            member = self.ev(args[0], mask) if args else Value(UINT, np.uint32(0xFFFFFFFF))
            self.warp_sync(member, mask, node, "__syncwarp")
            self.batch.wep[m_bits(mask, self.batch.N)] += 1
            self.batch.update_epochs()
            self.mem.syncwarp_seen = True
            return None
        if name in _NOOPS:
            return None
        if name.startswith("__shfl"):
            return self.shuffle(name, args, mask, node)
        if name in ("__ballot_sync", "__all_sync", "__any_sync"):
            return self.vote(name, args, mask, node)
        if name in _ATOMICS:
            return self.atomic(name, args, mask, node)
        if name in _PIPELINE:
            return self.pipeline(name, args, mask, node)
        if name.startswith("make_") and name[5:] in VECTOR_TYPES:
            t = VECTOR_TYPES[name[5:]]
            if len(args) != t.n:
                raise UnsupportedConstruct(f"{name} with {len(args)} arguments at {where(node)}")
            vals = [convert(self._scalar_arg(a, mask, node), t.base, node) for a in args]
            return Value(t, tuple(v.data for v in vals))
        if name in BY_NAME:
            return self.library_call(name, args, mask, node)
        raise UnsupportedConstruct(f"call of '{name}' (not a CUDA builtin the emulator knows, nor a __device__ "
                                   f"function of the program) at {where(node)}")

    def _scalar_arg(self, a, mask, node) -> Value:
        v = self.ev(a, mask)
        if not isinstance(v, Value) or not isinstance(v.ctype, CType):
            raise UnsupportedConstruct(f"non-scalar argument at {where(node)}")
        return v

    # ---------------------------------------------------------------- the Math API table
    def library_call(self, name, args, mask, node):
        """A call of gpgpu_opt.frontend.math_api's table: the overload its arguments match best, arguments
        converted to its parameter types, results rounded to its return type, out-parameters stored."""
        entries = [f for f in BY_NAME[name] if len(f.params) == len(args)]
        if not entries:
            raise UnsupportedConstruct(f"{name} with {len(args)} arguments at {where(node)}")
        if entries[0].memory == "clock":
            raise UnsupportedConstruct(f"{name}() at {where(node)}: the emulator has no clock")
        if entries[0].memory == "trap":
            return self.assertion(args, mask, node)
        if entries[0].memory:
            return self.hinted_access(entries[0], args, mask, node)
        outs = set(entries[0].out_params)
        vals = {k: self._value_arg(a, mask, node) for k, a in enumerate(args) if k not in outs}
        fn = max(entries, key=lambda f: sum(f.params[k] != "T" and _param_type(f.params[k]) is v.ctype
                                            for k, v in vals.items()))
        generic = None
        if "T" in fn.params:
            generic = promote(functools.reduce(common_type, [vals[k].ctype for k, p in enumerate(fn.params)
                                                              if p == "T"]))
        data = [convert(vals[k], generic if p == "T" else _param_type(p), node).data
                for k, p in enumerate(fn.params) if k not in outs]
        with np.errstate(all="ignore"):
            result = fn.impl(*data)
        if outs:
            result, *stored = result
            for k, value in zip(sorted(outs), stored):
                t = _param_type(fn.params[k][:-1])
                self._out_lvalue(args[k], mask, node).store(Value(t, _cast(value, t)), mask)
        if fn.returns == "void":
            return None
        rtype = generic if fn.returns == "T" else _param_type(fn.returns)
        return Value(rtype, _cast(result, rtype))

    def _value_arg(self, a, mask, node) -> Value:
        v = self.ev(a, mask)
        if not isinstance(v, Value):
            raise UnsupportedConstruct(f"pointer argument at {where(node)}")
        return v

    def _out_lvalue(self, arg, mask, node):
        """Where an out-parameter's value goes: `&x` (a local too) or a pointer into memory."""
        if isinstance(arg, c_ast.UnaryOp) and arg.op == "&":
            return self.lv(arg.expr, mask)
        p = self.ev(arg, mask)
        if not isinstance(p, PtrValue):
            raise UnsupportedConstruct(f"out-parameter that is not a pointer at {where(node)}")
        return MemLV(self.mem, p.buffer, p.offset, p.view, node)

    def assertion(self, args, mask, node):
        """`assert(c)`: the kernel stops where a running thread's c is false."""
        failed = np.broadcast_to(~truth(self._value_arg(args[0], mask, node).data), (self.batch.N,)) \
            & m_bits(mask, self.batch.N)
        if failed.any():
            raise UndefinedBehaviorError(f"kernel '{self.kernel_name}': assertion failed at {where(node)} "
                                         f"({self.batch.describe_lane(int(np.argmax(failed)))})")
        return None

    def hinted_access(self, fn, args, mask, node):
        """`__ldg(p)`, `__ldcs(p)`...: a load through p; `__stcs(p, v)`...: a store of v through p."""
        p = self.ev(args[0], mask)
        if not isinstance(p, PtrValue):
            raise UnsupportedConstruct(f"{fn.name} of a non-pointer at {where(node)}")
        if fn.memory == "load":
            return self.mem.load(p.buffer, p.offset, p.view, mask, node)
        value = self.ev(args[1], mask)
        if isinstance(value, PtrValue):
            raise UnsupportedConstruct(f"{fn.name} of a pointer value at {where(node)}")
        if mask is not False:
            self.mem.store(p.buffer, p.offset, p.view, convert(value, p.view, node), mask, node)
        return None

    # ---------------------------------------------------------------- barriers
    def barrier(self, mask, node) -> None:
        b = self.batch
        if mask is False:
            return
        if mask is None and not b.exited.any():
            b.bep += 1
            b.update_epochs()
            self.stats.barriers += b.nblocks
            for buf in self.shared.values():
                if buf.race is not None:
                    buf.race.barrier()
            return
        arrived = m_bits(mask, b.N)
        alive = ~b.exited
        n_arr = b.per_block(arrived)
        n_alive = b.per_block(alive)
        bad = (n_arr > 0) & (n_arr != n_alive)
        if bad.any():
            slot = int(np.argmax(bad))
            tpb = self.geom.tpb
            sl = slice(slot * tpb, (slot + 1) * tpb)
            missing = int(np.argmax(alive[sl] & ~arrived[sl])) + slot * tpb
            first = int(np.argmax(arrived[sl])) + slot * tpb
            raise DivergentBarrierError(
                f"kernel '{self.kernel_name}': __syncthreads() at {where(node)} is reached by {int(n_arr[slot])} of "
                f"the {int(n_alive[slot])} running threads of block "
                f"{self.batch.describe_lane(first).split(' thread')[0][6:]}: e.g. "
                f"{b.describe_lane(first)} reaches it but {b.describe_lane(missing)} does not")
        reached = n_arr > 0
        b.bep += np.repeat(reached, self.geom.tpb).astype(np.int32)
        b.update_epochs()
        if reached[n_alive > 0].all():
            for buf in self.shared.values():
                if buf.race is not None:
                    buf.race.barrier()
        self.stats.barriers += int(reached.sum())

    def barrier_reduce(self, name, args, mask, node):
        pred = self._scalar_arg(args[0], mask, node)
        self.barrier(mask, node)
        b = self.batch
        bits = np.broadcast_to(pred.data != 0, (b.N,)) & m_bits(mask, b.N)
        counts = np.repeat(b.per_block(bits), self.geom.tpb)
        if name == "__syncthreads_count":
            return Value(INT, counts.astype(np.int32))
        if name == "__syncthreads_or":
            return Value(INT, (counts > 0).astype(np.int32))
        alive = np.repeat(b.per_block(m_bits(mask, b.N)), self.geom.tpb)
        return Value(INT, (counts == alive).astype(np.int32))

    # ---------------------------------------------------------------- warps
    def _warp_bits(self, lanes_bits):
        """Per lane: the bitmask (uint64) of set lanes in its warp."""
        b = self.batch
        wkey = self.geom.warp_key(b.lane)
        weights = np.left_shift(np.uint64(1), b.lane_in_warp.astype(np.uint64)).astype(np.float64)
        per = np.bincount(wkey, weights=np.where(lanes_bits, weights, 0), minlength=int(wkey.max()) + 1)
        return per.astype(np.uint64)[wkey]

    def warp_sync(self, member: Value, mask, node, what: str):
        """Check that every live lane named in the member mask executes the warp operation."""
        b = self.batch
        executing = m_bits(mask, b.N)
        member_bits = np.broadcast_to(cast_data(member.data, UINT.dtype).astype(np.uint64), (b.N,))
        exec_bits = self._warp_bits(executing)
        alive_bits = self._warp_bits(~b.exited)
        missing = member_bits & alive_bits & ~exec_bits
        bad = executing & (missing != 0)
        if bad.any():
            lane = int(np.argmax(bad))
            m = int(missing[lane])
            miss_lane = lane - int(b.lane_in_warp[lane]) + (m & -m).bit_length() - 1
            raise DivergentBarrierError(
                f"kernel '{self.kernel_name}': {what} at {where(node)} with member mask "
                f"{int(member_bits[lane]):#x}: {b.describe_lane(lane)} executes it but "
                f"{b.describe_lane(miss_lane)} (named in the mask) does not")
        return executing, member_bits

    def shuffle(self, name, args, mask, node):
        kind = name.replace("_sync", "").replace("__shfl", "")
        if kind not in ("", "_up", "_down", "_xor") or len(args) not in (3, 4):
            raise UnsupportedConstruct(f"{name} at {where(node)}")
        member = self._scalar_arg(args[0], mask, node)
        v = self._scalar_arg(args[1], mask, node)
        sel = cast_data(self._scalar_arg(args[2], mask, node).data, np.dtype(np.int64))
        w = int(self._scalar_arg(args[3], mask, node).data) if len(args) == 4 else WARP
        b = self.batch
        executing, member_bits = self.warp_sync(member, mask, node, name)
        if not isinstance(v.data, np.ndarray):
            return v
        lw = b.lane_in_warp
        group = (lw // w) * w
        if kind == "":
            src = group + sel % w
        elif kind == "_up":
            src = lw - sel
            src = np.where(src < group, lw, src)
        elif kind == "_down":
            src = lw + sel
            src = np.where(src >= group + w, lw, src)
        else:
            src = lw ^ sel
            src = np.where(src >= group + w, lw, src)
        src_lane = b.lane - lw + src
        warp_start = b.lane - lw
        block_end = (b.slot + 1) * self.geom.tpb
        ok = (src_lane >= warp_start) & (src_lane < block_end)
        src_lane = np.where(ok, src_lane, b.lane)
        bad = executing & (~ok | ~executing[src_lane] | b.exited[src_lane])
        if bad.any():
            lane = int(np.argmax(bad))
            raise UndefinedBehaviorError(
                f"kernel '{self.kernel_name}': {name} at {where(node)}: {b.describe_lane(lane)} reads lane "
                f"{int(src[lane])} of its warp, which does not exist or is not executing the shuffle")
        return Value(v.ctype, v.data[src_lane])

    def vote(self, name, args, mask, node):
        member = self._scalar_arg(args[0], mask, node)
        pred = self._scalar_arg(args[1], mask, node)
        b = self.batch
        executing, member_bits = self.warp_sync(member, mask, node, name)
        bits = self._warp_bits(executing & np.broadcast_to(pred.data != 0, (b.N,))) & member_bits
        if name == "__ballot_sync":
            return Value(UINT, bits.astype(np.uint32))
        named = self._warp_bits(executing) & member_bits
        if name == "__any_sync":
            return Value(INT, (bits != 0).astype(np.int32))
        return Value(INT, (bits == named).astype(np.int32))

    # ---------------------------------------------------------------- atomics
    def atomic(self, name, args, mask, node):
        op = _ATOMICS[name]
        p = self.ev(args[0], mask)
        if not isinstance(p, PtrValue):
            raise UnsupportedConstruct(f"{name} on a non-pointer at {where(node)}")
        if op == "cas":
            cmp = self._scalar_arg(args[1], mask, node)
            val = self._scalar_arg(args[2], mask, node)
            return self.mem.atomic(op, p.buffer, p.offset, p.view, val, mask, node, compare=cmp)
        val = self._scalar_arg(args[1], mask, node)
        return self.mem.atomic(op, p.buffer, p.offset, p.view, val, mask, node)

    # ---------------------------------------------------------------- cp.async (<cuda_pipeline.h>)
    def pipeline(self, name, args, mask, node):
        """`__pipeline_memcpy_async(dst, src, bytes[, zero_fill])` reads its source when issued and lands in
        shared memory when a `__pipeline_wait_prior(N)` covers its batch (`__pipeline_commit` closes one):
        all batches but the N latest. As a copy may land any time in between, its write is recorded for the
        race check at the issue and again at the wait."""
        state = getattr(self, "_pipeline_state", None)
        if state is None or state[0] is not self.batch:
            state = self._pipeline_state = (self.batch, [], [])
        _, pending, batches = state
        if name == "__pipeline_commit":
            batches.append(list(pending))
            pending.clear()
            return None
        if name == "__pipeline_wait_prior":
            keep = self._scalar_arg(args[0], mask, node).data
            if isinstance(keep, np.ndarray):
                raise UnsupportedConstruct(f"__pipeline_wait_prior with a per-thread count at {where(node)}")
            landing = batches[:max(len(batches) - int(keep), 0)]
            del batches[:len(landing)]
            for copies in landing:
                for dst, value, lanes, site in copies:
                    self.mem.store(dst.buffer, dst.offset, dst.view, value, lanes, site)
            return None
        if mask is False:
            return None
        if len(args) not in (3, 4):
            raise UnsupportedConstruct(f"__pipeline_memcpy_async with {len(args)} arguments at {where(node)}")
        dst, src = self.ev(args[0], mask), self.ev(args[1], mask)
        if not (isinstance(dst, PtrValue) and isinstance(src, PtrValue) and dst.buffer.space == "shared"
                and isinstance(dst.view, CType) and dst.view == src.view):
            raise UnsupportedConstruct(f"__pipeline_memcpy_async other than one element into shared memory at "
                                       f"{where(node)}")
        size = self._scalar_arg(args[2], mask, node).data
        zero_fill = self._scalar_arg(args[3], mask, node).data if len(args) == 4 else 0
        elem = dst.view.size
        # cp.async moves 4, 8 or 16 bytes: one to four 4-byte elements, one or two 8-byte, eight 2-byte ones
        if isinstance(size, np.ndarray) or int(size) not in (4, 8, 16) or int(size) % elem \
                or np.any(np.asarray(zero_fill) % elem) or np.any((zero_fill < 0) | (zero_fill > size)):
            raise UnsupportedConstruct(f"__pipeline_memcpy_async of {size} bytes, {zero_fill} zero-filled, of "
                                       f"{dst.view} elements at {where(node)}")
        count = int(size) // elem
        if count > 1:
            self._check_copy_alignment(dst, src, int(size), mask, node)
        copied_elements = np.broadcast_to((int(size) - np.asarray(zero_fill)) // elem, (self.batch.N,))
        for j in range(count):
            copied = copied_elements > j
            at_src = PtrValue(src.buffer, src.offset + j, src.view, None)
            at_dst = PtrValue(dst.buffer, dst.offset + j, dst.view, None)
            read = self.mem.load(src.buffer, at_src.offset, src.view, m_and(mask, copied), node) \
                if np.any(copied) else Value(src.view, np.zeros(self.batch.N, src.view.dtype))
            data = np.where(copied, np.broadcast_to(read.data, (self.batch.N,)), 0).astype(dst.view.dtype)
            value = Value(dst.view, data)
            self.mem.store(dst.buffer, at_dst.offset, dst.view, value, mask, node)
            pending.append((at_dst, value, mask, node))
        return None

    def _check_copy_alignment(self, dst, src, size: int, mask, node) -> None:
        """A copy of several elements moves one aligned vector: both addresses multiples of its size (every
        buffer starts at an address that is)."""
        for what, p in (("destination", dst), ("source", src)):
            misaligned = np.broadcast_to((np.asarray(p.offset) * p.view.size) % size != 0, (self.batch.N,))
            if mask is not None and mask is not False:
                misaligned = misaligned & mask
            if mask is not False and np.any(misaligned):
                lane = int(np.argmax(misaligned))
                raise UndefinedBehaviorError(
                    f"kernel '{self.kernel_name}': __pipeline_memcpy_async of {size} bytes at {where(node)}: its "
                    f"{what} is not {size}-byte aligned ({self.batch.describe_lane(lane)})")

    # ---------------------------------------------------------------- __device__ functions
    def call_device(self, name, args, mask, node):
        if any(f.name == name for f in self.frames):
            raise UnsupportedConstruct(f"recursive call of '{name}' at {where(node)}")
        fd = self.device_functions[name]
        params = fd.decl.type.args.params if fd.decl.type.args else []
        params = [p for p in params if not (isinstance(p, c_ast.Typename) and _is_void(p))]
        if len(params) != len(args):
            raise UnsupportedConstruct(f"call of '{name}' with {len(args)} arguments for {len(params)} "
                                       f"parameters at {where(node)}")
        values = [self.ev(a, mask) for a in args]
        bindings = {}
        for p, v in zip(params, values):
            bindings[p.name] = self.bind_param(p, v, node)
        ret = fd.decl.type.type
        if isinstance(ret, c_ast.PtrDecl):
            raise UnsupportedConstruct(f"__device__ function '{name}' returning a pointer at {where(fd)}")
        rtype = self.decl_type(ret, fd)
        self.push_frame(name, bindings, rtype)
        try:
            self.exec(fd.body, mask)
            frame = self.frames[-1]
        finally:
            self.frames.pop()
        return frame.retval


@functools.lru_cache(maxsize=None)
def _param_type(text: str):
    """The emulator's type of a C type spelled in the table (`unsigned int`, `__half2`)."""
    return type_from_names(text.split())


def _cast(data, t):
    """An implementation's result as values of type t (a tuple of components for a vector)."""
    if isinstance(t, VecType):
        return tuple(cast_to(np.asarray(c), t.base)[()] if np.ndim(c) == 0 else cast_to(np.asarray(c), t.base)
                     for c in data)
    out = cast_to(np.asarray(data), t)
    return out[()] if np.ndim(out) == 0 else out


def _is_void(p) -> bool:
    t = p.type
    return isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType) and t.type.names == ["void"]

