#!/bin/bash
# The half-input product on the GPU machine, in one run: cublasGemmEx (f16 in, f32 out and compute), the
# compiler's HMMA tiles (gen_f16_*: gen_variants.py's outputs of hgemm_nn.cu / hgemm_nt.cu), the study's
# hand-written mma.sync + ldmatrix kernel and the naive kernels, at 333x520x264 (checked only),
# 3000x5000x2000 and 4096^3.   usage: cd bench/tensor_cores/study && OUT=/dir ./run_f16.sh
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/tc_f16}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
CUB=$(ls /usr/local/cuda/lib64/libcublas.so.1* 2>/dev/null | head -1)
[ -z "$CUB" ] && CUB=$(find /usr /opt -name 'libcublas.so.1*' 2>/dev/null | grep -v Lt | head -1)
export CUBLAS_LIB="$CUB" LD_LIBRARY_PATH="$(dirname "$CUB"):${LD_LIBRARY_PATH:-}"
./bench --only "${VARIANTS:-cublas_f16,gen_f16,gen_naive_hgemm,ms_f16_128x128}" --shapes "${SHAPES:-smb}" \
  --csv "$OUT/results.csv" 2>&1 | tee "$OUT/log.txt"
