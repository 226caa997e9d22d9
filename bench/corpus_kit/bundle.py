"""The bundle bench/corpus_gpu.py writes: for every executable of a corpus run with a kernel transformed, its
sources twice (NAME/naive, NAME/opt with the optimized files in place of the inputs), one line of
programs.tsv (build directory, sources, flags, run arguments, kernels transformed, note, timer, time limit per run;
'-' when empty), and the scripts
that build, run, time and check them with nvcc and bash only (run.sh, compare_outputs.py,
nvcc13_compat.h)."""
from __future__ import annotations

import os
import shutil

from corpus_kit.rodinia_data import GENERATED, LARGE, set_macros, write_inputs
from corpus_kit.rodinia_runs import NEEDS_DATA, NONDETERMINISTIC, RUN_ARGS, TIMERS
from corpus_kit.sources import defines_main

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hh", ".c", ".cpp", ".cc", ".inc", ".def")
def executables(unit: dict) -> list[list[str]]:
    """The sources of each executable a build unit makes: one of all its files, or, where several files
    define main() (one Makefile, several programs), one per such file with the files that define none."""
    files = unit["main_files"] + unit["host_files"]
    mains = [f for f in files if defines_main(f)]
    if len(mains) <= 1:
        return [files]
    shared = [f for f in files if f not in mains]
    return [[m, *shared] for m in mains]


def _copy_tree(src: str, dst: str) -> None:
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(SOURCE_SUFFIXES) or name in ("Makefile", "makefile"):
                target = os.path.join(dst, os.path.relpath(root, src), name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(os.path.join(root, name), target)


def run_key(main_file: str, row: dict) -> str:
    """`gaussian/gaussian.cu`: the main file's path from the suite's program directories."""
    return os.path.relpath(main_file, os.path.dirname(row["directory"]))


def plan(run: dict) -> list[dict]:
    """One entry per executable of the run that has a kernel transformed."""
    entries = []
    for row in run["rows"]:
        by_path = {f["path"]: f for f in row["files"]}
        for unit in row.get("units", []):
            for sources in executables(unit):
                compiled = [by_path[s] for s in sources if s in by_path and by_path[s]["result"] == "ok"]
                transformed = sum(len(f["transformed"]) for f in compiled)
                if transformed == 0:
                    continue
                entries.append(_entry(run, row, unit, sources, compiled, transformed))
                large = _large_entry(entries[-1], row)
                if large is not None:
                    entries.append(large)
    return entries


def _large_entry(entry: dict, row: dict) -> dict | None:
    """The same executable at the large input of rodinia_data.LARGE, as NAME_large (a second regime: cfd's
    kernels are chosen by the launch's size), or None."""
    key = next((k for k in (run_key(s, row) for s in entry["sources"]) if k in LARGE), None)
    if key is None or entry["note"]:
        return None
    return dict(entry, name=entry["name"] + "_large", args=list(LARGE[key].args), inputs=LARGE[key])


def _entry(run: dict, row: dict, unit: dict, sources: list[str], compiled: list[dict], transformed: int) -> dict:
    main = next((s for s in sources if defines_main(s)), sources[0])
    keys = [run_key(s, row) for s in sources]         # main() may live in a .c file (lavaMD, b+tree)
    key = next((k for k in keys if k in RUN_ARGS or k in GENERATED or k in NEEDS_DATA), keys[0])
    several = len(executables(unit)) > 1 or len(row.get("units", [])) > 1
    name = row["program"].replace("/", "_") + ("_" + os.path.splitext(os.path.basename(main))[0] if several else "")
    note = ""
    if run["suite"] == "files":
        args = []
    elif key in RUN_ARGS:
        args = RUN_ARGS[key]
        note = f"nondeterministic: {NONDETERMINISTIC[key]}" if key in NONDETERMINISTIC else ""
    elif key in GENERATED:
        args = list(GENERATED[key].args)            # '@DATA@': the bundle's data/ directory, on the GPU machine
    else:
        args = []
        note = "skip: needs " + NEEDS_DATA[key] if key in NEEDS_DATA else "skip: no run arguments known"
    if not any(defines_main(s) for s in sources):
        note = "skip: no main() among its sources"
    return {"name": name, "row": row, "unit": unit, "sources": sources, "args": args, "note": note,
            "inputs": GENERATED.get(key) if run["suite"] != "files" else None,
            "timer": TIMERS.get(key, "") if run["suite"] != "files" else "",
            "transformed": transformed, "optimized": optimized_files(compiled)}


def optimized_files(compiled: list[dict]) -> dict[str, str]:
    """Original file -> its optimized copy, for every file the compiler changed: the main file and the
    included files whose kernels it rewrote (a directory output mirrors them all; the unchanged ones stay
    as the naive tree has them)."""
    optimized = {}
    for f in compiled:
        written = f.get("written") or {}
        for original in f.get("changed") or []:
            if original in written:
                optimized[original] = written[original]
        if f.get("output") and not written:               # a run of the older single-file layout
            optimized[f["path"]] = f["output"]
    return optimized


def _tree_root(run: dict, entry: dict) -> str:
    """The directory the bundle mirrors for this program: the suite's root when the program's include
    directories reach outside its own directory (Rodinia's cuda/util), else the program directory."""
    if not os.path.isdir(entry["row"]["directory"]):
        return entry["unit"]["directory"]
    root = entry["row"]["directory"]
    suite_root = run.get("suite_root") or os.path.dirname(root)
    for inc in entry["unit"]["include_dirs"]:
        if not inc.startswith(root + os.sep) and inc != root and inc.startswith(suite_root + os.sep):
            return suite_root
    return root


def write(run_list: list[dict], out_dir: str, system_dirs: tuple[str, ...] = ()) -> list[dict]:
    """Write the bundle for every executable with a kernel transformed, over several corpus runs.
    `system_dirs`: headers the suites expect installed with the toolkit (corpus.py --system-include), copied
    to system/ (their headers only), which run.sh searches with -isystem."""
    os.makedirs(out_dir, exist_ok=True)
    for k, directory in enumerate(system_dirs):
        target = os.path.join(out_dir, "system", f"{k}_{os.path.basename(os.path.normpath(directory))}")
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith((".h", ".hpp", ".cuh")) and os.path.isfile(os.path.join(directory, name)):
                shutil.copyfile(os.path.join(directory, name), os.path.join(target, name))
    for helper in ("bundle_run.sh", "compare_outputs.py", "nvcc13_compat.h", "rodinia_data.py"):
        shutil.copyfile(os.path.join(HERE, helper), os.path.join(out_dir, "run.sh" if helper == "bundle_run.sh"
                                                                  else helper))
    lines, written = ["name\tdir\tsources\tflags\targs\ttransformed\tnote\ttimer\tlimit"], []
    for run in run_list:
        for entry in plan(run):
            lines.append(_write_entry(run, entry, out_dir))
            written.append(entry)
    with open(os.path.join(out_dir, "programs.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return written


def _write_entry(run: dict, entry: dict, out_dir: str) -> str:
    root = _tree_root(run, entry)
    paths = [entry["row"]["directory"]]
    paths += [d for d in entry["unit"]["include_dirs"] if d.startswith(root + os.sep)]
    for variant in ("naive", "opt"):
        base = os.path.join(out_dir, entry["name"], variant)
        shutil.rmtree(base, ignore_errors=True)
        for path in paths:
            if os.path.isfile(path):            # a one-file program (`--suite files`)
                os.makedirs(base, exist_ok=True)
                shutil.copyfile(path, os.path.join(base, os.path.basename(path)))
            else:
                _copy_tree(path, os.path.join(base, os.path.relpath(path, root)))
    for original, optimized in entry["optimized"].items():
        target = os.path.join(out_dir, entry["name"], "opt", os.path.relpath(original, root))
        if os.path.relpath(original, root).startswith(".."):
            raise ValueError(f"{original}: changed by the compiler but outside {root}, which the bundle copies")
        shutil.copyfile(optimized, target)
    build_dir = entry["unit"]["directory"]
    if entry["inputs"] is not None:
        run_dirs = [os.path.join(out_dir, entry["name"], v, os.path.relpath(build_dir, root)) for v in ("naive", "opt")]
        write_inputs(entry["inputs"], out_dir, run_dirs)
        set_macros(entry["inputs"], [os.path.join(out_dir, entry["name"], v) for v in ("naive", "opt")],
                   SOURCE_SUFFIXES)
    flags = [f"-I{os.path.relpath(d, build_dir)}" for d in entry["unit"]["include_dirs"] if d.startswith(root)]
    flags += [f"-D{d}" for d in entry["unit"]["defines"]]
    sources = [os.path.relpath(s, build_dir) for s in entry["sources"]]
    fields = [entry["name"], os.path.relpath(build_dir, root), " ".join(sources), " ".join(flags),
              " ".join(entry["args"]), str(entry["transformed"]), entry["note"], entry["timer"], _limit(entry)]
    return "\t".join(f or "-" for f in fields)      # '-': empty (bash's read joins adjacent tabs)


def _limit(entry: dict) -> str:
    """The seconds a run of this entry may take where its inputs need more than run.sh's RUN_TIMEOUT ('')."""
    timeout = getattr(entry["inputs"], "run_timeout", None)
    return str(timeout) if timeout else ""
