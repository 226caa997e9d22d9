#!/usr/bin/env python3
"""Generate the GPU benchmark harnesses (naive vs optimized vs library reference) into bench/generated/.

Run here (needs gpgpu_opt's Python dependencies); then, on a machine with a GPU and nvcc, run
`bash bench/run_all.sh`, which builds every bench/generated/*.cu with `nvcc -O3 -arch=sm_90 -lcublas`, runs
them and prints a table. The GPU machine needs nvcc (and cuBLAS) only, no Python packages.

    python3 bench/gpu_bench.py [--target sm_90] [--passes LIST] [--runs 30] [--out bench/generated]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpgpu_opt.diagnostics import Diagnostics  # noqa: E402
from gpgpu_opt.frontend import load_program  # noqa: E402
from gpgpu_opt.harness import generate_harness  # noqa: E402
from gpgpu_opt.passes import parse_pass_list  # noqa: E402
from gpgpu_opt.pipeline import compile_program  # noqa: E402
from gpgpu_opt.targets import get_target  # noqa: E402

#: name -> (input file (or a path from the root), kernel, sizes, global space, flops, reference,
#:          #define overrides written into a copy)
BENCHMARKS = {
    "mv": ("mv.cu", "mv", {"rows": 16384, "cols": 16384}, (16384, 1), 2.0 * 16384 * 16384, "sgemv_t", {}),
    "tmv": ("tmv.cu", "tmv", {}, (16384, 1), 2.0 * 16384 * 16384, "sgemv_n",
            {"WIDTH_A": 16384, "HEIGHT_A": 16384}),
    "transpose": ("transpose.cu", "transpose", {"rows": 8192, "cols": 8192}, (8192, 8192), 0.0, "copy", {}),
    "mm": ("mm.cu", "mm", {"n": 4096}, (4096, 4096), 2.0 * 4096 ** 3, "sgemm", {}),
    "vv": ("vv.cu", "vv", {}, (4096, 4096), 2.0 * 4096 * 4096, "sger", {"WIDTH_C": 4096, "HEIGHT_C": 4096}),
    # The benchmark-suite gemm (C = alpha A B + beta C in place, plain pointers; PolyBench), at mm's size.
    "gemm": ("tests/programs/gemm.cu", "gemm_kernel", {}, (4096, 4096), 2.0 * 4096 ** 3, None,
             {"NI": 4096, "NJ": 4096, "NK": 4096}),
    # The paper's form as a user launches it: 1024 blocks of 256 threads, each thread a segment of 2^26 / 2^18.
    "reduction": ("reduction.cu", "reduction", {"n": 1 << 26, "segSize": 256}, (1 << 18, 1), float(1 << 26),
                  "cub_sum", {}),
    # The atomicAdd form, a whole program launching (n + 255) / 256 blocks of 256.
    "sum_atomic": ("tests/programs/sum_atomic.cu", "sum_kernel", {"n": 1 << 26}, (1 << 26, 1), float(1 << 26),
                   "cub_sum", {}),
}


def with_defines(text: str, overrides: dict[str, int]) -> str:
    """The file's text with `#define NAME value` lines given new values (the file defines them itself,
    so -D cannot override them)."""
    for name, value in overrides.items():
        text, count = re.subn(rf"^(\s*#\s*define\s+{name}\s+)\S+", rf"\g<1>{value}", text, flags=re.MULTILINE)
        if count != 1:
            raise SystemExit(f"error: expected one '#define {name}' line, found {count}")
    return text


def load(path: Path, overrides: dict[str, int]):
    if not overrides:
        return load_program(str(path), include_dirs=[str(path.parent)])
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(with_defines(path.read_text(), overrides))
        program = load_program(str(copy), include_dirs=[str(path.parent)])
    program.path = f"{path.relative_to(ROOT)} with " + ", ".join(f"{k}={v}" for k, v in overrides.items())
    return program


def generate(name: str, target: str, passes: str | None, runs: int) -> tuple[str, list[str]]:
    file, kernel, sizes, space, flops, reference, overrides = BENCHMARKS[name]
    path = ROOT / file if "/" in file else ROOT / "inputs" / file  # an input, or a whole program of the tests
    program = load(path, overrides)
    if not overrides:
        program.path = str(path.relative_to(ROOT))
    diagnostics = Diagnostics(quiet=True)
    result = compile_program(program, get_target(target), parse_pass_list(passes), diagnostics)
    text = generate_harness(program, result, kernel, sizes, space, flops=flops, reference=reference, runs=runs)
    kr = next(k for k in result.kernels if k.naive.name == kernel)
    notes = [str(n) for n in diagnostics.notes if n.kernel in (None, kernel)]
    return text, [f"passes run: {', '.join(kr.passes_run) or 'none'}; rewritten: {kr.rewritten}"] + notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="sm_90")
    parser.add_argument("--passes", default=None, help="comma list of passes, or 'none' (default: all available)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per variant (median)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "generated"))
    parser.add_argument("benchmarks", nargs="*", default=list(BENCHMARKS), help=f"of {', '.join(BENCHMARKS)}")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.benchmarks:
        if name not in BENCHMARKS:
            parser.error(f"unknown benchmark '{name}' (known: {', '.join(BENCHMARKS)})")
        text, notes = generate(name, args.target, args.passes, args.runs)
        path = Path(args.out) / f"{name}.cu"
        path.write_text(text)
        print(f"wrote {path}")
        for line in notes:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
