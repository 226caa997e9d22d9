"""Double buffering with cp.async (targets with asynchronous copies, sm_80 and later): each tile gets a
second stage, and the next step's copies go straight from global to shared memory while this step
computes, with one barrier per step.

    __shared__ float tile[2][..];
    if (cond(k0 = S)) { copies of step S into stage 0 }
    __pipeline_commit();
    for (int k0 = S, stage = 0; k0 < E; k0 += STEP, stage ^= 1) {
        __pipeline_wait_prior(0);              // this step's copies have landed (in this thread)
        __syncthreads();                       // ... in every thread; and no thread still reads stage ^ 1
        const int k0_next = k0 + STEP;
        if (k0_next < E) { copies of step k0_next into stage ^ 1 }
        __pipeline_commit();
        compute on tile[stage];
    }

The barrier at the top of a step orders both hazards: the copies into `stage ^ 1` are issued after every
thread finished the previous step, which read that stage. A predicated-off element is zero-filled (a copy
of 0 bytes reads nothing), so no access is made that the naive kernel would not make.
"""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.ast_util import fresh_name, transform
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.prefetch.staged_loop import StagedLoop, copy_statement, element_type, is_barrier
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_expr, parse_statements

HEADER = "cuda_pipeline.h"
#: Element types cp.async copies whole (4, 8 or 16 bytes).
_COPYABLE = {"float", "int", "unsigned int", "double"}


def tile_bytes(staged: StagedLoop) -> int:
    total = 0
    for decl in staged.tiles.values():
        words, t = 1, decl.type
        while isinstance(t, c_ast.ArrayDecl):
            words *= int(t.dim.value)
            t = t.type
        total += words * (8 if element_type(decl) == "double" else 4)
    return total


def check_stages(kernel: Kernel, staged: StagedLoop, ctx: PassContext) -> str:
    for c in staged.copies:
        elem = element_type(staged.tiles[c.tile])
        param = next(p for p in kernel.arrays if p.name == c.array)
        if elem not in _COPYABLE or param.base_type != elem:
            raise Unsupported(f"{c.array} ({param.base_type}) is staged in a {elem} tile: cp.async copies "
                              "elements unchanged")
    if not isinstance(staged.loop.init, c_ast.DeclList):
        raise Unsupported(f"'{staged.var}' is not declared by the loop, which must also count the stages")
    if any(not isinstance(t.dim, c_ast.Constant) for d in staged.tiles.values()
           for t in _dims(d.type)):
        raise Unsupported("a staged tile's size is not a constant")
    target, launch = ctx.options.target, kernel.launch
    need = 2 * tile_bytes(staged)
    blocks = launch.blocks_per_sm if launch and launch.blocks_per_sm else 1
    if need > target.shared_per_block or blocks * need > target.shared_per_sm:
        raise Unsupported(f"two stages of the tiles take {need} bytes of shared memory per block; "
                          f"{blocks} block(s) per SM would need more than {target.name} has")
    return (f"two stages of the tiles, {need} bytes of shared memory per block "
            f"({blocks} block(s) per SM fit the {target.shared_per_sm // 1024} KB of an SM)")


def _dims(t):
    while isinstance(t, c_ast.ArrayDecl):
        yield t
        t = t.type


def apply_stages(kernel: Kernel, staged: StagedLoop, taken: set[str]) -> None:
    loop, var = staged.loop, staged.var
    stage = fresh_name("stage", taken)
    next_name = fresh_name(f"{var}_next", taken)
    for decl in staged.tiles.values():
        decl.type = c_ast.ArrayDecl(decl.type, c_ast.Constant("int", "2"), [])
    in_range = fresh_name("in_range", taken)

    def copies(k_value: c_ast.Node, stage_value: str, names: dict[str, str]) -> list[c_ast.Node]:
        out, mapping = staged.at_step(k_value, names)
        for c in staged.copies:
            elem = element_type(staged.tiles[c.tile])
            target = _staged_ref(copy.deepcopy(c.target), set(staged.tiles), stage_value)
            source = c_ast.ArrayRef(c_ast.ID(c.array), copy.deepcopy(c.index))
            if c.predicate is None:
                call = f"__pipeline_memcpy_async(&__dst, &__src, sizeof({elem}));"
                decls = []
            else:
                call = (f"__pipeline_memcpy_async(&__dst, &{c.array}[{in_range} ? __index : 0], sizeof({elem}), "
                        f"{in_range} ? 0 : sizeof({elem}));")
                decls = parse_statements(f"const int {in_range} = 0;")
                decls[0].init = copy.deepcopy(c.predicate)
            stmt = parse_statements(call)[0]
            stmt = transform(stmt, lambda n: copy.deepcopy(target) if _is(n, "__dst") else
                             copy.deepcopy(source) if _is(n, "__src") else
                             copy.deepcopy(c.index) if _is(n, "__index") else None)
            out += copy_statement(c, stmt, mapping, decls)
        return out

    # the first step's positions keep their names (in a block of their own); the next step's get new ones
    first = copies(copy.deepcopy(staged.start), "0", {p.name: p.name for p in staged.positions})
    nexts = copies(c_ast.ID(next_name), f"{stage} ^ 1",
                   {p.name: fresh_name(f"{p.name}_next", taken) for p in staged.positions})
    loop.init.decls.append(parse_statements(f"int {stage} = 0;")[0])
    loop.next = c_ast.ExprList([loop.next, parse_expr(f"{stage} ^= 1")])
    compute = [_staged_ref(s, set(staged.tiles), stage) for s in staged.compute]
    loop.stmt.block_items = [
        *staged.positions,
        Comment("prefetch: this step's copies have landed; past the barrier no thread still reads the other stage"),
        *parse_statements("__pipeline_wait_prior(0);\n__syncthreads();"),
        Comment("prefetch: the next step's tiles are copied into the other stage during this step's computation"),
        *parse_statements(f"const int {next_name} = {var} + {staged.step};"),
        c_ast.If(staged.cond_at(c_ast.ID(next_name)), c_ast.Compound(nexts), None),
        *parse_statements("__pipeline_commit();"),
        *compute]
    before = [Comment(f"prefetch: two stages of {', '.join(staged.tiles)}, filled by asynchronous copies "
                      "(cp.async) one step ahead of the computation"),
              *staged.guarded(staged.start, first),
              *parse_statements("__pipeline_commit();")]
    at = staged.parent.block_items.index(loop)
    staged.parent.block_items[at:at] = before


def _is(n: c_ast.Node, name: str) -> bool:
    return isinstance(n, c_ast.ID) and n.name == name


def _staged_ref(node: c_ast.Node, tiles: set[str], stage: str) -> c_ast.Node:
    """`tile[i][j]` as `tile[stage][i][j]` for each staged tile."""
    def add_stage(n):
        if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name in tiles:
            return c_ast.ArrayRef(c_ast.ArrayRef(n.name, parse_expr(stage)), n.subscript)
        return None

    return transform(node, add_stage)


__all__ = ["HEADER", "apply_stages", "check_stages", "is_barrier", "tile_bytes"]
