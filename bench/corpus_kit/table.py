"""The corpus run's table and its totals by cause, from the rows bench/corpus.py collects."""
from __future__ import annotations

import os
from collections import Counter

from corpus_kit.causes import file_cause, kernel_cause

CRASHES = ("traceback", "internal error", "timeout")


def _kernels(files: list[dict]) -> dict[tuple[str, str], dict]:
    """The program's kernels, once each (two main files may include the same kernel file)."""
    seen: dict[tuple[str, str], dict] = {}
    for f in files:
        for k in f["kernels"]:
            seen.setdefault((k["file"], k["name"]), dict(k, outcome_file=f))
    return seen


def kernel_was_transformed(kernel: dict) -> bool:
    """Whether the compile of the file that saw `kernel` transformed it: matched by the file the report names
    (two files of a program may define kernels of one name), by name where the report names no file."""
    outcome = kernel["outcome_file"]
    if outcome["result"] != "ok":
        return False
    at = outcome.get("transformed_at")
    if at is None:
        return any(same_kernel(name, kernel["name"]) for name in outcome["transformed"])
    path = os.path.normpath(kernel.get("path") or "")
    return any(same_kernel(name, kernel["name"]) and (file is None or os.path.normpath(file) == path)
               for file, name in at)


def kernel_was_dispatched(kernel: dict) -> bool:
    """Transformed, and launched only from a size on: the output keeps the naive kernel for smaller launches
    (gpgpu_opt/launch_dispatch.py), so the table says so beside the count."""
    return kernel_was_transformed(kernel) and any(same_kernel(name, kernel["name"])
                                                  for name in kernel["outcome_file"].get("dispatched", []))


def same_kernel(reported: str, name: str) -> bool:
    """A report's kernel is the source's kernel `name` or one of its template instances (`name__float_256`)."""
    return reported == name or reported.startswith(name + "__")


def kernels_by_file(row: dict) -> dict[str, dict]:
    """Per file of the program that defines kernels: how many, naive-style, transformed."""
    counts: dict[str, dict] = {}
    for k in _kernels(row["files"]).values():
        c = counts.setdefault(k["file"], {"kernels": 0, "naive_style": 0, "transformed": 0})
        c["kernels"] += 1
        c["naive_style"] += k["naive_style"]
        c["transformed"] += kernel_was_transformed(k)
    return counts


def program_counts(row: dict) -> dict:
    kernels = _kernels(row["files"])
    transformed = {key for key, k in kernels.items() if kernel_was_transformed(k)}
    accepted = {key for key, k in kernels.items() if k["outcome_file"]["result"] == "ok"}
    return {"files": len(row["files"]), "ok_files": sum(f["result"] == "ok" for f in row["files"]),
            "kernels": len(kernels), "naive_style": sum(k["naive_style"] for k in kernels.values()),
            "naive_transformed": sum(k["naive_style"] for key, k in kernels.items() if key in transformed),
            "transformed": len(transformed), "passed_through": len(accepted - transformed),
            "dispatched": sum(kernel_was_dispatched(k) for k in kernels.values()),
            "rejected": len(kernels) - len(accepted)}


def program_result(row: dict) -> str:
    bad = [f for f in row["files"] if f["result"] != "ok"]
    if not row["files"]:
        return "no .cu file compiled"
    if not bad:
        return "ok"
    worst = next((f for f in bad if f["result"] in CRASHES), bad[0])
    first = worst["first_line"].replace("|", "\\|")
    label = worst["result"].upper() if worst["result"] in CRASHES else "error"
    return f"{label} ({worst['file']}): {first[:110]}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")


def summarize(rows: list[dict]) -> dict:
    totals = Counter()
    file_causes, kernel_causes, crashes = Counter(), Counter(), []
    for row in rows:
        counts = program_counts(row)
        totals.update(counts)
        totals["programs"] += 1
        totals["programs_ok"] += counts["ok_files"] == counts["files"] and counts["files"] > 0
        totals["programs_transformed"] += counts["transformed"] > 0
        for f in row["files"]:
            if f["result"] != "ok":
                file_causes[file_cause(f)] += 1
            if f["result"] in CRASHES:
                crashes.append(f"{row['program']}/{f['file']}: {f['result']}: {f['first_line']}")
            if f.get("nvcc_output") and not f["nvcc_output"][0]:
                if f.get("nvcc_input") and f["nvcc_input"][0]:     # the compiler broke a file nvcc accepts
                    totals["outputs_failing_nvcc"] += 1
                    crashes.append(f"{row['program']}/{f['file']}: output does not build: {f['nvcc_output'][1]}")
                else:
                    totals["outputs_failing_like_input"] += 1
            if f.get("nvcc_input") is not None:
                totals["inputs_building"] += bool(f["nvcc_input"][0])
                totals["rejected_but_nvcc_accepts"] += bool(f["nvcc_input"][0]) and f["result"] != "ok"
        for k in _kernels(row["files"]).values():
            if k["outcome_file"]["result"] == "ok" and not kernel_was_transformed(k):
                kernel_causes[kernel_cause(k, k["outcome_file"])] += 1
    return {"totals": dict(totals), "rejected_files_by_cause": dict(file_causes.most_common()),
            "passed_through_kernels_by_cause": dict(kernel_causes.most_common()), "crashes": crashes}


def markdown(rows: list[dict], summary: dict, suite: str, nvcc: bool = False) -> str:
    head = "| program | files | kernels | naive-style | transformed | passed through | result |"
    lines = [f"## gpgpu-opt corpus run: {suite}", "", head + (" nvcc (in/out) |" if nvcc else ""),
             "|---" * (8 if nvcc else 7) + "|"]
    for row in rows:
        c = program_counts(row)
        transformed = f"{c['transformed']} ({c['dispatched']} dispatched)" if c["dispatched"] else c["transformed"]
        cells = [row["program"], f"{c['ok_files']}/{c['files']}", c["kernels"], c["naive_style"], transformed,
                 c["passed_through"], program_result(row)]
        if nvcc:
            cells.append(_nvcc_cell(row["files"]))
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    t = summary["totals"]
    lines += ["", f"programs: {t.get('programs', 0)}, every file accepted: {t.get('programs_ok', 0)}, "
              f"with a kernel transformed: {t.get('programs_transformed', 0)}; files: {t.get('files', 0)}, "
              f"accepted: {t.get('ok_files', 0)}; kernels: {t.get('kernels', 0)} ({t.get('naive_style', 0)} "
              f"naive-style), transformed: {t.get('transformed', 0)} ({t.get('naive_transformed', 0)} of the "
              f"naive-style; dispatched by the launch's size: {t.get('dispatched', 0)}), passed through: "
              f"{t.get('passed_through', 0)}, in rejected files: "
              f"{t.get('rejected', 0)}"]
    if nvcc:
        lines.append(f"nvcc accepts {t.get('inputs_building', 0)} of the {t.get('files', 0)} inputs; "
                     f"rejected by gpgpu-opt but accepted by nvcc: {t.get('rejected_but_nvcc_accepts', 0)}; "
                     f"outputs that do not build: {t.get('outputs_failing_nvcc', 0)} (and "
                     f"{t.get('outputs_failing_like_input', 0)} whose input does not build either)")
    lines += ["", "### rejected files by cause", ""]
    lines += [f"- {n}: {cause}" for cause, n in summary["rejected_files_by_cause"].items()] or ["- none"]
    lines += ["", "### kernels passed through (file accepted, kernel not transformed) by cause", ""]
    lines += [f"- {n}: {cause}" for cause, n in summary["passed_through_kernels_by_cause"].items()] or ["- none"]
    if summary["crashes"]:
        lines += ["", "### !!! TRACEBACKS, INTERNAL ERRORS, TIMEOUTS, OUTPUTS THAT DO NOT BUILD !!!", ""]
        lines += [f"- {c}" for c in summary["crashes"]]
    return "\n".join(lines)


def _nvcc_cell(files: list[dict]) -> str:
    def mark(value) -> str:
        return "-" if value is None else ("ok" if value[0] else "FAIL")
    return ", ".join(f"{mark(f.get('nvcc_input'))}/{mark(f.get('nvcc_output'))}" for f in files)
