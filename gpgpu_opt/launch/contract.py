"""What a rewritten kernel assumes about the naive launch, for kernels whose launch is not in the file.

The output must give the naive results for every launch under which the naive kernel is valid: the thread
space its guards state, the space globalDimX/globalDimY state, or any whole number of blocks of any shape
when it has no guard. Where the file launches the kernel, the launch sites are rewritten and divisibility
is checked at compile time. Where it does not, the launch helpers (`k_grid`, `k_block`) check at run time
what the optimized kernel was derived under, and refuse a launch it cannot serve:

- the naive block shape, when the kernel's meaning depends on it (a reduction over the block, shared
  memory, barriers, blockDim or gridDim read outside the global index `blockIdx * blockDim + threadIdx`);
- per axis with no guard bounding every access: the naive thread space must be a whole number of the
  optimized blocks' outputs (the new grid rounds up, and nothing stops its extra threads);
- per axis where globalDimX/globalDimY state the space: exactly that many threads.

`verify` and `compile`'s check evaluate the same data here in Python (`refusal`) and launch the optimized
kernel as the helper would (`helper_launch`)."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from pycparser import c_ast

from gpgpu_opt.ast_util import call_name, is_member_of, walk
from gpgpu_opt.dim3 import Dim3
from gpgpu_opt.host_expr import evaluate_int
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch.sites import has_launch_site
from gpgpu_opt.rewriting.guards import BLOCK_DEPENDENT_CALLS, normalize_early_returns
from gpgpu_opt.rewriting.kernel_info import KernelInfo
from gpgpu_opt.rewriting.cbuild import Unsupported

Shape = tuple[int, ...]

_BUILTINS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}


@dataclass(frozen=True)
class LaunchAssumptions:
    """What the optimized kernel needs of the naive launch (x, y); z is not looked at."""
    kernel: str
    #: The naive block the kernel's meaning was read with, when it depends on it (None: any block).
    block: tuple[int, int] | None
    #: Per axis, the naive thread space must be a multiple of this (1: any size).
    multiple: tuple[int, int]
    #: Per axis, the exact naive thread space the program states (None: not stated).
    extent: tuple[int | None, int | None]

    def requirements(self) -> list["Requirement"]:
        found = [Requirement("block", "xy", self.block)] if self.block is not None else []
        for axis, multiple, extent in zip("xy", self.multiple, self.extent):
            if extent is not None:
                found.append(Requirement("extent", axis, extent))
            elif multiple > 1:
                found.append(Requirement("multiple", axis, multiple))
        return found

    def refusal(self, naive_grid: Shape, naive_block: Shape) -> str | None:
        """The message the launch helper prints when it refuses this naive launch, else None."""
        grid, block = _xy(naive_grid), _xy(naive_block)
        if all(r.holds(grid, block) for r in self.requirements()):
            return None
        return refusal_message(self.kernel, grid, block, self.needs())

    def needs(self) -> str:
        """Every requirement in words (the helper's message states them all, the broken ones among them)."""
        return " and ".join(r.words for r in self.requirements())


@dataclass(frozen=True)
class Requirement:
    """One thing the helper checks: the naive `block` shape, an exact `extent` or a `multiple` of threads
    along `axis`. `condition` is its C test (over `naive_block`, `global_x`, `global_y`), `holds` its twin."""
    kind: str
    axis: str
    value: object

    @property
    def condition(self) -> str:
        if self.kind == "block":
            return f"naive_block.x == {self.value[0]} && naive_block.y == {self.value[1]}"
        if self.kind == "extent":
            return f"global_{self.axis} == {self.value}"
        return f"global_{self.axis} % {self.value} == 0"

    @property
    def words(self) -> str:
        if self.kind == "block":
            return f"naive blocks of {self.value[0]}x{self.value[1]} threads (its meaning depends on the block)"
        if self.kind == "extent":
            return f"exactly {_threads(self.value)} in {self.axis} (the space the program states)"
        return f"a multiple of {self.value} threads in {self.axis} (no guard bounds its threads in {self.axis})"

    def holds(self, grid: tuple[int, int], block: tuple[int, int]) -> bool:
        if self.kind == "block":
            return block == tuple(self.value)
        threads = grid["xy".index(self.axis)] * block["xy".index(self.axis)]
        return threads == self.value if self.kind == "extent" else threads % self.value == 0


#: The helper's refusal; `refusal` fills it in Python, the helper's fprintf with %u (same words).
REFUSAL = ("gpgpu-opt: the optimized '{kernel}' cannot serve the naive launch of grid ({gx}, {gy}) and block "
           "({bx}, {by}), {tx}x{ty} threads: it needs {needs}")


def _threads(count: int) -> str:
    return "1 thread" if count == 1 else f"{count} threads"


def refusal_message(kernel: str, grid: Shape, block: Shape, needs: str) -> str:
    return REFUSAL.format(kernel=kernel, gx=grid[0], gy=grid[1], bx=block[0], by=block[1],
                          tx=grid[0] * block[0], ty=grid[1] * block[1], needs=needs)


def helper_message(assumptions: LaunchAssumptions) -> str:
    """REFUSAL as a printf format for the helper (grid x, y, block x, y, threads x, y)."""
    return REFUSAL.format(kernel=assumptions.kernel, gx="%u", gy="%u", bx="%u", by="%u", tx="%u", ty="%u",
                          needs=assumptions.needs())


def _xy(shape: Shape) -> tuple[int, int]:
    return shape[0], shape[1] if len(shape) > 1 else 1


def launch_assumptions(program, naive: Kernel, optimized: Kernel,
                       naive_block: tuple[int, int]) -> LaunchAssumptions | None:
    """The assumptions of a rewritten kernel that the file does not launch; None when it launches it (the
    sites are rewritten and checked at compile time) or the kernel keeps the naive launch."""
    config = optimized.launch
    if config is None or has_launch_site(program, naive):
        return None
    stated = _stated_space(program)
    try:
        dependent = block_dependence(naive, program) is not None
        guarded = guarded_axes(naive, program)
    except Unsupported:  # a kernel the analyses cannot read: assume the most
        dependent, guarded = True, set()
    dependent = dependent or bool(config.fixed_grid)
    block = Dim3.of(naive_block).xy if dependent else None
    multiple = tuple(1 if axis in guarded or (block and block[dim] % config.outputs_per_block[dim] == 0)
                     else config.outputs_per_block[dim] for dim, axis in enumerate("xy"))
    extent = stated  # the passes may bound the threads by it (the stencil window does), guard or not
    return LaunchAssumptions(naive.name, block, multiple, extent)


def _stated_space(program) -> tuple[int | None, int | None]:
    return tuple(evaluate_int(name, program.macros) if name in program.macros else None
                 for name in ("globalDimX", "globalDimY"))


def _info(kernel: Kernel, program) -> KernelInfo:
    return KernelInfo(kernel, SimpleNamespace(facts=SimpleNamespace(device_functions=program.device_functions)))


def block_dependence(kernel: Kernel, program) -> str | None:
    """Why the naive kernel's results depend on its block shape (not only on the thread space), or None."""
    why = _block_constructs(kernel.body, program.device_functions, set())
    return why or _info(kernel, program).block_dependence()


def _block_constructs(body: c_ast.Node, device_functions: dict, seen: set[str]) -> str | None:
    """Shared memory, barriers, warp operations and atomics in `body`, or any use of the thread and block
    indices inside the `__device__` functions it calls (transitively)."""
    for n in walk(body):
        if isinstance(n, c_ast.Decl) and "__shared__" in (n.storage or []):
            return "it uses shared memory"
        if isinstance(n, c_ast.ID) and n.name == "warpSize":
            return "it uses warpSize"
        name = call_name(n)
        if name is None:
            continue
        if name.startswith(BLOCK_DEPENDENT_CALLS):
            return f"it calls {name}"
        if name in device_functions and name not in seen:
            seen.add(name)
            callee = device_functions[name].body
            if any(is_member_of(m, *_BUILTINS) for m in walk(callee)):
                return f"it calls {name}, which reads the thread or block index"
            why = _block_constructs(callee, device_functions, seen)
            if why:
                return why
    return None


def guarded_axes(kernel: Kernel, program) -> set[str]:
    """The axes along which a guard on the global index (`if (i < n)`, or `if (i >= n) return;` first)
    bounds every global access of the kernel. Accesses the collector does not see (dereferences, atomics)
    leave no axis guarded."""
    kernel = kernel.copy()
    normalize_early_returns(kernel.body)
    for n in walk(kernel.body):
        if isinstance(n, c_ast.UnaryOp) and n.op == "*" or (call_name(n) or "").startswith("atomic"):
            return set()
    info = _info(kernel, program)
    return {axis for axis in "xy" if info.accesses and all(info.bounded(a, axis) for a in info.accesses)}


def helper_launch(optimized: Kernel, naive_grid: Shape, naive_block: Shape) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (block, grid) the helpers return for a naive launch: the grid covers naive_grid * naive_block."""
    grid, block = _xy(naive_grid), _xy(naive_block)
    space = (grid[0] * block[0], grid[1] * block[1])
    return optimized.launch.block.xy, optimized.launch.grid(space)


__all__ = ["LaunchAssumptions", "launch_assumptions", "helper_launch", "block_dependence", "guarded_axes",
           "refusal_message", "helper_message"]
