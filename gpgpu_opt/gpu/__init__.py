"""Running kernels on a GPU: running a harness and reading its output (`results`, `runner`), the benchmark
table (`benchmarks`), split-mode scripts (`script`) and the bench plot (`plot`). nvcc and cuBLAS discovery and
builds are `gpgpu_opt.toolchain` (the compile's floors use it too); the harness itself is `gpgpu_opt.harness`
with templates/run_harness.cu.j2."""
