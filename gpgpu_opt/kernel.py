"""The kernel model: a `__global__` function as pycparser c_ast plus what the passes need to know."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from pycparser import c_ast

from gpgpu_opt.ast_util import constant_value
from gpgpu_opt.dim3 import Dim3


@dataclass(frozen=True)
class Param:
    name: str
    base_type: str          # 'float', 'int', 'unsigned int', 'float2', ...
    is_pointer: bool
    is_const: bool          # a pointer to const data (or a const scalar)
    is_restrict: bool
    #: A pointer to volatile data (`volatile float *a`): each access happens as written (never widened,
    #: merged, staged, prefetched or reordered).
    is_volatile: bool = False
    #: An array of arrays (`double c[][Y][X]`, `float a[N][M]`): the dimensions below the first, in
    #: elements ((Y, X), (M,)); `c[z][y][x]` is element (z * Y + y) * X + x.
    inner_dims: tuple[int, ...] = ()
    #: A pointer to pointers (`float **a`), or arrays whose inner dimensions are not constants.
    indirect: bool = False


def _param_from_decl(decl: c_ast.Decl) -> Param:
    t = decl.type
    is_pointer = False
    restrict = False
    inner: list[int] = []
    indirect = False
    while isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)):
        if is_pointer:
            dim = constant_value(t.dim) if isinstance(t, c_ast.ArrayDecl) and t.dim is not None else None
            indirect = indirect or dim is None or dim <= 0
            inner.append(dim or 0)
        is_pointer = True
        if isinstance(t, c_ast.PtrDecl) and "restrict" in (t.quals or []):
            restrict = True
        t = t.type
    quals = list(getattr(t, "quals", []) or []) + list(decl.quals or [])
    base = " ".join(t.type.names) if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType) \
        else "struct"
    return Param(decl.name, base, is_pointer, "const" in quals, restrict, is_pointer and "volatile" in quals,
                 () if indirect else tuple(inner), indirect)


@dataclass(frozen=True)
class TemplateInstance:
    """One instantiation of a template kernel (`k<float, 256>`): the kernel is named `identifier` (a C name
    for its launch helpers and notes) and written back as the explicit specialization `template_name<args>`."""
    template_name: str
    args: tuple[str, ...]
    identifier: str
    #: The user wrote this specialization (`template <> ... k<float, 256>(...) {...}`): it is edited where it
    #: is, not added after the primary template.
    written: bool = field(default=False, compare=False)

    @property
    def spelled(self) -> str:
        return f"{self.template_name}<{', '.join(self.args)}>"


@dataclass
class Kernel:
    name: str
    funcdef: c_ast.FuncDef
    source_span: tuple[int, int]        # where the naive kernel is in its file's text (source_file)
    source_line: int
    launch_bounds: list[str] = field(default_factory=list)
    #: Which block shape and grid the kernel expects, as C expressions of the naive launch's
    #: global thread space `global_x`, `global_y` (None: unchanged from the naive launch).
    launch: "LaunchConfig | None" = None
    #: The original compiler's shorthand names (`idx`, gValue constants) the front end defined for it:
    #: its text as written is not CUDA then.
    shorthand: list[str] = field(default_factory=list)
    #: Headers the kernel's code needs (`cuda_pipeline.h` for cp.async), included by the output file.
    includes: list[str] = field(default_factory=list)
    #: The user file the kernel is written in (source_span is in its text); '': the program's main file.
    source_file: str = ""
    #: The instantiation this kernel is, for a template kernel (None: an ordinary kernel).
    instance: TemplateInstance | None = None
    #: The file-scope `__constant__`/`__device__` variables it uses, itself or through its helpers, by
    #: name (frontend.file_scope.FileVariable).
    file_variables: dict = field(default_factory=dict)
    #: The certain layouts (frontend.struct_layouts.StructLayout) of the structs its pointer parameters point to,
    #: by type name: their fields are analysed as strided accesses.
    struct_layouts: dict = field(default_factory=dict)
    #: The fields of the structs of pointers its parameters pass by value (`ParticlesSoA s`), by type name
    #: (frontend.struct_layouts.Member): read as `s.x[i]`, flat arrays to the passes (rewriting/member_arrays.py).
    struct_members: dict = field(default_factory=dict)
    #: The naive threads from which this (optimized) kernel gains: launches with fewer run the naive kernel,
    #: kept beside it (launch_dispatch.py). None: every launch runs it.
    size_dispatch: int | None = None
    #: The relative tolerance the compile's check compares this (optimized) kernel within, where its
    #: arithmetic is coarser than the naive kernel's (TF32 products); None: the check's default.
    tolerance: float | None = None
    #: It takes a faster path where its arrays are aligned, as a run-time test says (16-byte copies): compile's
    #: check runs it also at sizes where that path runs.
    aligned_path: bool = False

    @classmethod
    def from_funcdef(cls, func: c_ast.FuncDef, definition, launch_bounds, shorthand=(), source_file: str = "",
                     instance: TemplateInstance | None = None) -> "Kernel":
        return cls(func.decl.name, func, (definition.start, definition.end), definition.line, list(launch_bounds),
                   shorthand=list(shorthand), source_file=source_file, instance=instance)

    @property
    def params(self) -> list[Param]:
        args = self.funcdef.decl.type.args
        return [_param_from_decl(p) for p in (args.params if args else []) if isinstance(p, c_ast.Decl)]

    @property
    def arrays(self) -> list[Param]:
        return [p for p in self.params if p.is_pointer]

    @property
    def scalars(self) -> list[Param]:
        return [p for p in self.params if not p.is_pointer]

    @property
    def body(self) -> c_ast.Compound:
        return self.funcdef.body

    def printed_launch_bounds(self) -> list[str]:
        """The `__launch_bounds__` arguments to print: the user's hold for the user's launch only, so a
        kernel with a new launch states its own, if any."""
        if self.launch is None:
            return list(self.launch_bounds)
        if not self.launch.bounded:
            return []
        return [str(self.launch.threads)] + ([str(self.launch.blocks_per_sm)] if self.launch.blocks_per_sm else [])

    def with_launch_bounds(self, printed: str) -> str:
        bounds = self.printed_launch_bounds()
        if not bounds:
            return printed
        return printed.replace("__global__ ", f"__global__ __launch_bounds__({', '.join(bounds)}) ", 1)

    def copy(self, **changes) -> "Kernel":
        return replace(self, funcdef=copy.deepcopy(self.funcdef), **changes)


@dataclass(frozen=True)
class LaunchConfig:
    """Block shape and grid of a rewritten kernel, derived from the naive global thread space. Blocks and
    counts are Dim3 (a pair given here means z = 1)."""
    block: Dim3
    #: How many naive threads (outputs) one block covers in x and y (z: the naive launch's z, kept).
    outputs_per_block: Dim3
    #: A 1-D grid over a fixed number of blocks (reductions) instead of covering the thread space.
    fixed_grid: Dim3 | None = None
    #: Print `__launch_bounds__(threads per block)`: a kernel that needs many registers per thread tells
    #: ptxas the block size, so that it may use them.
    bounded: bool = False
    #: With `bounded`: the blocks per SM the plan counted on, printed as the bounds' minimum so that ptxas
    #: keeps the registers per thread within that occupancy.
    blocks_per_sm: int = 0
    #: A grid-stride kernel: the covering grid, capped at this many blocks in x (one wave of the GPU).
    max_blocks_x: int | None = None
    #: Marching z (passes/merge/z_march): blocks of one z, each thread this many consecutive z of the naive
    #: launch, so the grid's z is the naive launch's z threads over it (else the naive grid's z is kept).
    z_steps: int | None = None
    #: A z loop split over the grid's z (passes/merge/z_march: a column march): this many blocks in z,
    #: whatever the naive launch's z, each taking its share of the loop's trips.
    z_blocks: int | None = None
    #: Dynamic shared memory per block (`<<<grid, block, bytes>>>`), which the launch helpers ask for
    #: (`cudaFuncSetAttribute` where it is over the default 48 KB).
    dynamic_shared_bytes: int = 0

    def __post_init__(self):
        object.__setattr__(self, "block", Dim3.of(self.block))
        object.__setattr__(self, "outputs_per_block", Dim3.of(self.outputs_per_block))
        if self.fixed_grid is not None:
            object.__setattr__(self, "fixed_grid", Dim3.of(self.fixed_grid))

    def grid_z(self, naive_grid_z: int, naive_block_z: int) -> int:
        """The grid's z for a naive launch's grid and block z (what the launch helper computes)."""
        if self.z_blocks is not None:
            return self.z_blocks
        if self.z_steps is None:
            return naive_grid_z
        return -(-naive_grid_z * naive_block_z // self.z_steps)

    @property
    def threads(self) -> int:
        return self.block.count

    def grid_expressions(self) -> tuple[str, str]:
        if self.fixed_grid:
            return str(self.fixed_grid[0]), str(self.fixed_grid[1])
        tx, ty = self.outputs_per_block.xy
        gx = f"(global_x + {tx - 1}) / {tx}" if tx > 1 else "global_x"
        if self.max_blocks_x:
            gx = f"min({gx}, {self.max_blocks_x}u)"
        return gx, f"(global_y + {ty - 1}) / {ty}" if ty > 1 else "global_y"

    def grid(self, global_space: tuple[int, int]) -> tuple[int, int]:
        """The grid for a naive global thread space (what grid_expressions computes)."""
        if self.fixed_grid:
            return self.fixed_grid.xy
        gx, gy = (-(-g // t) for g, t in zip(global_space, self.outputs_per_block.xy))
        return (min(gx, self.max_blocks_x) if self.max_blocks_x else gx), gy
