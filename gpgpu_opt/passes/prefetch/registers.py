"""The paper's prefetch (§3.7, Fig. 8): the next step's global loads go to registers before this step's
computation, and are stored to the tiles at the top of the next step.

    float A_next[16];                          // the first step's loads, before the loop
    if (cond(k0 = S)) { A_next[..] = load(S); }
    for (k0 ...) {
        tile[..] = A_next[..];                 // this step's data, loaded one step ago
        __syncthreads();
        const int k0_next = k0 + STEP;
        if (k0_next < E) { A_next[..] = load(k0_next); }   // in flight while this step computes
        compute;
        __syncthreads();
    }

A load is issued exactly when the naive loop issues it: the step's loads run under the loop's condition
for that step (none past the last step, none before a loop of no steps), under their own `if` and
predicate. The registers are what it costs: the paper skips it when they serve thread merging's reuse.
"""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.passes.prefetch.staged_loop import Copy, StagedLoop, copy_statement, element_type
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_expr, text

#: Registers a thread needs besides its outputs and the prefetched words (addresses, counters).
OVERHEAD_REGISTERS = 16


def register_words(staged: StagedLoop) -> int:
    return sum((c.counter.trips if c.counter else 1) * (2 if element_type(staged.tiles[c.tile]) == "double" else 1)
               for c in staged.copies)


def check_registers(kernel: Kernel, staged: StagedLoop, ctx: PassContext) -> str:
    """The paper's rule: registers that thread merging uses for reuse are not given to prefetching. With M
    outputs per thread (M > 1) the thread needs about M + prefetched words + overhead registers, which must
    fit the share of the register file one block's threads have."""
    words = register_words(staged)
    launch = kernel.launch
    threads = launch.threads if launch else ctx.facts.naive_block[0] * ctx.facts.naive_block[1]
    outputs = launch.outputs_per_block[0] * launch.outputs_per_block[1] // threads if launch else 1
    target = ctx.options.target
    budget = min(target.max_registers_per_thread, target.registers_per_sm // threads)
    need = outputs + words + OVERHEAD_REGISTERS
    if outputs > 1 and need > budget:
        raise Unsupported(f"thread merging keeps {outputs} outputs per thread in registers; {words} prefetch "
                          f"registers would make about {need}, more than the {budget} a thread of a "
                          f"{threads}-thread block has on {target.name} (paper §3.7: the registers go to reuse)")
    return f"{words} registers per thread hold the next step's loads (about {need} of the {budget} a thread has)"


def apply_registers(kernel: Kernel, staged: StagedLoop, taken: set[str]) -> list[str]:
    """Rewrite the loop; returns the register arrays' names."""
    from gpgpu_opt.ast_util import fresh_name

    loop, var = staged.loop, staged.var
    decls, first, stores, nexts, refs = [], [], [], [], []
    for c in staged.copies:
        name = fresh_name(f"{c.array}_next", taken)
        ref, dims = _register(c, name)
        refs.append((c, ref))
        decls.append(_decl(f"{element_type(staged.tiles[c.tile])} {name}{dims};"))
    next_name = fresh_name(f"{var}_next", taken)
    # the first step's positions keep their names (in a block of their own); the next step's get new ones
    first, first_map = staged.at_step(copy.deepcopy(staged.start), {p.name: p.name for p in staged.positions})
    nexts, next_map = staged.at_step(c_ast.ID(next_name),
                                     {p.name: fresh_name(f"{p.name}_next", taken) for p in staged.positions})
    for c, ref in refs:
        load = c_ast.Assignment("=", copy.deepcopy(ref), c.value)
        first += copy_statement(c, load, first_map)
        nexts += copy_statement(c, load, next_map)
        stores += copy_statement(c, c_ast.Assignment("=", copy.deepcopy(c.target), copy.deepcopy(ref)), {})
    listed = ", ".join(d.name for d in decls)
    before = [Comment(f"prefetch: the first step's loads go to registers ({listed}); each step stores them to "
                      f"its tiles and loads the next step's while it computes")] + decls + \
        staged.guarded(staged.start, first)
    step = _decl(f"const int {next_name} = {var} + {staged.step};")
    items = loop.stmt.block_items
    barrier = next(i for i, s in enumerate(items) if _is_barrier(s))
    loop.stmt.block_items = staged.positions + staged.notes + stores + [
        items[barrier], Comment("prefetch: the next step's loads, in flight during this step's computation"),
        step, c_ast.If(staged.cond_at(c_ast.ID(next_name)), c_ast.Compound(nexts), None)] + items[barrier + 1:]
    at = staged.parent.block_items.index(loop)
    staged.parent.block_items[at:at] = before
    return [d.name for d in decls]


def _register(c: Copy, name: str) -> tuple[c_ast.Node, str]:
    """The register (array element) holding the copy's value, and the dimensions to declare."""
    if c.counter is None:
        return c_ast.ID(name), ""
    k = c.counter
    index = k.var if k.start == 0 else f"({k.var} - {k.start})"
    if k.step != 1:
        index = f"{index} / {k.step}"
    return parse_expr(f"{name}[{index}]"), f"[{k.trips}]"


def _decl(source: str) -> c_ast.Node:
    from gpgpu_opt.rewriting.cbuild import parse_statements
    return parse_statements(source)[0]


def _is_barrier(n) -> bool:
    from gpgpu_opt.passes.prefetch.staged_loop import is_barrier
    return is_barrier(n)


__all__ = ["apply_registers", "check_registers", "register_words", "text"]
