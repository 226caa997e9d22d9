#!/usr/bin/env bash
# half_axpy.cu as written (naive) and through gpgpu-opt: --vector-width 2 (__half2), 8 (half8), and the
# default (half8, the naive kernel below 540672 threads), each built with nvcc -O3 -arch=sm_90 and run at
# several sizes; the checksums of y's bits must agree. Prepare the sources where gpgpu-opt is installed:
#   cp bench/half8/half_axpy.cu DIR/naive.cu
#   for v in 2 8; do gpgpu-opt compile bench/half8/half_axpy.cu -o DIR/v$v.cu --vector-width $v; done
#   gpgpu-opt compile bench/half8/half_axpy.cu -o DIR/default.cu
# then, on the GPU machine: bash run.sh DIR
set -u
DIR=${1:-.}
cd "$DIR" || exit 2
for v in naive v2 v8 default; do nvcc -O3 -arch=sm_90 $v.cu -o $v.bin || exit 1; done
echo "| n | naive (ms) | half2 (ms) | x naive | half8 (ms) | x naive | default (ms) | x naive | checksums |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in 262144 1048576 4194304 16777216 67108864; do
  row="| $n"; sums=""; base=""
  for v in naive v2 v8 default; do
    out=$(./$v.bin $n 50) || { echo "$v failed at $n"; exit 1; }
    t=$(echo "$out" | awk '/median_ms/ {print $2}'); sums="$sums $(echo "$out" | awk '/checksum/ {print $2}')"
    if [ -z "$base" ]; then base=$t; row="$row | $t"; else row="$row | $t | $(awk -v a=$base -v b=$t 'BEGIN {printf "%.2f", a / b}')"; fi
  done
  same=$(echo $sums | tr ' ' '\n' | sort -u | wc -l)
  echo "$row | $([ "$same" = 1 ] && echo same || echo DIFFER) |"
done
