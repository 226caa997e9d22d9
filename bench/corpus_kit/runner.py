"""Run `gpgpu-opt compile` on one main file in a subprocess and read what came back: the result (ok, an
error and its first line, an internal error, a traceback, a timeout), the kernels it transformed and the
notes of those it passed through. Optionally build the output, and the input, with nvcc."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

#: Passes that only requalify pointer parameters: a kernel they alone changed is not "transformed".
QUALIFIER_PASSES = ("restrict",)
#: Rewrites that only restate the kernel for the analyses (normalize's closed form of an induction variable,
#: `c += xy` read as `c + k * xy`): a kernel they and the qualifiers alone changed is not "transformed" either.
RESTATING = ("induction variable read in closed form",)


@dataclass
class CompileOutcome:
    result: str                      # 'ok', 'error', 'internal error', 'traceback', 'timeout'
    first_line: str = ""             # the first error line (or the traceback's last line)
    exit_status: int | None = None
    reported: list[str] = field(default_factory=list)       # kernels the compiler read
    transformed: list[str] = field(default_factory=list)    # of those, written transformed
    passed_through: list[str] = field(default_factory=list) # kernels it could not read, passed through
    notes: list[str] = field(default_factory=list)
    output: str | None = None        # the main file's copy in the output tree, when written
    written: dict[str, str] = field(default_factory=dict)  # every user file of the program -> its copy
    changed: list[str] = field(default_factory=list)        # the user files the compiler changed
    transformed_at: list[list[str]] = field(default_factory=list)  # [file, name] of each transformed kernel
    #: Of the transformed, those launched only from a size on (the naive kernel kept for smaller launches).
    dispatched: list[str] = field(default_factory=list)
    seconds: float = 0.0


def compile_command(source: str, output: str, report: str, include_dirs: list[str], defines: list[str],
                    target: str) -> list[str]:
    cmd = [sys.executable, "-m", "gpgpu_opt", "compile", source, "-o", output, "--report", report,
           "--target", target]
    for d in include_dirs:
        cmd += ["-I", d]
    for d in defines:
        cmd += ["-D", d]
    return cmd


def first_error_line(stderr: str) -> str:
    """The line a user reads first: the first `error:` line, else the last line of a traceback, else the
    first non-empty line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln:
            return ln
    if "Traceback" in stderr and lines:
        return lines[-1]
    return lines[0] if lines else ""


def classify_exit(status: int, stderr: str) -> str:
    """A traceback is never ok, whatever the exit status; exit 3 is the compiler's own internal error."""
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if status == 3 or "internal error" in stderr:
        return "internal error"
    return "ok" if status == 0 else "error"


def kernel_transformed(kernel: dict) -> bool:
    """Written transformed: the version kept is after a pass that applied and does more than requalify
    parameters (a version kept after a pass that changed nothing, e.g. 'normalize', is not)."""
    validation = kernel.get("validation") or {}
    applied = [d.get("pass") for d in kernel.get("decisions", []) if d.get("action") == "applied"
               and not str(d.get("reason", "")).startswith(RESTATING)]
    changing = [p for p in applied if p not in QUALIFIER_PASSES]
    if validation.get("status") in ("rolled back", "not checked"):
        kept = validation.get("kept", "naive")
        order = kernel.get("passes") or []
        if kept == "naive" or kept not in order:
            return False
        return any(p in order[:order.index(kept) + 1] for p in changing)
    return bool(changing)


def read_report(path: str, outcome: CompileOutcome) -> None:
    with open(path, encoding="utf-8") as f:
        rep = json.load(f)
    for k in rep.get("kernels", []):
        outcome.reported.append(k["name"])
        if kernel_transformed(k):
            outcome.transformed.append(k["name"])
            outcome.transformed_at.append([k.get("file") or rep.get("file"), k["name"]])
            if (k.get("launch") or {}).get("dispatch_min_threads"):
                outcome.dispatched.append(k["name"])
    outcome.passed_through = list(rep.get("passed_through", []))
    outcome.notes = list(rep.get("notes", []))
    # a directory output: the report pairs the program's files with the copies written, in order
    files, written = rep.get("files") or [rep.get("file")], rep.get("written") or []
    outcome.written = dict(zip(files, written)) if len(files) == len(written) else {}
    # changed: compared here, byte for byte (the report lists changed files only for multi-file programs)
    outcome.changed = [f for f, w in outcome.written.items() if _read_bytes(f) != _read_bytes(w)]


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def run_compile(source: str, out_dir: str, include_dirs: list[str], defines: list[str], target: str = "sm_90",
                timeout: float = 300, strict: bool = True) -> CompileOutcome:
    import time

    import shutil

    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.basename(source)
    # a directory output (OUTDIR/): kernels of included files are rewritten in their own files' copies
    tree, report = os.path.join(out_dir, stem + ".out"), os.path.join(out_dir, stem + ".report.json")
    shutil.rmtree(tree, ignore_errors=True)
    if os.path.exists(report):
        os.remove(report)
    env = dict(os.environ)
    env["GPGPU_OPT_STRICT"] = "1" if strict else "0"
    start = time.monotonic()
    try:
        proc = subprocess.run(compile_command(source, tree + os.sep, report, include_dirs, defines, target),
                              cwd=os.path.dirname(source), capture_output=True, text=True, timeout=timeout, env=env,
                              errors="replace")
    except subprocess.TimeoutExpired:
        return CompileOutcome("timeout", f"no answer in {timeout:.0f} s", seconds=time.monotonic() - start)
    outcome = CompileOutcome(classify_exit(proc.returncode, proc.stderr), exit_status=proc.returncode,
                             seconds=time.monotonic() - start)
    with open(os.path.join(out_dir, stem + ".log"), "w", encoding="utf-8") as f:
        f.write(proc.stderr)
    if outcome.result != "ok":
        outcome.first_line = first_error_line(proc.stderr)
    if outcome.result == "ok" and os.path.exists(report):
        read_report(report, outcome)
        outcome.output = outcome.written.get(source) or next(iter(outcome.written.values()), None)
    return outcome


#: Renames of runtime calls CUDA 13 removed, force-included in both builds (see the file).
COMPAT_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvcc13_compat.h")


def nvcc_builds(source: str | list[str], include_dirs: list[str], defines: list[str], cwd: str,
                arch: str = "sm_90", timeout: float = 300, compat: bool = True, link: bool = False,
                system_dirs: tuple[str, ...] = ()) -> tuple[bool, str]:
    """Whether `nvcc -arch=ARCH -c` accepts `source` with the program's flags (`cwd`'s quoted includes too,
    COMPAT_HEADER force-included unless `compat` is off); the first error line when not. `link`: build the
    executable instead from `source`, one file or the list of a build unit's files (its `.cu` main files and
    the host `.c`/`.cpp` files linked with them), so that a kernel whose definition no longer matches its
    prototype (an undefined reference) fails too. `system_dirs`: where headers the suite expects installed
    with the toolkit are here (`-isystem`: Rodinia's cfd includes the CUDA samples' `<helper_cuda.h>`)."""
    sources = [source] if isinstance(source, str) else list(source)
    cmd = ["nvcc", f"-arch={arch}", *([] if link else ["-c"]), *sources, "-o", os.devnull, "-I", cwd]
    cmd += ["-include", COMPAT_HEADER] if compat else []
    cmd += [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines] + (["-lm"] if link else [])
    cmd += [flag for d in system_dirs for flag in ("-isystem", d)]
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return False, "nvcc timed out"
    if proc.returncode == 0:
        return True, ""
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln or "undefined reference" in ln]
    return False, (errors or proc.stderr.splitlines() or ["nvcc failed"])[0].strip()


def output_include_dirs(written: dict[str, str], include_dirs: list[str]) -> list[str]:
    """The `-I` directories for building an output tree: each one inside the program's tree (the deepest
    directory holding all its files, which the output mirrors) points at its copy first (a header found
    through `-I` may have been rewritten), then every original one (files the program does not include are
    not copied)."""
    if not written:
        return list(include_dirs)
    src_root = os.path.commonpath([os.path.dirname(os.path.normpath(f)) for f in written])
    out_root = os.path.commonpath([os.path.dirname(os.path.normpath(w)) for w in written.values()])
    mapped = []
    for d in include_dirs:
        rel = os.path.relpath(os.path.normpath(d), src_root)
        if rel != ".." and not rel.startswith(".." + os.sep) and os.path.isdir(os.path.join(out_root, rel)):
            mapped.append(os.path.normpath(os.path.join(out_root, rel)))
    return mapped + list(include_dirs)
