#!/usr/bin/env python3
"""Compile every program of a fetched CUDA suite with its own build flags and print what gpgpu-opt made of it.

    python bench/corpus.py SUITE_DIR [--suite rodinia|cuda-samples|files] [--json OUT] [--out DIR] [--nvcc]
                                     [--only NAME ...] [--timeout S] [--target T] [--no-strict]

SUITE_DIR is a Rodinia checkout (its `cuda/<program>/` directories, or the `cuda/` directory itself),
NVIDIA's cuda-samples (its `Samples/<category>/<program>/`), or with `--suite files` a directory whose `.cu`
files and subdirectories are each a program with no build file (tests/programs/cxx, our own C++ corpus). For each program the build files are read as text
(bench/corpus_kit/buildfiles.py says what is understood) for the `.cu` files nvcc compiles and their `-I`/`-D`
flags; each main file (one no other compiled file includes) goes through `gpgpu-opt compile MAIN -o OUTDIR/` in
a subprocess (a directory output: kernels of included files are rewritten in their own files' copies),
strict (an internal error is exit 3, not a rollback), with a timeout. The kernels are counted from the source
text, per file of the program: those in the main file and the user files it includes, naive-style ones (no
`__shared__`, no `__syncthreads`) apart; a kernel is transformed when the report says so for that file.

Output: a markdown table (program, files, kernels found, naive-style, transformed, passed through, result), then
the totals by cause: the first error line of each rejected file and the notes of each passed-through kernel,
sorted into causes (bench/corpus_kit/causes.py). A traceback or an internal error is never counted as ok: they
are listed loudly at the end, and the exit status is 1 when any occurred. `--nvcc` also builds the inputs and
the output trees with nvcc -arch=sm_90 and the same flags, to tell the compiler's failures from the program's: a
build unit with a main() (in a `.cu` main file or a host file) is linked whole, its host `.c`/`.cpp` files too
(which catches a kernel whose definition no longer matches its prototype), first as written and then with each
main file replaced by its output copy; other units, or one whose input does not link, are compiled with `-c`
file by file, an output with the output tree's copies of the `-I` directories first. corpus_kit/nvcc13_compat.h
is force-included in both (renames of calls CUDA 13 removed, such as cudaThreadSynchronize; `--no-compat` leaves
it out); no GPU is needed. An output that does not build counts as the compiler's failure only where its input
builds. `--out DIR` keeps the outputs, reports and logs (DIR/<program>/); `--json OUT` writes every row and the
totals (rewritten after each program, `complete` false until the end);
`python bench/corpus.py --summary OUT.json` prints its table again, causes sorted by the current rules.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus_kit import table                                     # noqa: E402
from corpus_kit.buildfiles import BuildUnit, build_units         # noqa: E402
from corpus_kit.causes import error_context                      # noqa: E402
from corpus_kit.runner import nvcc_builds, output_include_dirs, run_compile           # noqa: E402
from corpus_kit.sources import (defines_main, include_closure, linked_host_files, main_files,  # noqa: E402
                                program_kernels)

SKIPPED_DIRS = {"util", "common", "Common", "data", "bin"}


def detect_suite(suite_dir: str) -> str:
    return "cuda-samples" if os.path.isdir(os.path.join(suite_dir, "Samples")) else "rodinia"


def programs(suite_dir: str, suite: str) -> list[tuple[str, str]]:
    """(name, directory) of every program of the suite that has a `.cu` file."""
    found = []
    if suite == "files":
        return [(p, os.path.join(suite_dir, p)) for p in sorted(os.listdir(suite_dir))
                if p.endswith(".cu") or (os.path.isdir(os.path.join(suite_dir, p)) and _has_cu(os.path.join(suite_dir, p)))]
    if suite == "cuda-samples":
        root = os.path.join(suite_dir, "Samples") if os.path.isdir(os.path.join(suite_dir, "Samples")) else suite_dir
        for category in sorted(os.listdir(root)):
            cat_dir = os.path.join(root, category)
            if os.path.isdir(cat_dir):
                found += [(f"{category}/{p}", os.path.join(cat_dir, p)) for p in sorted(os.listdir(cat_dir))]
    else:
        root = os.path.join(suite_dir, "cuda") if os.path.isdir(os.path.join(suite_dir, "cuda")) else suite_dir
        found = [(p, os.path.join(root, p)) for p in sorted(os.listdir(root))]
    return [(name, d) for name, d in found
            if os.path.isdir(d) and os.path.basename(d) not in SKIPPED_DIRS and _has_cu(d)]


def _has_cu(directory: str) -> bool:
    return any(f.endswith(".cu") for _, _, files in os.walk(directory) for f in files)


def run_program(name: str, directory: str, out_dir: str, args) -> dict:
    """One row: every main file of every build unit compiled, kernels counted, outcomes kept."""
    row = {"program": name, "directory": os.path.abspath(directory), "files": [], "build_files": [],
           "units": []}
    units = [BuildUnit(None, os.path.dirname(os.path.abspath(directory)), [os.path.abspath(directory)])] \
        if os.path.isfile(directory) else build_units(directory)
    for unit in units:
        row["build_files"].append(os.path.relpath(unit.build_file, directory) if unit.build_file else None)
        sources = main_files(unit.cu_files, unit.include_dirs)
        unit_row = {"directory": unit.directory, "main_files": sources,
                    "host_files": linked_host_files(unit.host_files, sources, unit.include_dirs),
                    "include_dirs": unit.include_dirs, "defines": unit.defines}
        row["units"].append(unit_row)
        entries = [run_file(source, unit, os.path.join(out_dir, name.replace("/", "_")), args) for source in sources]
        if args.nvcc and entries:
            check_builds(unit, unit_row, entries, args)
        row["files"] += entries
    row["kernels_by_file"] = table.kernels_by_file(row)
    return row


def run_file(source: str, unit, out_dir: str, args) -> dict:
    kernels = program_kernels(source, unit.include_dirs)
    outcome = run_compile(source, out_dir, unit.include_dirs, unit.defines, args.target, args.timeout,
                          strict=not args.no_strict)
    entry = {"file": os.path.relpath(source, unit.directory), "path": source, "include_dirs": unit.include_dirs,
             "defines": unit.defines, "missing_include_dirs": unit.missing_include_dirs,
             "kernels": [{"name": k.name, "file": os.path.relpath(k.file, unit.directory), "path": k.file,
                          "line": k.line, "end_line": k.end_line, "naive_style": k.naive_style,
                          "template": k.template} for k in kernels],
             "result": outcome.result, "first_line": outcome.first_line.replace(args.suite_root + os.sep, ""),
             "context": error_context(outcome.first_line, include_closure(source, unit.include_dirs)), "exit_status": outcome.exit_status,
             "reported": outcome.reported, "transformed": outcome.transformed,
             "transformed_at": outcome.transformed_at, "dispatched": outcome.dispatched,
             "passed_through": outcome.passed_through,
             "notes": outcome.notes, "seconds": round(outcome.seconds, 1), "output": outcome.output,
             "written": outcome.written, "changed": outcome.changed}
    print(f"  {entry['file']}: {outcome.result} {outcome.first_line[:100]}", file=sys.stderr, flush=True)
    return entry


def check_builds(unit, unit_row: dict, entries: list[dict], args) -> None:
    """nvcc on the inputs and on the output trees, with the unit's flags. A unit with a main() (in a `.cu`
    main file or a host file it links) is linked whole, the input files and then the same with each main
    file replaced by its output copy (which catches a kernel whose definition no longer matches its
    prototype); otherwise, or where the input does not link (a host file needing flags not read), each main
    file is compiled with -c, its output with the output tree's copies of the `-I` directories first."""
    build = {"compat": not args.no_compat, "system_dirs": tuple(args.system_include)}
    host = unit_row["host_files"]
    if any(defines_main(p) for p in [e["path"] for e in entries] + host):
        linked = nvcc_builds([e["path"] for e in entries] + host, unit.include_dirs, unit.defines,
                             unit.directory, link=True, **build)
        unit_row["nvcc_link_input"] = linked
        if linked[0]:
            outputs = [e["output"] or e["path"] for e in entries]
            written = {k: v for e in entries for k, v in e["written"].items()}
            out_dirs = output_include_dirs(written, unit.include_dirs)
            out_cwd = os.path.dirname(outputs[0])
            result = nvcc_builds(outputs + host, out_dirs, unit.defines, out_cwd, link=True, **build)
            unit_row["nvcc_link_output"] = result
            for e in entries:
                e["nvcc_input"], e["nvcc_link"] = linked, True
                if e["output"]:
                    e["nvcc_output"] = result
            return
    for e in entries:
        e["nvcc_input"] = nvcc_builds(e["path"], unit.include_dirs, unit.defines, os.path.dirname(e["path"]),
                                      **build)
        if e["output"]:
            e["nvcc_output"] = nvcc_builds(e["output"], output_include_dirs(e["written"], unit.include_dirs),
                                           unit.defines, os.path.dirname(e["output"]), **build)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite_dir")
    parser.add_argument("--suite", choices=("rodinia", "cuda-samples", "files"))
    parser.add_argument("--json", help="write the rows and totals here")
    parser.add_argument("--out", help="keep outputs, reports and logs here (default: a temporary directory)")
    parser.add_argument("--nvcc", action="store_true", help="build each input and output with nvcc -c")
    parser.add_argument("--no-compat", action="store_true",
                        help="do not force-include corpus_kit/nvcc13_compat.h in the nvcc builds")
    parser.add_argument("--system-include", action="append", default=[], metavar="DIR",
                        help="headers the suite expects installed with the toolkit, for nvcc (-isystem; repeatable): "
                             "Rodinia's cfd wants the CUDA samples' Common directory (helper_cuda.h)")
    parser.add_argument("--only", action="append", default=[], help="program name or prefix (repeatable)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per compile (default 300)")
    parser.add_argument("--target", default="sm_90")
    parser.add_argument("--no-strict", action="store_true", help="let internal errors roll back (not strict)")
    parser.add_argument("--summary", action="store_true",
                        help="SUITE_DIR is a --json file: print its table again (the causes as sorted now)")
    args = parser.parse_args(argv)
    if args.summary:
        return print_summary(args.suite_dir, args.nvcc)
    if not os.path.isdir(args.suite_dir):
        parser.error(f"{args.suite_dir}: not a directory")
    suite = args.suite or detect_suite(args.suite_dir)
    args.suite_root = args.suite_dir = os.path.abspath(args.suite_dir)
    out_dir = os.path.abspath(args.out or tempfile.mkdtemp(prefix="gpgpu-opt-corpus-"))  # compiles run elsewhere
    rows = []
    for name, directory in programs(args.suite_dir, suite):
        if args.only and not any(name == o or name.startswith(o) for o in args.only):
            continue
        print(f"{name}", file=sys.stderr, flush=True)
        rows.append(run_program(name, directory, out_dir, args))
        if args.json:                       # after every program: a long run stopped early keeps its rows
            write_json(args, suite, rows, table.summarize(rows), complete=False)
    summary = table.summarize(rows)
    print(table.markdown(rows, summary, suite, nvcc=args.nvcc))
    if args.json:
        write_json(args, suite, rows, summary, complete=True)
    return 1 if summary["crashes"] else 0


def print_summary(path: str, nvcc: bool) -> int:
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    summary = table.summarize(run["rows"])
    print(table.markdown(run["rows"], summary, run["suite"], nvcc=nvcc))
    if not run.get("complete", True):
        print("\n(an incomplete run: it stopped before its last program)")
    return 1 if summary["crashes"] else 0


def write_json(args, suite: str, rows: list[dict], summary: dict, complete: bool) -> None:
    tmp = args.json + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"suite": suite, "suite_root": args.suite_root, "target": args.target, "strict": not args.no_strict,
                   "complete": complete, "rows": rows, "summary": summary}, f, indent=1)
    os.replace(tmp, args.json)


if __name__ == "__main__":
    sys.exit(main())
