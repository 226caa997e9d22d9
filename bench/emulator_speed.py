"""A fixed workload for the emulator's speed (compile's own check is mostly emulation): every inputs/*.cu
compiled for sm_90 and g80, and three of tests/programs at their small sizes, all in this process. Prints
the CPU time (time.process_time) of each compile and the total, so a change can be measured before/after.

    python bench/emulator_speed.py            # the whole workload
    python bench/emulator_speed.py --profile  # and the cProfile top functions by self time
    python bench/emulator_speed.py conv.cu    # only the named inputs
"""
import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cli_in_process import run_cli  # noqa: E402
from tests.programs.test_programs import SMALL  # noqa: E402

TARGETS = ("sm_90", "g80")
PROGRAMS = ("gemm.cu", "bicg.cu", "2DConvolution.cu")


def _jobs(only):
    """(label, cwd, compile arguments without -o) of the workload, in a fixed order."""
    for path in sorted((ROOT / "inputs").glob("*.cu")):
        if only and path.name not in only:
            continue
        for target in TARGETS:
            yield f"{path.name}/{target}", ROOT, [f"inputs/{path.name}", "--target", target]
    for name in PROGRAMS:
        if only and name not in only:
            continue
        defines = [f"-D{d}" for d in SMALL.get(name, [])]
        yield f"programs/{name}", ROOT / "tests" / "programs", [name, *defines]


def run(only, out: Path) -> float:
    total = 0.0
    for label, cwd, args in _jobs(only):
        start = time.process_time()
        proc = run_cli("compile", *args, "-o", str(out / label.replace("/", "_")), "--no-resource-usage",
                       cwd=cwd)
        spent = time.process_time() - start
        total += spent
        print(f"{label:32s} {spent:7.2f} s  exit {proc.returncode}", flush=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
    print(f"{'total CPU':32s} {total:7.2f} s")
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("only", nargs="*", help="input or program file names (default: all)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.profile:
            run(args.only, Path(tmp))
            return
        profiler = cProfile.Profile()
        profiler.runcall(run, args.only, Path(tmp))
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
