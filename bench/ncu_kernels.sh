#!/bin/bash
# Kernel times of one program of a corpus GPU bundle (bench/corpus_gpu.py --emit), its naive build beside its
# optimized build: ncu's gpu__time_duration (caches flushed between launches, ncu's default), the median over
# the launches of each kernel, in ns. Builds the program first (run.sh --build-only).
#   bash bench/ncu_kernels.sh BUNDLE NAME BUILD_DIR KERNEL_REGEX [ARGS...]
# e.g. bash bench/ncu_kernels.sh bench/generated/after6 srad_main_large srad_v1 '^srad' 12 0.5 2048 2048
set -euo pipefail
bundle=$1 name=$2 dir=$3 regex=$4
shift 4
bash "$bundle/run.sh" --build-only "$name" > /dev/null 2>&1
for variant in naive opt; do
    (cd "$bundle/$name/$variant/$dir" && ncu --clock-control none --kernel-name "regex:$regex" --launch-skip 4 --launch-count 16 \
        --metrics gpu__time_duration.sum --csv "../../$variant.bin" "$@" 2> /dev/null | grep -E '^"[0-9]' | python3 -c "
import collections, csv, statistics, sys
times = collections.defaultdict(list)
for row in csv.reader(sys.stdin):
    times[row[4].split('(')[0]].append(float(row[-1].replace(',', '')))
print('$variant', {k: (round(statistics.median(v)), len(v)) for k, v in sorted(times.items())})
")
done
