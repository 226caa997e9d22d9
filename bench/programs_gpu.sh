#!/usr/bin/env bash
# Build and time the whole-program corpus (tests/programs/*.cu) against optimized versions of the same programs,
# on this machine's GPU. Run from anywhere; it works from the repository root.
#
#   bash bench/programs_gpu.sh [--dry | --run-only] [--runs N] OPT_DIR [NAME ...]
#
# OPT_DIR holds already generated optimized programs with the same file names as tests/programs/*.cu (a missing
# one is reported as "missing"). Nothing is assumed about them except that they are .cu programs: both the
# original and the optimized file are built with
#     $NVCC -O3 -arch=$ARCH -I tests/programs FILE
# (so `#include "common/bench_utils.c"` resolves wherever the optimized file lives), each binary is run RUNS times
# (default 3), the median of the `GPU Runtime: X s` lines is taken, and the exit status is the check (0 = the
# program's GPU result matched its CPU reference). NAME ... limits the run to those programs (gemm, 2mm, ...).
#
# --dry      build only (no GPU needed); the table shows build results.
# --run-only run the binaries an earlier --dry left in $BIN (built on another machine, say); build nothing.
# --runs N   runs per binary (default 3; the median of the runs that printed a time is used).
#
# Environment: NVCC (nvcc), ARCH (sm_90), NVCC_FLAGS (extra flags for both builds), BIN (work directory,
# default /tmp/gpgpu_opt_programs), RUN_TIMEOUT (seconds per run, default 300), CUDA_MODULE_LOADING (default
# EAGER, so a first launch does not pay for module loading inside the timed region). Logs go to $BIN/logs;
# where $OUT is set (the device tool), table.md and the logs are copied there.
#
# Output: progress on stderr, the markdown table on stdout
#   | program | naive GPU time (s) | optimized GPU time (s) | speedup | naive check | optimized check |
# Exit status: 0 when every naive and optimized program built (and, unless --dry, ran and passed its check);
# 1 otherwise; 2 for a usage error.
set -u

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

DRY=0
RUN_ONLY=0
RUNS=${RUNS:-3}
while [ $# -gt 0 ]; do
    case "$1" in
        --dry) DRY=1; shift ;;
        --run-only) RUN_ONLY=1; shift ;;
        --runs) [ $# -ge 2 ] || usage; RUNS=$2; shift 2 ;;
        --runs=*) RUNS=${1#--runs=}; shift ;;
        -h|--help) usage ;;
        --) shift; break ;;
        -*) echo "unknown option: $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
case "$RUNS" in ''|*[!0-9]*|0) echo "--runs needs a positive integer" >&2; exit 2 ;; esac

OPT_DIR=$1; shift
[ -d "$OPT_DIR" ] || { echo "OPT_DIR '$OPT_DIR' is not a directory" >&2; exit 2; }
OPT_DIR=$(cd "$OPT_DIR" && pwd)     # absolute, before the cd below

cd "$(dirname "$0")/.." || exit 2
SRC=tests/programs
[ -d "$SRC" ] || { echo "no $SRC here" >&2; exit 2; }

NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
NVCC_FLAGS=${NVCC_FLAGS:-}
BIN=${BIN:-/tmp/gpgpu_opt_programs}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
LOG=$BIN/logs
[ "$RUN_ONLY" = 1 ] || rm -rf "$BIN/naive" "$BIN/opt"
rm -rf "$LOG"
mkdir -p "$BIN/naive" "$BIN/opt" "$LOG" || exit 2

if [ $# -gt 0 ]; then
    names=("$@")
else
    names=()
    for f in "$SRC"/*.cu; do [ -f "$f" ] && names+=("$(basename "$f" .cu)"); done
fi
[ ${#names[@]} -gt 0 ] || { echo "no programs in $SRC" >&2; exit 2; }

if [ "$DRY" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$LOG/gpu.txt" 2>&1
    sed 's/^/# /' "$LOG/gpu.txt" >&2
fi
"$NVCC" --version 2>&1 | tail -1 | sed 's/^/# /' >&2

# build SRC_FILE OUT_BIN LOGFILE -> 0 when built
build() {
    if [ "$RUN_ONLY" = 1 ]; then
        [ -x "$2" ] || { echo "no prebuilt $2" > "$3"; return 1; }
        return 0
    fi
    # shellcheck disable=SC2086
    "$NVCC" -O3 -arch="$ARCH" -I "$SRC" $NVCC_FLAGS -o "$2" "$1" > "$3" 2>&1
}

# median of the numbers on stdin (one a line); empty when there are none
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR > 0) printf "%.6f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_prog BINARY TAG -> sets R_TIME (median or "-") and R_CHECK
run_prog() {
    local bin=$1 tag=$2 r rc times="" bad=""
    for r in $(seq 1 "$RUNS"); do
        timeout "$RUN_TIMEOUT" "$bin" > "$LOG/$tag.run$r.log" 2>&1
        rc=$?
        local t
        t=$(grep -m1 -o 'GPU Runtime: *[0-9.eE+-]*' "$LOG/$tag.run$r.log" | sed 's/GPU Runtime: *//')
        [ -n "$t" ] && times+="$t"$'\n'
        if [ "$rc" -ne 0 ] && [ -z "$bad" ]; then
            if [ "$rc" -eq 124 ]; then bad="TIMEOUT"; else bad="FAIL (exit $rc)"; fi
        fi
        echo "#   $tag run $r: exit $rc, GPU Runtime ${t:-none}" >&2
    done
    R_TIME=$(printf '%s' "$times" | median)
    [ -n "$R_TIME" ] || R_TIME="-"
    R_CHECK=${bad:-ok}
}

table="| program | naive GPU time (s) | optimized GPU time (s) | speedup | naive check | optimized check |"
table+=$'\n'"|---|---|---|---|---|---|"
all_ok=1
for name in "${names[@]}"; do
    src="$SRC/$name.cu"
    opt="$OPT_DIR/$name.cu"
    n_time="-"; o_time="-"; speed="-"
    echo "# $name" >&2

    if [ ! -f "$src" ]; then
        n_check="no source"; all_ok=0
    elif build "$src" "$BIN/naive/$name" "$LOG/$name.naive.build.log"; then
        n_check="built"
    else
        n_check="build failed"; all_ok=0
        sed 's/^/#   /' "$LOG/$name.naive.build.log" | head -20 >&2
    fi

    if [ ! -f "$opt" ]; then
        o_check="missing"; all_ok=0
    elif build "$opt" "$BIN/opt/$name" "$LOG/$name.opt.build.log"; then
        o_check="built"
    else
        o_check="build failed"; all_ok=0
        sed 's/^/#   /' "$LOG/$name.opt.build.log" | head -20 >&2
    fi

    if [ "$DRY" = 0 ]; then
        if [ "$n_check" = built ]; then
            run_prog "$BIN/naive/$name" "$name.naive"; n_time=$R_TIME; n_check=$R_CHECK
            [ "$n_check" = ok ] || all_ok=0
        fi
        if [ "$o_check" = built ]; then
            run_prog "$BIN/opt/$name" "$name.opt"; o_time=$R_TIME; o_check=$R_CHECK
            [ "$o_check" = ok ] || all_ok=0
        fi
        if [ "$n_time" != "-" ] && [ "$o_time" != "-" ]; then
            speed=$(awk -v a="$n_time" -v b="$o_time" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
        fi
    fi
    table+=$'\n'"| $name | $n_time | $o_time | $speed | $n_check | $o_check |"
done

printf '%s\n' "$table" | tee "$LOG/table.md"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$LOG/table.md" "$OUT/table.md"
    mkdir -p "$OUT/logs" && cp "$LOG"/*.log "$LOG"/*.txt "$OUT/logs/" 2>/dev/null
fi
[ "$all_ok" = 1 ]
