#!/usr/bin/env python3
"""Thin wrapper over `gpgpu-opt bench --emit`: writes the benchmark harnesses and a run.sh into bench/generated/.
The benchmark table itself is gpgpu_opt/gpu/benchmarks.py. On a GPU machine (nvcc, no Python needed) run
`bash bench/run_all.sh`, then here `gpgpu-opt bench --from-results bench/generated/results`.

    python3 bench/gpu_bench.py [--target sm_90] [--passes LIST] [--reps 30] [NAME ...]
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpgpu_opt.cli import app  # noqa: E402

if __name__ == "__main__":
    sys.argv = ["gpgpu-opt", "bench", "--emit", os.environ.get("BENCH_OUT", str(ROOT / "bench" / "generated")),
                *sys.argv[1:]]
    app()
