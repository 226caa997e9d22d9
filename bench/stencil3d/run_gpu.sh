#!/bin/sh
# On the GPU machine, from bench/stencil3d (or a copy of it): build the harness, run it at 512^3, then profile
# the 7-point column march (the naive loop, the compiler's output, the float4 hand form) with ncu.
# Regenerate gen/ first with gen.sh where the compiler changed (the GPU machine has no pycparser).
set -e
nvcc -O3 -arch=sm_90 -std=c++17 -o bench_bin bench.cu
./bench_bin ${1:-512} | tee ${OUT:-.}/bench.txt
timeout 120 ncu --clock-control none -k regex:"laplace7|j7_queue4" --section SpeedOfLight --section Occupancy \
    --metrics l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct \
    ./bench_bin ${1:-512} profile > ${OUT:-.}/ncu.txt 2>&1 || true
grep -E "laplace7|j7_queue4|Throughput|Duration|hit_rate|stalled|Achieved Occupancy" ${OUT:-.}/ncu.txt | head -60
