#!/usr/bin/env python3
"""Rodinia's programs built with their own Makefiles, as written and through `gpgpu-opt nvcc`, run, checked
and timed on a GPU: the whole-program table of the nvcc drop-in. Two phases, since the GPU machine has nvcc
and python3 but not gpgpu-opt's packages:

    python3 bench/dropin_gpu.py prepare RODINIA_CHECKOUT BUNDLE    # here: gpgpu-opt installed
    python3 BUNDLE/dropin_gpu.py run BUNDLE [--runs N] [--build-only]  # on the GPU machine: nvcc, python3

`prepare` copies each program's part of the suite twice (BUNDLE/NAME/naive, BUNDLE/NAME/opt), builds the opt
copy with its Makefile and NVCC="gpgpu-opt nvcc" (the Makefile's own flags; the build must succeed here),
puts the files the drop-in compiled in place of the user's (GPGPU_OPT_NVCC_MANIFEST), removes what the build
made, writes the inputs the suite's data/ download would hold (corpus_kit/rodinia_data.py), and copies this
script into the bundle. `run` builds both copies with the same Makefile and plain nvcc, runs each RUNS times
(alternately), compares the first runs' output and written files (time lines dropped, numbers within 1e-3,
the exit statuses) and prints the table

    | program | files rewritten | naive (s) | optimized (s) | x naive | check |

(times: the median of the program's own timer where it prints one, else of the wall time). Exit status 0
when everything built and every program agreed. Third-party sources stay out of the repository: the bundle
goes where the GPU machine reads it: bench/generated/dropin (ignored), which the device tool carries.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

#: name, directory in the suite's cuda/, the command that builds it ($NVCC: the compiler), how to run it, and
#: its own timer (a regex whose first number is a time it prints; None: the wall time). Programs whose
#: Makefile builds with nvcc 13 as written (others name architectures it dropped: sm_20, sm_35).
PROGRAMS = [
    ("gaussian", "gaussian", 'make CC="$NVCC"', ["./gaussian", "-s", "1024"],
     r"Time for CUDA kernels:\s*([0-9.eE+-]+)"),
    ("nw", "nw", 'make CC="$NVCC"', ["./needle", "8192", "10"], None),
    ("pathfinder", "pathfinder", 'make CC="$NVCC"', ["./pathfinder", "100000", "1000", "20"], None),
    ("srad_v2", "srad/srad_v2", 'make CC="$NVCC"', ["./srad", "2048", "2048", "0", "127", "0", "127", "0.5", "10"],
     None),
    ("nn", "nn", 'make nn CC="$NVCC"', ["./nn", "filelist.txt", "-r", "5", "-lat", "30", "-lng", "90"], None),
]
#: What every program's Makefile includes from the suite.
SHARED = ("common", "cuda/util")
#: CUDA 13 removed calls the suite still makes (cudaThreadSynchronize): both builds include the renames.
COMPAT = "nvcc13_compat.h"
TIME_LINE = re.compile(r"time|runtime|elapsed|\bms\b|\bsec|seconds|GB/s|GFLOP|^Exec:|\btook\b|GPU Execution|"
                       r"\d s\b", re.IGNORECASE)
TOKEN = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z_]\w*|\S")
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


# -- here ---------------------------------------------------------------------------------------------------
def prepare(suite: str, bundle: str) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(bundle, exist_ok=True)
    shutil.copy(os.path.join(here, "corpus_kit", COMPAT), bundle)
    shutil.copy(os.path.abspath(__file__), os.path.join(bundle, "dropin_gpu.py"))
    env = dict(os.environ, NVCC_PREPEND_FLAGS=f"-include {os.path.abspath(os.path.join(bundle, COMPAT))}",
               GPGPU_OPT_CACHE=os.path.abspath(os.path.join(bundle, ".cache")))
    env["NVCC"] = f"{sys.executable} -m gpgpu_opt nvcc"
    failed = 0
    for name, directory, build, _, _ in PROGRAMS:
        naive, opt = (os.path.join(bundle, name, kind) for kind in ("naive", "opt"))
        for tree in (naive, opt):
            shutil.rmtree(tree, ignore_errors=True)
            _copy_suite_part(suite, directory, tree)
        scratch = os.path.join(bundle, name, "scratch")
        shutil.rmtree(scratch, ignore_errors=True)
        _copy_suite_part(suite, directory, scratch)
        manifest = os.path.abspath(os.path.join(bundle, name, "manifest.tsv"))
        if os.path.exists(manifest):
            os.remove(manifest)
        proc = subprocess.run(build, shell=True, cwd=os.path.join(scratch, "cuda", directory), capture_output=True,
                              text=True, env=dict(env, GPGPU_OPT_NVCC_MANIFEST=manifest))
        if proc.returncode != 0:
            print(f"{name}: the build through gpgpu-opt nvcc failed:\n{proc.stdout}{proc.stderr}", file=sys.stderr)
            failed += 1
            continue
        units = _apply_manifest(manifest, scratch, opt)
        _write_inputs(name, [naive, opt], directory)
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"{name}: {units} file(s) optimized")
        with open(os.path.join(bundle, name, "units"), "w") as fh:
            fh.write(f"{units}\n")
    shutil.rmtree(os.path.join(bundle, ".cache"), ignore_errors=True)   # the copies are in the opt trees now
    print(f"bundle in {bundle}; on the GPU machine: python3 {bundle}/dropin_gpu.py run {bundle}", file=sys.stderr)
    return 1 if failed else 0


def _copy_suite_part(suite: str, directory: str, tree: str) -> None:
    for part in (os.path.join("cuda", directory), *SHARED):
        source = os.path.join(suite, part)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(tree, part), symlinks=True)


def _apply_manifest(manifest: str, scratch: str, opt: str) -> int:
    """Each file the drop-in compiled in place of a file of the scratch tree, put in the opt tree's place."""
    if not os.path.exists(manifest):
        return 0
    replaced = set()
    with open(manifest, encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            copy, original = line.rstrip("\n").split("\t")
            relative = os.path.relpath(os.path.realpath(original), os.path.realpath(scratch))
            if relative.startswith(".."):
                continue        # a file outside the program's part of the suite (none is expected)
            shutil.copy(copy, os.path.join(opt, relative))
            replaced.add(relative)
    return len({r for r in replaced if r.endswith(".cu")})


def _write_inputs(name: str, trees: list[str], directory: str) -> None:
    if name != "nn":
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from corpus_kit.rodinia_data import hurricane_records

    for tree in trees:
        hurricane_records(os.path.join(tree, "cuda", directory))


# -- on the GPU machine -------------------------------------------------------------------------------------
def run(bundle: str, repeats: int, build_only: bool, timeout: float) -> int:
    env = dict(os.environ, NVCC=os.environ.get("NVCC", "nvcc"),
               NVCC_PREPEND_FLAGS=f"-include {os.path.abspath(os.path.join(bundle, COMPAT))}",
               CUDA_MODULE_LOADING=os.environ.get("CUDA_MODULE_LOADING", "EAGER"))
    rows, ok = [], True
    for name, directory, build, command, timer in PROGRAMS:
        trees = [os.path.join(bundle, name, kind, "cuda", directory) for kind in ("naive", "opt")]
        if not all(os.path.isdir(t) for t in trees):
            rows.append([name, "-", "-", "-", "-", "not prepared"])
            ok = False
            continue
        units = open(os.path.join(bundle, name, "units")).read().strip()
        built = [subprocess.run(build, shell=True, cwd=t, capture_output=True, text=True, env=env) for t in trees]
        if any(b.returncode for b in built):
            which = "naive" if built[0].returncode else "optimized"
            log = built[0] if built[0].returncode else built[1]
            print(f"{name}: {which} build failed:\n{log.stdout[-2000:]}{log.stderr[-2000:]}", file=sys.stderr)
            rows.append([name, units, "-", "-", "-", f"{which} build failed"])
            ok = False
            continue
        if build_only:
            rows.append([name, units, "-", "-", "-", "built"])
            continue
        runs = {0: [], 1: []}
        for _ in range(repeats):
            for k, tree in enumerate(trees):
                runs[k].append(_run_once(tree, command, env, timeout, timer))
        check = _check(runs[0][0], runs[1][0])
        ok &= check == "ok"
        naive_t, opt_t = (statistics.median(r[3] for r in runs[k]) for k in (0, 1))
        rows.append([name, units, f"{naive_t:.4f}", f"{opt_t:.4f}", f"{naive_t / opt_t:.2f}" if opt_t else "-", check])
    print("| program | files rewritten | naive (s) | optimized (s) | x naive | check |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0 if ok else 1


def _run_once(tree: str, command: list[str], env: dict, timeout: float, timer: str | None):
    before = _snapshot(tree)
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, errors="replace", env=env,
                              timeout=timeout)
        status, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        status, out = 124, "timed out"
    wall = time.perf_counter() - started
    written = {p: open(os.path.join(tree, p), "rb").read() for p, s in _snapshot(tree).items() if before.get(p) != s}
    own = [float(m.group(1)) for m in re.finditer(timer, out)] if timer else []
    return status, out, written, sum(own) if own else wall


def _snapshot(tree: str) -> dict:
    found = {}
    for root, _, names in os.walk(tree):
        for name in names:
            path = os.path.join(root, name)
            stat = os.stat(path)
            found[os.path.relpath(path, tree)] = (stat.st_size, stat.st_mtime_ns)
    return found


def _check(naive, opt) -> str:
    if naive[0] != 0:
        return f"the program as written fails (exit {naive[0]})"
    if opt[0] != naive[0]:
        return f"exit status {opt[0]}, naive {naive[0]}"
    problem = _text_difference(naive[1], opt[1], "output")
    for path in sorted(set(naive[2]) | set(opt[2])):
        if problem:
            break
        if path not in naive[2] or path not in opt[2]:
            problem = f"{path}: written by one build only"
        else:
            try:
                problem = _text_difference(naive[2][path].decode(), opt[2][path].decode(), path)
            except UnicodeDecodeError:
                problem = None if naive[2][path] == opt[2][path] else f"{path}: binary files differ"
    return problem or "ok"


def _text_difference(a: str, b: str, what: str) -> str | None:
    x = TOKEN.findall("\n".join(l for l in a.splitlines() if not TIME_LINE.search(l)))
    y = TOKEN.findall("\n".join(l for l in b.splitlines() if not TIME_LINE.search(l)))
    for i, (p, q) in enumerate(zip(x, y)):
        if p != q and not (NUMBER.match(p) and NUMBER.match(q)
                           and abs(float(p) - float(q)) <= max(1e-5, 1e-3 * max(abs(float(p)), abs(float(q))))):
            return f"{what}: token {i}: naive '{p}', optimized '{q}'"
    return None if len(x) == len(y) else f"{what}: {len(x)} tokens, optimized {len(y)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    phases = parser.add_subparsers(dest="phase", required=True)
    here = phases.add_parser("prepare", help="build through the drop-in here and write the bundle")
    here.add_argument("suite", metavar="RODINIA_CHECKOUT")
    here.add_argument("bundle", metavar="BUNDLE")
    there = phases.add_parser("run", help="build both versions with nvcc, run, check and time (GPU machine)")
    there.add_argument("bundle", metavar="BUNDLE")
    there.add_argument("--runs", type=int, default=5)
    there.add_argument("--build-only", action="store_true")
    there.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.phase == "prepare":
        return prepare(args.suite, args.bundle)
    return run(args.bundle, args.runs, args.build_only, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
