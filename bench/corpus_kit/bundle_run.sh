#!/usr/bin/env bash
# Build and time the naive and the optimized build of every program in this bundle (written by
# bench/corpus_gpu.py --emit), on a GPU machine with nvcc and bash (python3 for the output check if present).
#
#   bash run.sh [--build-only] [--runs N] [NAME ...]
#
# programs.tsv lists, per program: its name, the build directory inside NAME/naive and NAME/opt, the sources
# and flags nvcc gets, the run arguments, the kernels transformed, a note ("skip: ..." when it cannot run
# here, e.g. it needs data the sources lack and the bundle does not generate; '@DATA@' in the arguments is the
# bundle's data/ directory), the program's own timer (a grep -E pattern whose first
# number is a time it prints) and its time limit per run where it needs more than RUN_TIMEOUT (cfd's large
# input); '-' stands for an empty field. Every build, `$NVCC -O3 -arch=$ARCH -include
# nvcc13_compat.h FLAGS SOURCES -lm`, runs first, JOBS at a time. Each binary then runs RUNS times (default 5)
# in its build directory; its time is the median of its own timer's values (summed within a run) when it
# prints them, else of the runs' wall time. The check compares the first naive run's output (time lines
# dropped, numbers within 1e-3) and the files it wrote with the optimized run's (compare_outputs.py; `cmp`
# without python3), and both exit statuses. Past BUDGET seconds from the start, the programs left are listed
# as not run, so that the whole stays within the time given.
#
# Inputs too large to carry (data/generate.sh, e.g. cfd's 2M-element domain for NAME_large) are generated
# after the builds, with python3.
# Environment: NVCC (nvcc), ARCH (sm_90), RUN_TIMEOUT (seconds per run, 20), JOBS (parallel builds, the
# number of cores), BUDGET (seconds, 420). Logs: NAME/*.log, NAME/*.out.
# Output: progress on stderr; on stdout the table | program | kernels transformed | x naive | check |
# (x naive: naive time / optimized time, above 1 is faster). Exit status 0 when everything built (and, unless
# --build-only, every program that ran agreed); 1 otherwise; 2 for a usage error.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
RUN_TIMEOUT=${RUN_TIMEOUT:-20}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET=${BUDGET:-420}
START=$(date +%s)
RUNS=5
# headers the suites expect installed with the toolkit (corpus_gpu.py --system-include): system/*/
SYSTEM_FLAGS=""
for d in "$HERE"/system/*/; do [ -d "$d" ] && SYSTEM_FLAGS="$SYSTEM_FLAGS -isystem ${d%/}"; done
# Modules load when the program starts, not at a kernel's first launch: the programs time single launches
# with events, which lazy loading (CUDA 12's default) would fill with the module's load.
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
BUILD_ONLY=0
ONLY=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build-only) BUILD_ONLY=1; shift ;;
        --runs) [ $# -ge 2 ] || exit 2; RUNS=$2; shift 2 ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) ONLY+=("$1"); shift ;;
    esac
done

STATUS=0

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print ""}'; }

build() {   # build NAME VARIANT BUILDDIR SOURCES FLAGS
    local name=$1 variant=$2 dir=$3 sources=$4 flags=$5
    ( cd "$HERE/$name/$variant/$dir" && \
      $NVCC -O3 -arch="$ARCH" -include "$HERE/nvcc13_compat.h" $SYSTEM_FLAGS $flags $sources -o "$HERE/$name/$variant.bin" -lm ) \
        > "$HERE/$name/$variant.build.log" 2>&1
}

own_time() {   # own_time OUTFILE TIMER -> the sum of the timer's values in the output, or nothing
    [ -n "$2" ] || return 0
    grep -oE "$2" "$1" | sed -E 's/^[^0-9]*([0-9]+[.]?[0-9]*([eE][-+]?[0-9]+)?).*$/\1/' | awk '{s += $1} END {if (NR) print s}'
}

run_variant() {   # run_variant NAME VARIANT BUILDDIR ARGS TIMER [LIMIT] -> prints the median time, leaves outputs
    local name=$1 variant=$2 dir=$3 args=$4 timer=$5 limit=${6:-$RUN_TIMEOUT} r times=() wall start end status own
    local work="$HERE/$name/$variant/$dir"
    local before="$HERE/$name/$variant.before"
    ls -A "$work" > "$before"
    for r in $(seq 1 "$RUNS"); do
        start=$(date +%s.%N)
        ( cd "$work" && timeout "$limit" "$HERE/$name/$variant.bin" $args < /dev/null ) > "$HERE/$name/$variant.$r.out" 2>&1
        status=$?
        end=$(date +%s.%N)
        echo "$status" > "$HERE/$name/$variant.$r.status"
        wall=$(echo "$end - $start" | bc -l 2>/dev/null || awk "BEGIN {print $end - $start}")
        own=$(own_time "$HERE/$name/$variant.$r.out" "${timer:-GPU Runtime: *[0-9.eE+-]+}")
        times+=("${own:-$wall}")
        if [ "$r" = 1 ]; then   # the files the first run wrote, kept for the check
            mkdir -p "$HERE/$name/$variant.files"
            ls -A "$work" | grep -vxF -f "$before" | while read -r f; do
                [ -f "$work/$f" ] && cp "$work/$f" "$HERE/$name/$variant.files/"
            done
        fi
    done
    printf '%s\n' "${times[@]}" | median
}

check() {   # check NAME NOTE -> prints ok / the difference
    local name=$1 note=$2 n o
    n=$(cat "$HERE/$name/naive.1.status"); o=$(cat "$HERE/$name/opt.1.status")
    if [ "$n" != 0 ] || [ "$o" != 0 ]; then echo "exit status naive $n, optimized $o"; return 1; fi
    case "$note" in nondeterministic:*) echo "exit 0 (output ${note#nondeterministic: })"; return 0 ;; esac
    if command -v python3 > /dev/null; then
        python3 "$HERE/compare_outputs.py" "$HERE/$name/naive.1.out" "$HERE/$name/opt.1.out" \
            "$HERE/$name/naive.files" "$HERE/$name/opt.files"
    else
        cmp -s "$HERE/$name/naive.1.out" "$HERE/$name/opt.1.out" && echo "ok (identical output)" \
            || { echo "outputs differ (no python3 for a tolerant compare)"; return 1; }
    fi
}

selected() { [ ${#ONLY[@]} -eq 0 ] || printf '%s\n' "${ONLY[@]}" | grep -qxF "$1"; }

programs() {   # the selected rows of programs.tsv (fields stay '-' when empty: read would merge two tabs)
    while IFS=$'\t' read -r name rest; do
        [ "$name" = name ] && continue
        selected "$name" && printf '%s\t%s\n' "$name" "$rest"
    done < "$HERE/programs.tsv"
}

undash() { [ "$1" = - ] || printf '%s' "$1"; }

# 1. every build, JOBS at a time (a build's status lands in NAME/VARIANT.built)
running=0
while IFS=$'\t' read -r name dir sources flags args transformed note timer limit; do
    flags=$(undash "$flags")
    for variant in naive opt; do
        ( build "$name" "$variant" "$dir" "$sources" "$flags"; echo $? > "$HERE/$name/$variant.built" ) &
        running=$((running + 1))
        if [ "$running" -ge "$JOBS" ]; then wait -n 2>/dev/null || wait; running=$((running - 1)); fi
    done
done < <(programs)
wait
echo "built in $(( $(date +%s) - START )) s" >&2

# 2. inputs too large to carry, generated here (corpus_kit/rodinia_data.py's LARGE runs; python3 needed)
if [ $BUILD_ONLY = 0 ] && [ -f "$HERE/data/generate.sh" ]; then
    bash "$HERE/data/generate.sh" >&2 || echo "data/generate.sh failed: the runs that need its files fail" >&2
fi

# 3. runs, one program at a time, within BUDGET
echo "| program | kernels transformed | x naive | check |"
echo "|---|---|---|---|"
while IFS=$'\t' read -r name dir sources flags args transformed note timer limit; do
    args=$(undash "$args"); note=$(undash "$note"); timer=$(undash "$timer")
    args=${args//@DATA@/$HERE/data}     # inputs the bundle generated (corpus_kit/rodinia_data.py)
    echo "$name" >&2
    if [ "$(cat "$HERE/$name/naive.built")" != 0 ] || [ "$(cat "$HERE/$name/opt.built")" != 0 ]; then
        echo "| $name | $transformed | - | BUILD FAILED (see $name/*.build.log) |"; STATUS=1; continue
    fi
    if [ $BUILD_ONLY = 1 ]; then echo "| $name | $transformed | - | built |"; continue; fi
    case "$note" in skip:*) echo "| $name | $transformed | - | not run: ${note#skip: } |"; continue ;; esac
    if [ $(( $(date +%s) - START )) -ge "$BUDGET" ]; then
        echo "| $name | $transformed | - | not run: past the time budget (${BUDGET} s) |"; continue
    fi
    limit=$(undash "$limit")
    tn=$(run_variant "$name" naive "$dir" "$args" "$timer" "$limit")
    to=$(run_variant "$name" opt "$dir" "$args" "$timer" "$limit")
    verdict=$(check "$name" "$note") || STATUS=1
    ratio=$(awk "BEGIN {if ($to > 0) printf \"%.2f\", $tn / $to; else print \"-\"}")
    echo "| $name | $transformed | $ratio (naive $tn, optimized $to${timer:+, own timer}) | $verdict |"
done < <(programs)
echo "total $(( $(date +%s) - START )) s" >&2
exit $STATUS
