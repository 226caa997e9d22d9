#!/usr/bin/env bash
# Build and run the `run` harnesses of the batched and gather kernels on a GPU machine (no Python there).
# Make them here first, one directory each (tests/passes/test_batches.py, tests/harness/test_index_arrays.py
# hold the kernels), e.g.:
#   python -m gpgpu_opt run K.cu --build-only --restrict --size M=1024 ... --global X,Y,BATCHES --out DIR/NAME
# then: bash bench/check_batches_gathers.sh DIR   (every DIR/*/*.cu is built with nvcc -O3 -arch=sm_90 and run;
# each prints its RESULT lines and its check; the exit status is the number of harnesses that failed).
set -u
dir=${1:?directory of harness folders}
failed=0
for src in "$dir"/*/*.cu; do
    bin=/tmp/$(basename "$src" .cu).bin
    echo "== $src"
    if ! nvcc -O3 -arch=sm_90 -o "$bin" "$src" > "$bin.log" 2>&1; then
        tail -5 "$bin.log"; failed=$((failed + 1)); continue
    fi
    "$bin" --runs 10 --warmup 2
    status=$?
    echo "exit status $status"
    [ "$status" -eq 0 ] || failed=$((failed + 1))
done
echo "harnesses failed: $failed"
exit "$failed"
