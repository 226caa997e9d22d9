"""The generalization benchmark: kernels written fresh, in the naive style of code nobody tuned for this
compiler (one thread per output, plain global memory, each in its own kernel-only file with its sizes as
kernel parameters), in bench/generalization/. `gpgpu-opt bench generalization` times them beside the
paper's set, each against its best peer the harness can run.

Each entry is the keyword arguments of a `Benchmark` (benchmarks.py registers them, with the suite
'generalization'). The peers: cuBLAS where a library does the same product ('sgemm', 'sgemm_nt', 'dgemm',
'hgemm', 'sgemm_batched'); for a kernel bound by memory, 'copy_bytes', a device-to-device copy of as many
bytes as the kernel reads and writes (so that the time ratio is the bandwidth ratio); None where the real peer
needs Python or another library (the note names it).
"""
from __future__ import annotations

FOLDER = "bench/generalization"
SUITE = "generalization"

_ROWS, _COLS = 16384, 8192        # the row kernels: a softmax's or a layer norm's activations
_N1 = 1 << 26                     # the elementwise kernels: 256 MB per float array
_GRID3 = 512                      # the 3-D stencils: 512^3

ENTRIES = [
    dict(name="g_stream_triad", file="stream_triad.cu", kernel="stream_triad", sizes={"n": _N1},
         space=(_N1, 1), flops=2.0 * _N1, reference="copy_bytes"),
    dict(name="g_saxpy", file="saxpy.cu", kernel="saxpy", sizes={"n": _N1}, space=(_N1, 1), flops=2.0 * _N1,
         reference="copy_bytes", note="y updated in place; cublasSaxpy moves the same bytes"),
    dict(name="g_column_sums", file="column_sums.cu", kernel="column_sums", sizes={"rows": 8192, "cols": 16384},
         space=(16384, 1), flops=8192.0 * 16384, reference="copy_bytes"),
    dict(name="g_row_sum_exp", file="row_sum_exp.cu", kernel="row_sum_exp", sizes={"rows": _ROWS, "cols": _COLS},
         space=(_ROWS, 1), flops=2.0 * _ROWS * _COLS, reference="copy_bytes"),
    dict(name="g_row_max", file="row_max.cu", kernel="row_max", sizes={"rows": _ROWS, "cols": _COLS},
         space=(_ROWS, 1), flops=float(_ROWS * _COLS), reference="copy_bytes",
         note="softmax's first step; torch.amax is the Python peer"),
    dict(name="g_softmax_normalize", file="softmax_normalize.cu", kernel="softmax_normalize",
         sizes={"rows": _ROWS, "cols": _COLS}, space=(_COLS, _ROWS), flops=2.0 * _ROWS * _COLS,
         reference="copy_bytes", note="softmax's last step; torch.softmax (all three steps) is the Python peer"),
    dict(name="g_row_mean_var", file="row_mean_var.cu", kernel="row_mean_var", sizes={"rows": _ROWS, "cols": _COLS},
         space=(_ROWS, 1), flops=4.0 * _ROWS * _COLS, reference="copy_bytes",
         note="layer-norm statistics; torch.var_mean is the Python peer"),
    dict(name="g_batched_matmul", file="batched_matmul.cu", kernel="batched_matmul",
         sizes={"M": 512, "N": 512, "K": 512}, space=(512, 512), flops=2.0 * 512 ** 3 * 64,
         reference="sgemm_batched", note="64 batches over blockIdx.z (flops counted for 64)"),
    dict(name="g_half_matmul", file="half_matmul.cu", kernel="half_matmul", sizes={"M": 4096, "N": 4096, "K": 4096},
         space=(4096, 4096), flops=2.0 * 4096 ** 3, reference="hgemm",
         note="cublasGemmEx: half inputs, float output, FP32 compute (tensor cores)"),
    dict(name="g_sgemm_nn", file="sgemm_nn.cu", kernel="sgemm_nn", sizes={"M": 3000, "N": 5000, "K": 2000},
         space=(5000, 3000), flops=2.0 * 3000 * 5000 * 2000, reference="sgemm",
         note="ragged and rectangular (mm covers 4096^3)"),
    dict(name="g_sgemm_nt", file="sgemm_nt.cu", kernel="sgemm_nt", sizes={"M": 4096, "N": 4096, "K": 4096},
         space=(4096, 4096), flops=2.0 * 4096 ** 3, reference="sgemm_nt"),
    dict(name="g_dgemm", file="dgemm.cu", kernel="dgemm", sizes={"n": 4096}, space=(4096, 4096),
         flops=2.0 * 4096 ** 3, reference="dgemm"),
    dict(name="g_stencil7", file="stencil7.cu", kernel="stencil7",
         sizes={"nx": _GRID3, "ny": _GRID3, "nz": _GRID3, "c0": 0.5, "c1": 0.125}, space=(_GRID3, _GRID3),
         flops=8.0 * _GRID3 ** 3, reference="copy_bytes", note="a 3-D launch, one thread per point (z threads)"),
    dict(name="g_stencil27", file="stencil27.cu", kernel="stencil27", sizes={"nx": _GRID3, "ny": _GRID3, "nz": _GRID3},
         space=(_GRID3, _GRID3), flops=27.0 * _GRID3 ** 3, reference="copy_bytes",
         note="a 2-D launch, each thread marching up its z column"),
    dict(name="g_nbody", file="nbody.cu", kernel="nbody_accel", sizes={"n": 65536, "softening": 0.01},
         space=(65536, 1), flops=20.0 * 65536 ** 2, reference=None,
         note="20 flops per interaction; the FP32 FMA peak is the ceiling"),
    dict(name="g_histogram256", file="histogram256.cu", kernel="histogram256", sizes={"n": _N1}, space=(_N1, 1),
         flops=0.0, reference="copy_bytes", note="cub::DeviceHistogram::HistogramEven is the library peer"),
    dict(name="g_bilinear_resize", file="bilinear_resize.cu", kernel="bilinear_resize",
         sizes={"in_w": 4096, "in_h": 4096, "out_w": 8192, "out_h": 8192}, space=(8192, 8192), flops=0.0,
         reference="copy_bytes"),
    dict(name="g_csr_spmv", file="csr_spmv.cu", kernel="csr_spmv", sizes={"rows": 1 << 20}, space=(1 << 20, 1),
         flops=0.0, reference=None, note="cusparseSpMV is the library peer"),
    dict(name="g_conv2d_5x5", file="conv2d_5x5.cu", kernel="conv2d_5x5", sizes={"w": 8192, "h": 8192},
         space=(8192, 8192), flops=2.0 * 25 * 8192 * 8192, reference="copy_bytes",
         note="cuDNN is the library peer"),
    dict(name="g_transpose_scale", file="transpose_scale.cu", kernel="transpose_scale",
         sizes={"rows": 8192, "cols": 8192, "alpha": 2.0}, space=(8192, 8192), flops=8192.0 * 8192,
         reference="copy_bytes"),
    dict(name="g_dot_atomic", file="dot_atomic.cu", kernel="dot_atomic", sizes={"n": _N1}, space=(_N1, 1),
         flops=2.0 * _N1, reference="copy_bytes", note="cublasSdot reads the same bytes"),
]
