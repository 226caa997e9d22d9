#!/usr/bin/env bash
# Build and run every harness in bench/generated/ (made by `python3 bench/gpu_bench.py`) on this machine's GPU,
# then print a table. Needs nvcc and cuBLAS only (no Python). Logs go to $BIN/logs; where $OUT is set (the device
# tool), bench_log.txt (all logs), results.txt (the RESULT lines) and table.txt are copied there.
#
#   bash bench/run_all.sh [NAME ...]        # default: mv tmv transpose mm (whatever exists), then any other *.cu
set -u
cd "$(dirname "$0")/.."
GEN=bench/generated
BIN=${BENCH_BIN:-/tmp/gpgpu_opt_bench}
LOG=$BIN/logs
rm -rf "$LOG"; mkdir -p "$BIN" "$LOG"
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}

if [ $# -gt 0 ]; then
    names=("$@")
else
    names=()
    for n in mv tmv transpose mm; do [ -f "$GEN/$n.cu" ] && names+=("$n"); done
    for f in "$GEN"/*.cu; do
        n=$(basename "$f" .cu)
        case " ${names[*]} " in *" $n "*) ;; *) [ -f "$f" ] && names+=("$n") ;; esac
    done
fi
[ ${#names[@]} -gt 0 ] || { echo "no harnesses in $GEN: run python3 bench/gpu_bench.py first" >&2; exit 2; }

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$LOG/gpu.txt"
"$NVCC" --version | tail -2

# cuBLAS: plain -lcublas, else a cuBLAS found on the machine (e.g. in a Python wheel), else no reference.
probe=$BIN/probe.cu
printf '#include <cublas_v2.h>\nint main(){cublasHandle_t h; return cublasCreate(&h) ? 1 : 0;}\n' > "$probe"
CUBLAS=(-lcublas)
if ! "$NVCC" -arch=$ARCH "$probe" -o "$BIN/probe" -lcublas >/dev/null 2>&1; then
    hdr=$(find /usr /opt /root -name cublas_v2.h 2>/dev/null | head -1)
    lib=$(find /usr /opt /root -name 'libcublas.so*' 2>/dev/null | grep -v Lt | sort | head -1)
    CUBLAS=()
    if [ -n "$hdr" ] && [ -n "$lib" ]; then
        cand=(-I"$(dirname "$hdr")" "$lib" -Xlinker -rpath="$(dirname "$lib")")
        if "$NVCC" -arch=$ARCH "$probe" -o "$BIN/probe" "${cand[@]}" >/dev/null 2>&1; then
            CUBLAS=("${cand[@]}")
        fi
    fi
    if [ ${#CUBLAS[@]} -eq 0 ]; then
        echo "note: no usable cuBLAS: building without the cuBLAS references (-DHARNESS_NO_REFERENCE)"
        CUBLAS=(-DHARNESS_NO_REFERENCE)
    else
        echo "note: cuBLAS from $lib"
    fi
fi

echo "== building (${NVCC} -O3 -arch=${ARCH} ... ${CUBLAS[*]})"
pids=()
for n in "${names[@]}"; do
    "$NVCC" -O3 -arch=$ARCH "$GEN/$n.cu" -o "$BIN/$n" "${CUBLAS[@]}" -Xptxas -v >"$LOG/$n.build.txt" 2>&1 &
    pids+=($!)
done
for i in "${!names[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "build of ${names[$i]} FAILED:"; cat "$LOG/${names[$i]}.build.txt"
    fi
done

echo "== running"
status=0
: > "$LOG/results.txt"
for n in "${names[@]}"; do
    [ -x "$BIN/$n" ] || { status=1; continue; }
    echo "-- $n"
    timeout 300 "$BIN/$n" 2>&1 | tee "$LOG/$n.run.txt"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "$n exited with $rc"; status=1; }
    grep '^RESULT ' "$LOG/$n.run.txt" >> "$LOG/results.txt"
done

echo
echo "== results ($(head -2 "$LOG/gpu.txt" | tail -1 | cut -d, -f1))"
awk '
    { name=$2; var=$3; key=name SUBSEP var
      if (!(name in seen)) { seen[name]=1; order[++k]=name }
      nv[name]++; vars[name, nv[name]]=var; t[key]=$4; gbs[key]=$5; gfl[key]=$6; chk[key]=$7
      if (var != "naive" && var != "optimized") ref[name]=var }
    END {
      printf "%-10s %-12s %10s %9s %9s %6s %10s %10s\n", "kernel", "variant", "time_ms", "TB/s", "TFLOP/s", "check", "x naive", "x ref"
      for (i=1; i<=k; i++) { name=order[i]
        for (j=1; j<=nv[name]; j++) { var=vars[name, j]; key=name SUBSEP var
          sp = ((name, "naive") in t) ? sprintf("%.2f", t[name SUBSEP "naive"]/t[key]) : "-"
          rr = (name in ref) ? sprintf("%.2f", t[name SUBSEP ref[name]]/t[key]) : "-"
          printf "%-10s %-12s %10.4f %9.3f %9.3f %6s %10s %10s\n", name, var, t[key], gbs[key]/1000, gfl[key]/1000, chk[key], sp, rr } } }
' "$LOG/results.txt" | tee "$LOG/table.txt"
echo "(x naive: naive time / time, higher is faster; x ref: reference time / time, 1.00 = as fast as the reference)"
if [ -n "${OUT:-}" ]; then
    for f in "$LOG"/gpu.txt "$LOG"/*.build.txt "$LOG"/*.run.txt; do echo "==== $(basename "$f")"; cat "$f"; done \
        > "$OUT/bench_log.txt"
    cp "$LOG/results.txt" "$LOG/table.txt" "$OUT/"
fi
exit $status
