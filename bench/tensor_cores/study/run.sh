#!/bin/bash
# Driver: build (or reuse the carried binary), check + time every variant and the cuBLAS references,
# optional ncu pass, print the summary table last.
#   usage (on the GPU machine): cd bench/tensor_cores/study && OUT=/some/dir ./run.sh [groups...]
set -u
cd "$(dirname "$0")"
FINAL=${OUT:-/tmp/tc_final}; OUT=/tmp/tc_work; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
CUB=$(ls /usr/local/cuda/lib64/libcublas.so.1* 2>/dev/null | head -1)
[ -z "$CUB" ] && CUB=$(find /usr /opt -name 'libcublas.so.1*' 2>/dev/null | grep -v Lt | head -1)
export CUBLAS_LIB="$CUB" LD_LIBRARY_PATH="$(dirname "$CUB"):${LD_LIBRARY_PATH:-}"
echo "cublas: $CUB" | tee -a "$OUT/gpu.txt"
unset NVIDIA_TF32_OVERRIDE
# 1. binary: carried one if it runs here, else build here
if ! ./bench --list > /dev/null 2>&1 || [ "${REBUILD:-0}" = 1 ]; then
  echo "building on device"; make clean > /dev/null; make -j16 > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
fi
cat *.ptxas.log 2>/dev/null | grep -E "Compiling entry|registers|spill" > "$OUT/ptxas.txt"
(cuobjdump -sass bench 2>/dev/null | awk '/Function :/{f=$3} /HGMMA|HMMA|DMMA|FFMA/{split($2,a,"."); c[f" "a[1]]++} END{for(k in c) print k, c[k]}' | sort > "$OUT/sass_mix.txt") &
echo "setup $(( $(date +%s) - T0 )) s"
CSV="$OUT/results.csv"
GROUPS_=${*:-refs wg_tf32x3 wg_tf32_ wg_f16 ms_f64 ms_tf32x3 ms_tf32_ ms_f16}
left() { echo $(( ${BUDGET:-235} - ($(date +%s) - T0) )); }
for g in $GROUPS_; do
  [ $(left) -lt 20 ] && { echo "SKIP group $g (time)"; continue; }
  if [ "$g" = refs ]; then args="--refs"; else args="--only $g"; fi
  timeout $(( $(left) < ${GTIME:-70} ? $(left) : ${GTIME:-70} )) ./bench $args --csv "$CSV" > "$OUT/log_$g.txt" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ "$g" != refs ]; then
    echo "group $g failed rc=$rc; retrying variants one by one" | tee -a "$OUT/log_$g.txt"
    for v in $(./bench --list | grep -- "$g"); do
      grep -q "^$v," "$CSV" && continue
      [ $(left) -lt 20 ] && break
      timeout 20 ./bench --only "$v" --csv "$CSV" >> "$OUT/log_$g.txt" 2>&1 || echo "FAILED $v rc=$?" | tee -a "$OUT/log_$g.txt"
    done
  fi
  echo "group $g rc=$rc at $(( $(date +%s) - T0 )) s"; tail -3 "$OUT/log_$g.txt" | cut -c1-200
done
wait
if [ -n "${NCU:-}" ]; then
  for v in $NCU; do
    [ $(left) -lt 25 ] && break
    timeout 40 ncu --clock-control none --kernel-name regex:'^(ms::)?mma_gemm|wg_gemm|hgemm|k_f64|k_tf32' --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
      ./bench --only "$v" --shapes b --reps 0 --csv /dev/null > "$OUT/ncu_$v.txt" 2>&1
    echo "ncu $v rc=$? at $(( $(date +%s) - T0 )) s"
  done
fi
python3 summarize.py "$CSV" > "$OUT/summary.txt"
cp "$OUT/results.csv" "$OUT/summary.txt" "$FINAL/" ; tar czf "$FINAL/all.tgz" -C "$OUT" .
cat "$OUT/summary.txt"
