"""An integer local declared without an initializer and assigned once (`int idx; ... idx = e;`) becomes `int idx = e;`
at the assignment: the form every pass reads its index locals in.

Only where analysis.definitions proves it a single definition: the assignment is a statement in the
declaration's own block, nothing between them uses the local, nothing else assigns it or takes its
address, and no other declaration has its name. Moving the declaration down to that statement then changes
nothing the program can observe: the local had no value before it, and its scope still ends with the block.
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.analysis.accesses import is_integer_type
from gpgpu_opt.analysis.definitions import definitions, single_definition_sites
from gpgpu_opt.kernel import Kernel


def merge_single_definitions(kernel: Kernel) -> list[str]:
    """Rewrites the kernel's single definitions in place; returns the names merged."""
    single = definitions(kernel.body).single
    merged = []
    for name, (block, decl, assignment) in single_definition_sites(kernel.body).items():
        if name not in single or not is_integer_type(" ".join(getattr(decl.type.type, "names", []))):
            continue  # the analysis follows integer locals only
        items = block.block_items
        position = next(k for k, item in enumerate(items) if item is assignment)
        items[position] = c_ast.Decl(decl.name, decl.quals, decl.align, decl.storage, decl.funcspec, decl.type,
                                     assignment.rvalue, None, assignment.coord)
        block.block_items = [item for item in items if item is not decl]
        merged.append(name)
    return merged
