"""What is known about one kernel before any pass runs: its naive launch, the sizes it is bound to, its
helpers, and what its launches prove (aliasing, alignment, the grid's rounding, the block). Built once per
kernel by `kernel_facts` from the program's host view (host_view.py: each launch question is computed
once per file), then frozen: a pass reads facts, it never changes them."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.launch import sites
from gpgpu_opt.launch.dispatch import DispatchFacts, dispatch_facts
from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.aliasing import AliasFacts, alias_facts
from gpgpu_opt.analysis.alignment import base_alignment
from gpgpu_opt.analysis.launch_blocks import proved_block
from gpgpu_opt.frontend.scanner import tokenize
from gpgpu_opt.host_expr import evaluate_int
from gpgpu_opt.launch.host_view import view_of
from gpgpu_opt.dim3 import Dim3
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.pass_api.options import CompileOptions


@dataclass(frozen=True, eq=False)
class KernelFacts:
    #: The naive launch's block shape (the kernel's meaning may depend on it).
    naive_block: Dim3
    #: Known sizes (`--bind`), read-only.
    bindings: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: The program's `__device__` helpers by name (a pass may look into the ones the kernel calls).
    device_functions: Mapping[str, c_ast.FuncDef] = field(default_factory=dict)
    #: Whether the kernel's pointer parameters may alias (None: not looked at).
    aliasing: AliasFacts | None = None
    #: The naive thread space where the program states it (`#define globalDimX 4096`), per axis, else None.
    global_space: tuple[int | None, int | None] = (None, None)
    #: Whether the program launches the kernel with `naive_block` (else it is a default the launch may
    #: narrow, so an unguarded kernel's thread space is only known to be whole blocks of some divisor).
    naive_block_known: bool = True
    #: Whether the file launches the kernel: its sites then call the new launch's helpers with whatever
    #: block they use, and no run-time contract checks that block (launch_contract.launch_assumptions).
    launched_in_file: bool = False
    #: Integer parameters n that every launch site provably covers with at least n threads in x
    #: (`(n + 255) / 256` blocks of 256): a grid-stride loop bounded by n visits only naive threads' work.
    launch_covers: frozenset[str] = frozenset()
    #: Axis -> a launch site whose grid rounds down along it (sites.truncating_grids): the naive threads
    #: may stop short of the guard there, so a new grid must not round up past them.
    grid_rounds_down: Mapping[str, str] = field(default_factory=dict)
    #: Pointer parameter -> the byte alignment every launch gives it (analysis/alignment.py).
    alignment: Mapping[str, int] = field(default_factory=dict)
    #: The block's (x, y) that every launch of the kernel in the file gives, proved (analysis/launch_blocks.py);
    #: a component None where it is not proved, and `launch_block_where` says where, or why not.
    launch_block: tuple[int | None, int | None] = (None, None)
    launch_block_where: str = "the launches of the kernel are not known"
    #: The block's z every launch of the kernel in the file gives, where known (None: not known or they
    #: disagree), and the integer parameters n every launch covers with at least n threads in z.
    launch_block_z: int | None = None
    launch_covers_z: frozenset[str] = frozenset()
    #: The launches' size where known when compiling, and whether they can choose a kernel by size at run
    #: time (DispatchFacts; None: not looked at).
    dispatch: DispatchFacts | None = None
    #: The vectors CUDA lacks that the output may define (`half8`): those whose name the program does not
    #: use for anything of its own.
    definable_vectors: frozenset[str] = frozenset(v.name for v in cuda_types.DEFINED_VECTORS)

    def __post_init__(self):
        object.__setattr__(self, "naive_block", Dim3.of(self.naive_block))

    def stated_space_tiled_by(self, covers: tuple[int, int]) -> bool:
        """Whether the program states its thread space and blocks covering `covers` naive threads tile it
        exactly (a launch of such blocks has no extra threads to stop)."""
        return all(stated is not None and stated % n == 0 for stated, n in zip(self.global_space, covers))


def kernel_facts(program, kernel: Kernel, options: CompileOptions) -> KernelFacts:
    """The facts of one kernel of `program`, each launch question answered from the program's host view."""
    found = sites.naive_block(program, kernel)
    block = options.block_override or found or fallback_block(kernel)
    launch_block, where = proved_block(program, kernel)
    return KernelFacts(
        naive_block=block, bindings=MappingProxyType(dict(options.bindings)),
        device_functions=program.device_functions,
        aliasing=alias_facts(kernel, program, options.assume_restrict), global_space=stated_space(program),
        naive_block_known=options.block_override is not None or found is not None,
        launched_in_file=sites.has_launch_site(program, kernel),
        launch_covers=sites.covered_parameters(program, kernel),
        grid_rounds_down=MappingProxyType(sites.truncating_grids(program, kernel)),
        alignment=MappingProxyType(base_alignment(kernel, program)),
        launch_block=launch_block, launch_block_where=where, launch_block_z=_launch_block_z(program, kernel),
        launch_covers_z=sites.covered_parameters(program, kernel, axis=2),
        dispatch=dispatch_facts(program, kernel, options.bindings, stated_space(program)),
        definable_vectors=definable_vectors(program))


def definable_vectors(program) -> frozenset[str]:
    """The vectors CUDA lacks whose name no file of the program spells outside its comments and strings (a
    type, a variable or a macro of the user's own named `half8` would clash with the output's definition).
    Read once per program (per kernel, it made a compile quadratic in the number of kernels)."""
    return view_of(program).once("definable vectors", lambda: _definable_vectors(program))


def _definable_vectors(program) -> frozenset[str]:
    spelled = set()
    for f in program.source_files():
        for token in tokenize(program.text_of(f.path)):
            if token.kind == "ident":
                spelled.add(token.text)
            elif token.kind == "pp":
                spelled.update(re.findall(r"[A-Za-z_]\w*", token.text))
    return frozenset(v.name for v in cuda_types.DEFINED_VECTORS if v.name not in spelled)


def _launch_block_z(program, kernel: Kernel) -> int | None:
    found = sites.naive_launch(program, kernel, {})
    return None if found is None or proved_block(program, kernel)[0][0] is None else found.block[2]


def fallback_block(kernel: Kernel) -> tuple[int, int]:
    """The block assumed where the launches do not say: 16x16 for a kernel that uses y, else 256."""
    return (16, 16) if uses_y(kernel, collect_accesses(kernel)) else (256, 1)


def stated_space(program) -> tuple[int | None, int | None]:
    """globalDimX/globalDimY where the program defines them (the original compiler's inputs): read once per
    program."""
    return view_of(program).once("stated space", lambda: _stated_space(program))


def _stated_space(program) -> tuple[int | None, int | None]:
    return tuple(evaluate_int(name, program.macros) if name in program.macros else None
                 for name in ("globalDimX", "globalDimY"))
