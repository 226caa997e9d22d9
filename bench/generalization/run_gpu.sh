#!/usr/bin/env bash
# The generalization benchmark on the GPU machine, in one call: builds every harness that
# `python -m gpgpu_opt bench generalization --emit DIR` wrote (nvcc -O3 -arch=sm_90, cuBLAS where found),
# runs each, and prints the table (kernel, naive ms, ours ms, peer ms, x naive, x peer, check) with the
# geomean over kernels of naive / ours, then torch's row kernels beside ours.
#
#   bash bench/generalization/run_gpu.sh DIR          (DIR default: bench/generated/generalization)
#
# Results: DIR/results (NAME.out/.err/.rc/.build.txt, gpu.txt, table.md); where $OUT is set, the table and
# one archive of the results go there (`tar xzf generalization_results.tgz`, then here
# `python -m gpgpu_opt bench --from-results results` reads them).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/bench/generated/generalization}
[ -f "$dir/run.sh" ] || { echo "no $dir/run.sh: emit it first (python -m gpgpu_opt bench generalization --emit $dir)" >&2; exit 2; }
# run.sh would copy each result file to $OUT (more files than come back): it runs without OUT, the archive goes
# there instead; its progress goes to a log, the table to stdout.
env -u OUT RUN_TIMEOUT="${RUN_TIMEOUT:-150}" bash "$dir/run.sh" > "$dir/run.log" 2>&1
status=$?
grep -E "failed|exited" "$dir/run.log" >&2
python3 "$root/bench/generalization_gpu_table.py" "$dir/results" --torch | tee "$dir/results/table.md"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$dir/results/table.md" "$OUT/"
    tar czf "$OUT/generalization_results.tgz" -C "$dir" results run.log
fi
exit $status
