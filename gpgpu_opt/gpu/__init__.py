"""Running kernels on a GPU: nvcc and cuBLAS discovery and builds (`toolchain`), running a harness and reading
its output (`results`, `runner`), the benchmark table (`benchmarks`), split-mode scripts (`script`) and the
bench plot (`plot`). The harness itself is `gpgpu_opt.harness` with templates/run_harness.cu.j2."""
