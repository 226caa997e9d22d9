#!/usr/bin/env python3
"""Time the programs a corpus run transformed on a GPU machine that has nvcc and bash but no Python packages.

    python bench/corpus_gpu.py --emit DIR RUN.json [RUN.json ...]

RUN.json is what `python bench/corpus.py SUITE --json RUN.json --out OUTS` wrote (OUTS must still hold the
optimized files). For every executable with a kernel transformed, DIR gets its sources twice (NAME/naive and
NAME/opt, the optimized files in place of the inputs, the include directories it needs beside them), a line
of DIR/programs.tsv and the scripts. Then, on the GPU machine:

    bash DIR/run.sh                 # build both (-O3 -arch=sm_90) in parallel, run 5 times each, check, table
    bash DIR/run.sh --build-only    # nvcc only, no GPU needed

The table: program, kernels transformed, x naive (naive time / optimized time: the median of the program's
own timer when corpus_kit/rodinia_runs.py names one or it prints "GPU Runtime" lines, else of the wall time),
check (the outputs agree: printed results and written files, numbers within 1e-3). The runs stop starting
new programs past a time budget (BUDGET seconds, 420), so that the whole takes under 8 minutes. Rodinia programs
that make their own input run with the arguments of corpus_kit/rodinia_runs.py; those that read data the
sources lack are listed, not run. The optimized tree takes every file the compiler changed (a kernel of an
included file is rewritten in that file).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus_kit import bundle  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--emit", required=True, metavar="DIR", help="write the bundle here")
    parser.add_argument("runs", nargs="+", metavar="RUN.json", help="corpus runs (bench/corpus.py --json)")
    parser.add_argument("--system-include", action="append", default=[], metavar="DIR",
                        help="headers the suites expect installed (as for corpus.py), copied into the bundle")
    args = parser.parse_args(argv)
    runs = []
    for path in args.runs:
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        if not any("units" in row for row in run["rows"]):
            parser.error(f"{path}: written by an older bench/corpus.py (no build units); run it again")
        runs.append(run)
    written = bundle.write(runs, args.emit, tuple(args.system_include))
    for entry in written:
        print(f"{entry['name']}: {entry['transformed']} kernel(s) transformed"
              + (f" ({entry['note']})" if entry["note"] else ""))
    print(f"{len(written)} program(s) in {args.emit}; run `bash {os.path.join(args.emit, 'run.sh')}` on the GPU "
          "machine", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
