"""A CPU emulator for CUDA kernels (as parsed by gpgpu_opt.frontend), used to check that rewritten
kernels compute what the naive ones do.

    stats = run_kernel(kernel, grid=(gx, gy), block=(16, 16), args={"A": a, "n": 256},
                       device_functions=prog.device_functions)

Threads run in SIMT lockstep as numpy vectors over batches of blocks; a race detector, bounds and
alignment checks and a divergent-barrier check turn undefined behaviour into EmulationErrors."""
from gpgpu_opt.emulator.errors import (DivergentBarrierError, EmulationError, MisalignedAccessError,
                                       OutOfBoundsError, RaceError, UndefinedBehaviorError, UnsupportedConstruct)
from gpgpu_opt.emulator.launch import EmulationStats, run_kernel

__all__ = ["run_kernel", "EmulationStats", "EmulationError", "OutOfBoundsError", "RaceError",
           "DivergentBarrierError", "UnsupportedConstruct", "MisalignedAccessError", "UndefinedBehaviorError"]
