#!/bin/bash
# ncu of the compiler's own tensor-core kernels (the harness binary built by run.sh): stall reasons and pipes.
cd "$(dirname "$0")"
CUB=$(ls /usr/local/cuda/lib64/libcublas.so.1* 2>/dev/null | head -1)
export CUBLAS_LIB="$CUB" LD_LIBRARY_PATH="$(dirname "$CUB"):${LD_LIBRARY_PATH:-}"
[ -x bench ] || { make -j16 > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }; }
for v in "$@"; do
  timeout 60 ncu --clock-control none --kernel-name regex:"k_${v}\$" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats \
    --section Occupancy --section MemoryWorkloadAnalysis \
    ./bench --only "gen_$v" --shapes b --reps 0 --csv /dev/null > "$OUT/ncu_$v.txt" 2>&1
  echo "== $v rc=$?"
  grep -E "Duration|Compute \(SM\) Thr|Issue Slots Busy|Executed Ipc Active|Stall|Warp Cycles Per Issued|Achieved Occ|No Eligible|highest-utilized|dominated|Registers" "$OUT/ncu_$v.txt" | cut -c1-150 | head -30
done
