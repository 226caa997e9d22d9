#!/usr/bin/env bash
# Build and run the harnesses `python3 bench/gpu_bench.py` (gpgpu-opt bench --emit bench/generated) wrote, on this
# machine's GPU; needs nvcc (and cuBLAS for the references) only. Results go to bench/generated/results (and
# $OUT/results where $OUT is set); read them with `gpgpu-opt bench --from-results bench/generated/results`.
#
#   bash bench/run_all.sh [NAME ...]
set -u
here="$(dirname "$0")/generated"
[ -f "$here/run.sh" ] || { echo "no $here/run.sh: run python3 bench/gpu_bench.py first" >&2; exit 2; }
exec bash "$here/run.sh" "$@"
