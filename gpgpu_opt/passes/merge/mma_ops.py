"""The tensor-core forms of a matrix product (mma_tile.py builds the tile): each `mma.sync` the output may use,
the operands and the sum it takes, and the block tile it is built with; and which form a product gets on a
target, at the precision asked (CompileOptions.matmul_precision, named like cuBLAS's compute types).
"""
from __future__ import annotations

from dataclasses import dataclass

from gpgpu_opt import cuda_types
from gpgpu_opt.pass_api.context import PassContext
from gpgpu_opt.rewriting.accumulation import NotAccumulation
from gpgpu_opt.rewriting.cbuild import Unsupported


@dataclass(frozen=True)
class MmaOp:
    """One way to run the product on tensor cores, and the block tile it is built with (measured on an
    H200: bench/tensor_cores.md)."""
    name: str                   # CompileOptions.matmul_precision's word, or the operands' ('f64')
    opcode: str
    element: str                # the operands' C type
    accumulator: str            # the sum's C type
    register: str               # C type of an operand register
    constraint: str             # its asm constraint; the accumulators' is `+` and the sum's
    split: bool                 # tf32x3: high and low parts, three products, each step summed apart
    tile_m: int
    tile_n: int
    tile_k: int
    warp_m: int
    warp_n: int
    stages: int
    pad_a: int                  # elements a tile row is padded by, so that the fragment reads do not conflict
    pad_b: int
    blocks_per_sm: int
    describe: str
    #: Rows of tiles a band of blocks covers before the next column (the blocks' order, for L2 reuse).
    band_rows: int = 8
    mma_k: int = 8
    #: 16-bit operands, two to a register (each tile laid out as its operand is in memory); `widen` names the
    #: exact conversions to the accumulator's type the loop may apply to each operand, `zero` the element 0.
    packed: bool = False
    widen: tuple[str, ...] = ()
    zero: str = "0"
    as_bits: str = ""           # the element's bits as an unsigned short (packing two to a register)

    @property
    def warps(self) -> int:
        return (self.tile_m // self.warp_m) * (self.tile_n // self.warp_n)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def element_bytes(self) -> int:
        return cuda_types.size_of(self.element)

    def stage_elements(self, width: int, pad: int, k_major: bool) -> int:
        """One stage of an operand's tile: `width` rows of the step's iterations (k_major), or the step's
        iterations of `width` elements, each row padded by `pad`."""
        return width * (self.tile_k + pad) if k_major else self.tile_k * (width + pad)

    @property
    def shared_bytes(self) -> int:
        """The most the ring may need: A k-major and B not, or (packed) the larger layout of each."""
        a = [self.stage_elements(self.tile_m, self.pad_a, k) for k in ((True, False) if self.packed else (True,))]
        b = [self.stage_elements(self.tile_n, self.pad_b, k) for k in ((True, False) if self.packed else (False,))]
        return self.stages * (max(a) + max(b)) * self.element_bytes


_TF32_OPCODE = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
#: The tensor-core forms of a product, by name. Blocks: FP64 64x128 of 4 warps (32x64 each), 4 stages, two
#: blocks per SM; TF32 128x128 of 8 warps (64x32 each), 4 stages; FP16/BF16 128x128 of 8 warps (64x32 each),
#: 32 iterations a step, 4 stages, two blocks per SM (measured beside 4 warps of 64x64, 128x256 blocks and 64
#: a step: bench/tensor_cores/README.md).
OPS = {op.name: op for op in (
    MmaOp("f64", "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", "double", "double", "double", "d", False,
          64, 128, 16, 32, 64, 4, 4, 4, 2, "FP64 mma.sync.m16n8k8 (DMMA)"),
    MmaOp("tf32", _TF32_OPCODE, "float", "float", "unsigned int", "r", False,
          128, 128, 16, 64, 32, 4, 4, 8, 1, "TF32 mma.sync.m16n8k8, operands rounded to TF32"),
    MmaOp("tf32x3", _TF32_OPCODE, "float", "float", "unsigned int", "r", True,
          128, 128, 16, 64, 32, 4, 4, 8, 1, "three TF32 mma.sync.m16n8k8 products per step (3xTF32)"),
    MmaOp("f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "__half", "float", "unsigned int", "r", False,
          128, 128, 32, 64, 32, 4, 8, 8, 2, "FP16 mma.sync.m16n8k16 (HMMA), FP32 accumulator", mma_k=16,
          packed=True, widen=("__half2float",), zero="__float2half(0.0f)", as_bits="__half_as_ushort"),
    MmaOp("bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "__nv_bfloat16", "float", "unsigned int",
          "r", False, 128, 128, 32, 64, 32, 4, 8, 8, 2, "BF16 mma.sync.m16n8k16, FP32 accumulator", mma_k=16,
          packed=True, widen=("__bfloat162float",), zero="__float2bfloat16(0.0f)", as_bits="__bfloat16_as_ushort"),
)}
#: The 16-bit operand types and their tensor-core form (the default wherever the target has it).
PACKED_OPS = {op.element: op.name for op in OPS.values() if op.packed}


def choose_op(element: str, ctx: PassContext) -> MmaOp:
    """The tensor-core form for operands of `element`, or NotAccumulation where none applies (the register
    tile then takes the kernel), Unsupported where one was asked for and cannot be had."""
    target, precision = ctx.options.target, ctx.options.matmul_precision
    if element == "double":
        name = "f64"
    elif element in PACKED_OPS:
        name = PACKED_OPS[element]
    elif element == "float" and precision in ("tf32", "tf32x3"):
        name = precision
    else:
        raise NotAccumulation(f"{element} operands at precision '{precision}' stay on CUDA cores")
    if name not in target.tensor_cores:
        if name == "f64" or name in PACKED_OPS.values():
            raise NotAccumulation(f"{target.name} has no {OPS[name].describe}")
        raise Unsupported(f"--matmul-precision {precision}: {target.name} has no such tensor-core instruction")
    op = OPS[name]
    if op.shared_bytes > target.shared_per_block_optin:
        raise Unsupported(f"the tiles need {op.shared_bytes} bytes of shared memory, more than the "
                          f"{target.shared_per_block_optin} a block may have on {target.name}")
    return op


__all__ = ["MmaOp", "OPS", "PACKED_OPS", "choose_op"]
