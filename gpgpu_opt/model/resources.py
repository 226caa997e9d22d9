"""What ptxas gives a kernel (registers per thread, static shared memory, spills), or an estimate from the
AST where nvcc is not installed."""
from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.accesses import element_bytes
from gpgpu_opt.ast_util import walk
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.nvcc import resource_usage
from gpgpu_opt.targets import Target

#: Registers a thread needs besides its local arrays (addresses, loop counters, ids): the estimate's base.
BASE_REGISTERS = 24


@dataclass(frozen=True)
class Resources:
    registers: int                 # per thread
    shared_bytes: int              # static, per block
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    source: str = "ptxas"          # 'ptxas' or 'estimate'

    def as_dict(self) -> dict:
        return {"registers": self.registers, "shared_bytes": self.shared_bytes,
                "spill_store_bytes": self.spill_store_bytes, "spill_load_bytes": self.spill_load_bytes,
                "source": self.source}


def resources(source_text: str, target: Target, kernel_name: str | None = None,
              include_dirs: list[str] | None = None) -> Resources | None:
    """ptxas's resource usage for `kernel_name` (the first kernel of the source when None), from
    `nvcc -arch=... -cubin --resource-usage`. None when nvcc is missing or the source does not compile."""
    usage = resource_usage(source_text, target, include_dirs)
    if not usage:
        return None
    entry = usage.get(kernel_name) if kernel_name else next(iter(usage.values()))
    if entry is None:
        return None
    return Resources(entry["registers"], entry["shared_bytes"], entry["spill_store_bytes"],
                     entry["spill_load_bytes"])


def estimate_resources(kernel: Kernel) -> Resources:
    """Without ptxas: a base register count plus one register per word of every local array and scalar
    float, and the bytes of the `__shared__` arrays."""
    registers, shared = BASE_REGISTERS, 0
    for node in walk(kernel.body):
        if not isinstance(node, c_ast.Decl) or node.name is None:
            continue
        words, element = _words(node.type)
        if "__shared__" in (node.storage or []):
            shared += words * element
        elif words > 1:
            registers += words * max(1, element // 4)
    return Resources(min(registers, 255), shared, source="estimate")


def _words(t) -> tuple[int, int]:
    """(elements, bytes per element) of a declared type; elements 1 for a scalar."""
    count = 1
    while isinstance(t, c_ast.ArrayDecl):
        dim = t.dim
        count *= int(dim.value.rstrip("uUlL"), 0) if isinstance(dim, c_ast.Constant) else 1
        t = t.type
    if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType):
        return count, element_bytes(" ".join(t.type.names))
    return count, 0
