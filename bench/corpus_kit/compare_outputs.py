#!/usr/bin/env python3
"""Do two runs of a program (naive build, optimized build) give the same results? Standard library only: it
is copied into the bundle bench/corpus_gpu.py writes and runs on the GPU machine.

    python3 compare_outputs.py NAIVE.out OPT.out [NAIVE_FILES_DIR OPT_FILES_DIR]

Lines that report time are dropped (they differ by design); the rest is compared token by token, numbers
within a relative 1e-3 (absolute 1e-5 near zero: floating-point sums reassociate), anything else exactly.
Files the runs wrote are compared the same way (binary files byte for byte). Prints 'ok' or the first
difference; exit status 0 when they agree."""
import math
import os
import re
import sys

TIME_LINE = re.compile(r"time|runtime|elapsed|\bms\b|\bsec|seconds|GB/s|GFLOP|^Exec:|\btook\b|GPU Execution|"
                       r"\d s\b",  # '0.001348879654 s, 0.28 % : SETUP VARIABLES' (srad_v1's stage times)
                       re.IGNORECASE)
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(nan|inf)$", re.IGNORECASE)


def tokens(text):
    kept = [line for line in text.splitlines() if not TIME_LINE.search(line)]
    return re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z_]\w*|\S", "\n".join(kept))


def same_token(a, b):
    if a == b:
        return True
    if NUMBER.match(a) and NUMBER.match(b):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return abs(x - y) <= max(1e-5, 1e-3 * max(abs(x), abs(y)))
    return False


def compare_text(naive, opt, what):
    a, b = tokens(naive), tokens(opt)
    for i, (x, y) in enumerate(zip(a, b)):
        if not same_token(x, y):
            return f"{what}: token {i}: naive '{x}', optimized '{y}'"
    if len(a) != len(b):
        return f"{what}: naive has {len(a)} tokens, optimized {len(b)}"
    return None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def compare_files(naive_dir, opt_dir):
    names = sorted(set(os.listdir(naive_dir)) | set(os.listdir(opt_dir)))
    for name in names:
        a, b = os.path.join(naive_dir, name), os.path.join(opt_dir, name)
        if not (os.path.isfile(a) and os.path.isfile(b)):
            return f"{name}: written by one build only"
        x, y = read(a), read(b)
        try:
            problem = compare_text(x.decode("utf-8"), y.decode("utf-8"), name)
        except UnicodeDecodeError:
            problem = None if x == y else f"{name}: binary files differ"
        if problem:
            return problem
    return None


def main(argv):
    if len(argv) not in (3, 5):
        print(__doc__, file=sys.stderr)
        return 2
    problem = compare_text(read(argv[1]).decode("utf-8", "replace"), read(argv[2]).decode("utf-8", "replace"),
                           "stdout")
    if problem is None and len(argv) == 5:
        problem = compare_files(argv[3], argv[4])
    print(problem or "ok")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
