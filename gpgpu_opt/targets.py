"""GPU targets as data. Passes read these fields; they never test the target's name. A target is built by
keyword (`Target(name=..., warp_size=...)`): two dozen numbers are unreadable, and easy to swap, by position."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Target:
    name: str
    description: str
    nvcc_arch: str                 # the -arch for nvcc when compiling for this target
    cuda_arch: int                 # __CUDA_ARCH__ in device code for this target (cc x.y -> x*100 + y*10)
    #: How global memory requests are formed and served.
    request_threads: int           # threads whose accesses form one request (half-warp 16, warp 32)
    transaction_bytes: int         # segment (g80/gt200) or sector (fermi and later) size
    #: 'strict': cc 1.0/1.1 - coalesced only if thread k reads word k of an aligned segment, else one
    #:           transaction per thread; 'segments': cc 1.2/1.3 - one transaction per distinct segment;
    #: 'sectors': fermi and later - one per distinct 32-byte sector, warp-uniform reads broadcast.
    coalescing_rule: str
    warp_size: int
    shared_banks: int
    bank_bytes: int
    shared_per_block: int          # bytes
    shared_per_sm: int             # bytes
    registers_per_sm: int
    max_registers_per_thread: int
    register_alloc_unit: int       # registers are allocated per warp in units of this many
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    sm_count: int
    #: DRAM partitions that camp (width in bytes, count), or None where addresses are hashed.
    partition_camping: tuple[int, int] | None
    preferred_vector_bytes: int    # widest per-thread access worth emitting
    memory_bandwidth_gbs: float
    memory_latency_cycles: int
    clock_ghz: float
    #: What the offline model (gpgpu_opt/model) needs besides the above; the CUDA occupancy calculator's
    #: allocation rules, and per-SM issue rates, bandwidths and latencies (cycles).
    register_alloc_granularity: str = "warp"   # 'block' (cc 1.x: registers per block) or 'warp'
    warp_alloc_granularity: int = 4            # resident warps are allocated in groups of this many
    shared_alloc_unit: int = 128               # bytes of shared memory are allocated in units of this
    shared_reserved_per_block: int = 0         # bytes the system reserves per block (cc 8.0+: 1 KB)
    issue_per_cycle: float = 4.0               # warp instructions an SM issues per cycle
    fp32_lanes_per_sm: int = 128               # FP32 (FMA) lanes per SM
    lsu_per_cycle: float = 1.0                 # L1/shared wavefronts (one 128-byte line each) per cycle per SM
    l1_latency_cycles: int = 33                # an L1 or shared-memory hit
    l2_latency_cycles: int = 260
    l2_bytes_per_cycle_per_sm: float = 64.0    # what one SM can pull from L2
    dram_efficiency: float = 0.9               # the fraction of memory_bandwidth_gbs a copy reaches
    launch_overhead_us: float = 2.5            # a kernel launch, seen from CUDA events
    dependent_issue_cycles: int = 4            # cycles between a warp's dependent ALU instructions
    #: Bytes per clock an SM's L1 serves to global loads (one 128-byte wavefront), or 0 where global loads
    #: bypass a cache (g80/gt200: reuse between threads only pays through shared memory).
    l1_bytes_per_clock: int = 0
    #: The tensor-core forms of a matrix product it has (passes/merge/mma_ops.py's OPS), and the shared
    #: memory a block may have when its kernel asks for more than `shared_per_block` (cudaFuncSetAttribute).
    tensor_cores: tuple[str, ...] = ()
    shared_per_block_optin: int = 0

    @property
    def has_partition_camping(self) -> bool:
        return self.partition_camping is not None

    @property
    def has_warp_shuffle(self) -> bool:
        """`__shfl_*_sync`: compute capability 3.0 and later."""
        return self.cuda_arch >= 300

    @property
    def has_async_copy(self) -> bool:
        """cp.async (`__pipeline_memcpy_async`): global to shared memory without registers, sm_80 and later."""
        return self.cuda_arch >= 800

    @property
    def resident_threads(self) -> int:
        """Threads the whole GPU keeps in flight at full occupancy."""
        return self.sm_count * self.max_threads_per_sm


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target(
            name="g80", description="GeForce 8800 GTX (cc 1.0), the paper's GPU", nvcc_arch="sm_50", cuda_arch=100,
            request_threads=16, transaction_bytes=64, coalescing_rule="strict", warp_size=32, shared_banks=16,
            bank_bytes=4, shared_per_block=16 * 1024, shared_per_sm=16 * 1024, registers_per_sm=8192,
            max_registers_per_thread=124, register_alloc_unit=256, max_threads_per_block=512, max_threads_per_sm=768,
            max_blocks_per_sm=8, sm_count=16, partition_camping=(256, 6), preferred_vector_bytes=8,
            memory_bandwidth_gbs=86.4, memory_latency_cycles=500, clock_ghz=1.35, register_alloc_granularity="block",
            warp_alloc_granularity=2, shared_alloc_unit=512, issue_per_cycle=0.25, fp32_lanes_per_sm=8,
            lsu_per_cycle=0.25, l1_latency_cycles=36, l2_latency_cycles=500, l2_bytes_per_cycle_per_sm=8.0,
            dram_efficiency=0.8, launch_overhead_us=7.0, dependent_issue_cycles=24,
        ),
        Target(
            name="gt200", description="GeForce GTX 280 (cc 1.3)", nvcc_arch="sm_50", cuda_arch=130,
            request_threads=16, transaction_bytes=64, coalescing_rule="segments", warp_size=32, shared_banks=16,
            bank_bytes=4, shared_per_block=16 * 1024, shared_per_sm=16 * 1024, registers_per_sm=16384,
            max_registers_per_thread=124, register_alloc_unit=256, max_threads_per_block=512,
            max_threads_per_sm=1024, max_blocks_per_sm=8, sm_count=30, partition_camping=(256, 8),
            preferred_vector_bytes=8, memory_bandwidth_gbs=141.7, memory_latency_cycles=500, clock_ghz=1.3,
            register_alloc_granularity="block", warp_alloc_granularity=2, shared_alloc_unit=512,
            issue_per_cycle=0.25, fp32_lanes_per_sm=8, lsu_per_cycle=0.25, l1_latency_cycles=36,
            l2_latency_cycles=500, l2_bytes_per_cycle_per_sm=8.0, dram_efficiency=0.8, launch_overhead_us=7.0,
            dependent_issue_cycles=24,
        ),
        Target(
            name="fermi", description="Fermi (sm_20), e.g. GTX 480", nvcc_arch="sm_50", cuda_arch=200,
            request_threads=32, transaction_bytes=32, coalescing_rule="sectors", warp_size=32, shared_banks=32,
            bank_bytes=4, shared_per_block=48 * 1024, shared_per_sm=48 * 1024, registers_per_sm=32768,
            max_registers_per_thread=63, register_alloc_unit=64, max_threads_per_block=1024, max_threads_per_sm=1536,
            max_blocks_per_sm=8, sm_count=15, partition_camping=None, preferred_vector_bytes=16,
            memory_bandwidth_gbs=177.4, memory_latency_cycles=600, clock_ghz=1.4, warp_alloc_granularity=2,
            shared_alloc_unit=128, issue_per_cycle=1.0, fp32_lanes_per_sm=32, lsu_per_cycle=0.5,
            l1_latency_cycles=40, l2_latency_cycles=300, l2_bytes_per_cycle_per_sm=32.0, dram_efficiency=0.85,
            launch_overhead_us=5.0, l1_bytes_per_clock=64, dependent_issue_cycles=18,
        ),
        Target(
            name="sm_80", description="Ampere A100 (sm_80)", nvcc_arch="sm_80", cuda_arch=800, request_threads=32,
            transaction_bytes=32, coalescing_rule="sectors", warp_size=32, shared_banks=32, bank_bytes=4,
            shared_per_block=48 * 1024, shared_per_sm=164 * 1024, registers_per_sm=65536,
            max_registers_per_thread=255, register_alloc_unit=256, max_threads_per_block=1024,
            max_threads_per_sm=2048, max_blocks_per_sm=32, sm_count=108, partition_camping=None,
            preferred_vector_bytes=16, memory_bandwidth_gbs=1555.0, memory_latency_cycles=600, clock_ghz=1.41,
            shared_reserved_per_block=1024, fp32_lanes_per_sm=64, l1_latency_cycles=33, l2_latency_cycles=260,
            l2_bytes_per_cycle_per_sm=64.0, l1_bytes_per_clock=128, dependent_issue_cycles=4,
            tensor_cores=("tf32", "tf32x3", "f16", "bf16"), shared_per_block_optin=163 * 1024,
        ),
        Target(
            name="sm_90", description="Hopper H100/H200 (sm_90)", nvcc_arch="sm_90", cuda_arch=900,
            request_threads=32, transaction_bytes=32, coalescing_rule="sectors", warp_size=32, shared_banks=32,
            bank_bytes=4, shared_per_block=48 * 1024, shared_per_sm=228 * 1024, registers_per_sm=65536,
            max_registers_per_thread=255, register_alloc_unit=256, max_threads_per_block=1024,
            max_threads_per_sm=2048, max_blocks_per_sm=32, sm_count=132, partition_camping=None,
            preferred_vector_bytes=16, memory_bandwidth_gbs=3350.0, memory_latency_cycles=600, clock_ghz=1.75,
            shared_reserved_per_block=1024, fp32_lanes_per_sm=128, l1_latency_cycles=33, l2_latency_cycles=260,
            l2_bytes_per_cycle_per_sm=64.0, l1_bytes_per_clock=128, dependent_issue_cycles=4,
            tensor_cores=("f64", "tf32", "tf32x3", "f16", "bf16"), shared_per_block_optin=227 * 1024,
        ),
    ]
}

DEFAULT_TARGET = "sm_90"


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target '{name}' (known: {', '.join(TARGETS)})") from None
