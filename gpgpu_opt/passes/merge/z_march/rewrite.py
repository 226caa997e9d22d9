"""The kernel rewritten to march z (z_march/__init__ says what and why)."""
from __future__ import annotations

import copy

import sympy

from pycparser import c_ast

from gpgpu_opt.analysis.symbolic import cuda_text
from gpgpu_opt.ast_util import fresh_name, ids_in, substitute, transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.passes.merge.z_march.carry import Chain
from gpgpu_opt.passes.merge.z_march.shape import Shape
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.cbuild import conj, parse_expr, parse_statements, text

#: Names of a three-read chain's registers, top first.
_THREE = ("above", "here", "below")


def march(kernel: Kernel, shape: Shape, chains: list[Chain], steps: int, block: tuple[int, int]) -> None:
    """Rewrite `kernel` in place: blocks of one z, each thread `steps` consecutive z of the naive launch."""
    taken = _taken(kernel)
    z0 = fresh_name(f"{shape.z}0", taken)
    # the guard's first z (`z > 0`): the march's first z is the later of the two
    start = fresh_name(f"{shape.z}_first", taken) if shape.first is not None else z0
    first = f"const int {z0} = blockIdx.z * {steps};" + (
        f"const int {start} = max({z0}, {shape.first});" if shape.first is not None else "")
    _march(kernel, shape, chains, taken, first, start, f"{z0} + {steps}", describe_code(chains, steps))
    kernel.launch = LaunchConfig(block=block, outputs_per_block=block, z_steps=steps)


def march_loop(kernel: Kernel, shape: Shape, chains: list[Chain], least: int, blocks: int,
               block: tuple[int, int]) -> None:
    """Rewrite `kernel` in place: its z loop split over `blocks` blocks in z, each at least `least`
    consecutive z (the last blocks may have none)."""
    taken = _taken(kernel)
    z0, chunk = fresh_name(f"{shape.z}0", taken), fresh_name(f"{shape.z}_chunk", taken)
    trips = cuda_text(sympy.expand(shape.bound_value - shape.first))
    first = (f"const int {chunk} = max({least}, ({trips} + (int)gridDim.z - 1) / (int)gridDim.z);"
             f"const int {z0} = {shape.first} + blockIdx.z * {chunk};")
    _march(kernel, shape, chains, taken, first, z0, f"{z0} + {chunk}", describe_loop_code(chains, least))
    kernel.launch = LaunchConfig(block=block, outputs_per_block=block, z_blocks=blocks)


def _taken(kernel: Kernel) -> set[str]:
    return {n.name for n in walk(kernel.funcdef) if isinstance(n, c_ast.ID)} | \
        {n.name for n in walk(kernel.funcdef) if isinstance(n, c_ast.Decl) and n.name}


def _march(kernel: Kernel, shape: Shape, chains: list[Chain], taken: set[str], first: str, start: str, end: str,
           comment: str) -> None:
    """The body: `first` (the statements that define the thread's first z, `start`), the exit of threads with
    nothing to do, the carried registers loaded at `start`, and the loop up to `end` (and the bound)."""
    names = _register_names(chains, taken)
    hoisted = [s for s in shape.inside[:-1] if s.name in shape.values and s.name not in shape.z_locals]
    looped_before = [s for s in shape.before if s.name in shape.z_locals]
    body = [copy.deepcopy(s) for s in looped_before] + [s for s in shape.inside if s not in hoisted]
    inline = {d.name: d.init for d in [*looped_before, *shape.inside[:-1]] if d.name in shape.z_locals}
    prologue = _carried_loads(chains, names, inline, shape.z, start)
    body = _with_registers(body, chains, names)
    body = _without_unused(body, {*ids_in(c_ast.Compound(prologue))})
    rotation = [parse_statements(f"{names[id(lower)]} = {names[id(upper)]};")[0]
                for chain in chains for upper, lower in reversed(list(zip(chain.groups, chain.groups[1:])))]
    bound = text(shape.bound)
    loop = parse_statements(f"for (int {shape.z} = {start}; {shape.z} < min({end}, {bound}); "
                            f"{shape.z}++) {{}}")[0]
    loop.stmt = c_ast.Compound(body + rotation)
    exit_ = c_ast.If(g.negate(conj([*shape.clauses, parse_expr(f"{start} < {bound}")])), c_ast.Return(None), None)
    kernel.body.block_items = [Comment(comment), *[s for s in shape.before if s not in looped_before],
                               *parse_statements(first), exit_, *hoisted, *prologue, loop]


def describe_code(chains: list[Chain], steps: int) -> str:
    carried = sum(len(c.groups) - 1 for c in chains)
    return (f"gpgpu-opt: each thread computes {steps} consecutive z; {carried} of its reads per z are the "
            f"previous z's, carried in registers")


def describe_loop_code(chains: list[Chain], least: int) -> str:
    carried = sum(len(c.groups) - 1 for c in chains)
    return (f"gpgpu-opt: the z loop split over the grid's z, each block at least {least} consecutive z; {carried} "
            f"of its reads per z are the previous z's, carried in registers")


def _register_names(chains: list[Chain], taken: set[str]) -> dict[int, str]:
    names = {}
    arrays = [c.array for c in chains]
    for chain in chains:
        several = arrays.count(chain.array) > 1
        base = f"{chain.array}{arrays[:chains.index(chain)].count(chain.array) + 1}" if several else chain.array
        size = len(chain.groups)
        words = _THREE if size == 3 else [f"z{size - 1 - k}" for k in range(size)]
        for group, word in zip(chain.groups, words):
            names[id(group)] = fresh_name(f"{base}_{word}", taken)
    return names


def _carried_loads(chains: list[Chain], names: dict[int, str], inline: dict[str, c_ast.Node], z: str,
                   z0: str) -> list[c_ast.Node]:
    """The carried registers, loaded as the thread's first z reads them (its z-dependent locals written out)."""
    loads = []
    for chain in chains:
        for group in chain.groups[1:]:
            read = _at(group.nodes[0], inline, z, z0)
            loads += parse_statements(f"{chain.element} {names[id(group)]} = {text(read)};")
    return loads


def _at(node: c_ast.Node, inline: dict[str, c_ast.Node], z: str, z0: str) -> c_ast.Node:
    expanded = node
    for _ in range(len(inline) + 1):     # a local defined through another: until no such local is left
        if not ids_in(expanded) & set(inline):
            break
        expanded = substitute(expanded, {k: _parenthesized(v) for k, v in inline.items()})
    return substitute(expanded, {z: c_ast.ID(z0)})


def _parenthesized(node: c_ast.Node) -> c_ast.Node:
    return parse_expr(f"({text(node)})") if isinstance(node, (c_ast.BinaryOp, c_ast.TernaryOp)) else node


def _with_registers(body: list[c_ast.Node], chains: list[Chain], names: dict[int, str]) -> list[c_ast.Node]:
    """Each read of a chain replaced by its register; the top's register loaded before its first use."""
    replace = {id(n): names[id(group)] for chain in chains for group in chain.groups for n in group.nodes}
    tops = {id(n): (chain, chain.groups[0]) for chain in chains for n in chain.groups[0].nodes}
    out = []
    loaded = set()
    for statement in body:
        for n in walk(statement):
            if id(n) in tops and id(tops[id(n)][1]) not in loaded:
                chain, top = tops[id(n)]
                loaded.add(id(top))
                out += parse_statements(f"const {chain.element} {names[id(top)]} = {text(n)};")
        out.append(transform(statement, lambda n: c_ast.ID(replace[id(n)]) if id(n) in replace else None))
    return out


def _without_unused(body: list[c_ast.Node], used_elsewhere: set[str]) -> list[c_ast.Node]:
    """Integer locals no statement reads any longer (the carried reads' clamps), dropped."""
    while True:
        used = used_elsewhere.union(*(ids_in(s.init) if isinstance(s, c_ast.Decl) and s.init is not None
                                      else ids_in(s) for s in body))
        dead = [s for s in body if isinstance(s, c_ast.Decl) and s.name not in used
                and not any(isinstance(n, (c_ast.ArrayRef, c_ast.FuncCall)) and not _is_min_max(n)
                            for n in walk(s.init))]
        if not dead:
            return body
        body = [s for s in body if s not in dead]


def _is_min_max(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and node.name.name in ("min", "max")
