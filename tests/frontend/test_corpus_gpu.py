"""bench/corpus_gpu.py's bundle: the programs a corpus run transformed, naive and optimized sources side by
side, programs.tsv and run.sh, built here with nvcc (no GPU: --build-only), and the output check."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires_nvcc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from corpus_kit import bundle  # noqa: E402
from corpus_kit.compare_outputs import compare_files, compare_text  # noqa: E402

KERNEL = "__global__ void twice(float *y, const float *x, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n" \
         "    if (i < n) y[i] = 2.0f * x[i];\n}\n"
MAIN = '#include <stdio.h>\n#include "util.h"\n#include "kernel.cu"\nint main(int argc, char **argv)\n{\n' \
       '    printf("GPU Runtime: 0.5s\\nchecksum: %d\\n", UTIL_VALUE);\n    return 0;\n}\n'


def _run(tmp_path: Path) -> dict:
    """A corpus run of one program (Rodinia layout, an include directory beside it) whose main.cu was
    'optimized' into out/main.cu."""
    suite = tmp_path / "suite"
    prog = suite / "cuda" / "prog"
    prog.mkdir(parents=True)
    (suite / "cuda" / "util").mkdir()
    (suite / "cuda" / "util" / "util.h").write_text("#define UTIL_VALUE 42\n")
    (prog / "kernel.cu").write_text(KERNEL)
    (prog / "main.cu").write_text(MAIN)
    (prog / "helper.c").write_text("int helper(void) { return 1; }\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "main.cu").write_text("// optimized\n" + MAIN)
    unit = {"directory": str(prog), "main_files": [str(prog / "main.cu")], "host_files": [str(prog / "helper.c")],
            "include_dirs": [str(suite / "cuda" / "util")], "defines": ["TIMING"]}
    entry = {"path": str(prog / "main.cu"), "file": "main.cu", "result": "ok", "transformed": ["twice"],
             "output": str(out / "main.cu")}
    return {"suite": "rodinia", "suite_root": str(suite / "cuda"),
            "rows": [{"program": "prog", "directory": str(prog), "units": [unit], "files": [entry]}]}


def test_bundle_holds_both_trees_and_the_table_line(tmp_path):
    written = bundle.write([_run(tmp_path)], str(tmp_path / "bundle"))
    assert [e["name"] for e in written] == ["prog"]
    b = tmp_path / "bundle"
    assert (b / "prog" / "naive" / "prog" / "main.cu").read_text() == MAIN
    assert (b / "prog" / "opt" / "prog" / "main.cu").read_text().startswith("// optimized")
    assert (b / "prog" / "opt" / "util" / "util.h").exists() and (b / "prog" / "opt" / "prog" / "kernel.cu").exists()
    header, line = (b / "programs.tsv").read_text().splitlines()
    assert line.split("\t") == ["prog", "prog", "main.cu helper.c", "-I../util -DTIMING", "-", "1",
                                "skip: no run arguments known", "-", "-"]
    assert {"run.sh", "compare_outputs.py", "nvcc13_compat.h"} <= {p.name for p in b.iterdir()}


def test_bundle_takes_every_file_the_compiler_changed(tmp_path):
    """A directory output (compile -o OUTDIR/): a kernel of an included file is rewritten in that file's
    copy, so the optimized tree takes every changed file, and only those."""
    run = _run(tmp_path)
    entry = run["rows"][0]["files"][0]
    prog, out = Path(entry["path"]).parent, tmp_path / "out"
    (out / "kernel.cu").write_text("// optimized kernel\n" + KERNEL)
    (out / "main.cu").write_text("// unchanged copy\n" + MAIN)
    entry.update(output=str(out / "main.cu"), changed=[str(prog / "kernel.cu")],
                 written={str(prog / "main.cu"): str(out / "main.cu"), str(prog / "kernel.cu"): str(out / "kernel.cu")})
    bundle.write([run], str(tmp_path / "bundle"))
    opt = tmp_path / "bundle" / "prog" / "opt" / "prog"
    assert (opt / "kernel.cu").read_text().startswith("// optimized kernel")
    assert (opt / "main.cu").read_text() == MAIN


@requires_nvcc
def test_run_script_times_with_the_programs_own_timer(tmp_path, monkeypatch):
    """A program whose timer is known is timed by the value it prints (the median of the runs), not the wall
    time; its time lines are left out of the check. No kernel is launched: no GPU needed."""
    run = _run(tmp_path)
    monkeypatch.setitem(bundle.RUN_ARGS, "prog/main.cu", [])
    monkeypatch.setitem(bundle.TIMERS, "prog/main.cu", "Exec: *[0-9.eE+-]+")
    main = Path(run["rows"][0]["files"][0]["path"])
    timed = MAIN.replace('"GPU Runtime: 0.5s', '"Exec: %d\\n', 1).replace('\\nchecksum: %d\\n", UTIL_VALUE',
                                                                           '\\nchecksum: %d\\n", argc * 4, UTIL_VALUE')
    main.write_text(timed)
    Path(run["rows"][0]["files"][0]["output"]).write_text(timed.replace("argc * 4", "argc * 2"))
    bundle.write([run], str(tmp_path / "bundle"))
    proc = subprocess.run(["bash", str(tmp_path / "bundle" / "run.sh"), "--runs", "3"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| prog | 1 | 2.00 (naive 4, optimized 2, own timer) | ok |" in proc.stdout, proc.stdout


def test_programs_without_a_transformed_kernel_are_left_out(tmp_path):
    run = _run(tmp_path)
    run["rows"][0]["files"][0]["transformed"] = []
    assert bundle.write([run], str(tmp_path / "bundle")) == []


def test_one_executable_per_main(tmp_path):
    a, b, shared = tmp_path / "a.cu", tmp_path / "b.cu", tmp_path / "s.c"
    a.write_text("int main() { return 0; }\n")
    b.write_text("// main( in a comment\nint main(void) { return 0; }\n")
    shared.write_text("int f(void) { return 0; }\n")
    unit = {"main_files": [str(a), str(b)], "host_files": [str(shared)]}
    assert bundle.executables(unit) == [[str(a), str(shared)], [str(b), str(shared)]]


@requires_nvcc
def test_run_script_builds_both_variants(tmp_path):
    bundle.write([_run(tmp_path)], str(tmp_path / "bundle"))
    proc = subprocess.run(["bash", str(tmp_path / "bundle" / "run.sh"), "--build-only"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| prog | 1 | - | built |" in proc.stdout
    assert (tmp_path / "bundle" / "prog" / "naive.bin").exists() and (tmp_path / "bundle" / "prog" / "opt.bin").exists()


def test_run_script_reports_a_build_failure(tmp_path):
    run = _run(tmp_path)
    (Path(run["rows"][0]["files"][0]["output"])).write_text("this is not C\n")
    bundle.write([run], str(tmp_path / "bundle"))
    proc = subprocess.run(["bash", str(tmp_path / "bundle" / "run.sh"), "--build-only"], capture_output=True,
                          text=True, env={**os.environ, "NVCC": "nvcc" if os.path.exists("/usr/local/bin/nvcc")
                                          else "false"})
    assert proc.returncode == 1 and "BUILD FAILED" in proc.stdout


def test_compare_outputs_tolerates_time_and_rounding(tmp_path):
    assert compare_text("GPU Runtime: 0.51s\nchecksum: 1.000000e+03\n",
                        "GPU Runtime: 0.20s\nchecksum: 1.000004e+03\n", "stdout") is None
    assert "token" in compare_text("checksum: 1000\n", "checksum: 1100\n", "stdout")
    assert compare_text(" 0.001348879654 s,  0.28 % : SETUP VARIABLES\n", " 0.001056535169 s,  0.22 % : SETUP "
                        "VARIABLES\n", "stdout") is None           # srad_v1's stage times
    assert "tokens" in compare_text("PASSED\n", "PASSED extra\n", "stdout")
    (tmp_path / "n").mkdir()
    (tmp_path / "o").mkdir()
    (tmp_path / "n" / "result.txt").write_text("1 2 3\n")
    (tmp_path / "o" / "result.txt").write_text("1 2 4\n")
    assert compare_files(str(tmp_path / "n"), str(tmp_path / "o")).startswith("result.txt")
    (tmp_path / "o" / "result.txt").write_text("1 2 3\n")
    assert compare_files(str(tmp_path / "n"), str(tmp_path / "o")) is None


def test_emit_refuses_a_run_without_build_units(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"suite": "rodinia", "rows": [{"program": "p", "files": []}]}))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "corpus_gpu.py"), "--emit", str(tmp_path / "b"),
                           str(old)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no build units" in proc.stderr


def test_run_arguments_found_through_any_source(tmp_path, monkeypatch):
    """main() in a .c file (lavaMD, b+tree): the arguments listed for the program's .cu file apply."""
    run = _run(tmp_path)
    unit = run["rows"][0]["units"][0]
    main_c = Path(unit["directory"]) / "main.c"
    main_c.write_text("int main(void) { return 0; }\n")
    (Path(unit["main_files"][0])).write_text(KERNEL)          # main.cu no longer defines main()
    unit["host_files"] = [str(main_c)]
    monkeypatch.setitem(bundle.RUN_ARGS, "prog/main.cu", ["-s", "64"])
    [entry] = bundle.plan(run)
    assert entry["args"] == ["-s", "64"] and entry["note"] == ""


def test_generated_inputs_are_written_once_and_named_in_the_arguments(tmp_path, monkeypatch):
    """A program whose data the checkout lacks runs on inputs the bundle generates: a shared file once under
    data/ (named '@DATA@/...' in its arguments, which run.sh resolves), a file at a fixed relative path beside
    each build's run directory."""
    from corpus_kit import rodinia_data
    calls = []

    def writer(path):
        calls.append(path)
        Path(path).write_text("input\n")
    run_spec = rodinia_data.GeneratedRun(("@DATA@/shared.txt", "7"),
                                         (("@DATA@/shared.txt", writer), ("../local/in.txt", writer)))
    monkeypatch.setitem(bundle.GENERATED, "prog/main.cu", run_spec)
    written = bundle.write([_run(tmp_path)], str(tmp_path / "bundle"))
    b = tmp_path / "bundle"
    assert written[0]["args"] == ["@DATA@/shared.txt", "7"] and written[0]["note"] == ""
    assert sorted(calls) == sorted([str(b / "data" / "shared.txt"), str(b / "prog" / "naive" / "local" / "in.txt"),
                                    str(b / "prog" / "opt" / "local" / "in.txt")])


def test_cfd_domain_file_has_the_layout_cfd_reads(tmp_path):
    """cfd reads the element count, then per element 1 area and 4 x (neighbour, 3 normal components)."""
    from corpus_kit.rodinia_data import cfd_domain
    cfd_domain(str(tmp_path / "domain"), elements=50)
    count, *rows = (tmp_path / "domain").read_text().splitlines()
    assert int(count) == 50 and len(rows) == 50
    fields = rows[0].split()
    assert len(fields) == 17 and all(-1 <= int(fields[1 + 4 * f]) <= 50 for f in range(4))


def test_a_large_run_times_the_same_build_at_an_input_generated_on_the_gpu_machine(tmp_path, monkeypatch):
    """cfd's kernels are chosen by the launch's size: the bundle also runs it as NAME_large on a domain too big
    to carry, which data/generate.sh writes there with python3 and rodinia_data.py (copied into the bundle)."""
    from corpus_kit import rodinia_data
    small = rodinia_data.GeneratedRun(("@DATA@/small.txt",), (("@DATA@/small.txt", lambda p: Path(p).write_text("1\n")),))
    monkeypatch.setitem(bundle.GENERATED, "prog/main.cu", small)
    monkeypatch.setitem(bundle.LARGE, "prog/main.cu", rodinia_data._CFD_LARGE)
    run = _run(tmp_path)
    for path in (run["rows"][0]["files"][0]["path"], run["rows"][0]["files"][0]["output"]):   # cfd's step count
        Path(path).write_text(Path(path).read_text().replace("#include <stdio.h>\n", "#include <stdio.h>\n"
                                                             "#define iterations 2000\n"))
    written = bundle.write([run], str(tmp_path / "bundle"))
    b = tmp_path / "bundle"
    assert [e["name"] for e in written] == ["prog", "prog_large"]
    # the large run takes fewer steps (at 2000 both builds ran past the run's time limit), in both trees
    for variant in ("naive", "opt"):
        assert "#define iterations 200\n" in (b / "prog_large" / variant / "prog" / "main.cu").read_text()
        assert "#define iterations 2000\n" in (b / "prog" / variant / "prog" / "main.cu").read_text()
    lines = [line.split("\t") for line in (b / "programs.tsv").read_text().splitlines()[1:]]
    assert [(line[0], line[4], line[8]) for line in lines] == [("prog", "@DATA@/small.txt", "-"),
                                                                ("prog_large", "@DATA@/cfd_domain_2M.txt", "90")]
    assert (b / "prog_large" / "opt" / "prog" / "main.cu").read_text().startswith("// optimized")
    assert not (b / "data" / "cfd_domain_2M.txt").exists()          # written on the GPU machine
    script = (b / "data" / "generate.sh").read_text()
    assert script.count("cfd_domain_2M.txt") == 2 and "python3 \"$HERE/rodinia_data.py\" cfd_domain" in script
    assert (b / "rodinia_data.py").exists()
    # the generator runs there as a script: a small domain, in the layout cfd reads
    target = b / "data" / "cfd_domain_2M.txt"
    command = script.splitlines()[-1].replace("$HERE", str(b)).replace(" 2000000", " 20")
    subprocess.run(["bash", "-c", command], check=True)
    count, *rows = target.read_text().splitlines()
    assert int(count) == 20 and len(rows) == 20 and len(rows[0].split()) == 17


def test_a_macro_a_run_sets_that_no_source_defines_is_an_error(tmp_path, monkeypatch):
    """A run that cannot set what it names (cfd's `iterations`) would time another run than it says."""
    from corpus_kit import rodinia_data
    small = rodinia_data.GeneratedRun(("in.txt",), (), macros=(("iterations", "200"),))
    monkeypatch.setitem(bundle.GENERATED, "prog/main.cu", small)
    with pytest.raises(ValueError, match="no source defines the macro iterations"):
        bundle.write([_run(tmp_path)], str(tmp_path / "bundle"))


@requires_nvcc
def test_a_run_may_take_longer_than_run_timeout_where_its_inputs_say(tmp_path, monkeypatch):
    """cfd's large input takes about 20 s to read and write: its runs get their own limit (programs.tsv's last
    field), the others keep RUN_TIMEOUT. No kernel is launched: no GPU needed."""
    from corpus_kit import rodinia_data
    run = _run(tmp_path)
    entry = run["rows"][0]["files"][0]
    for path in (entry["path"], entry["output"]):
        text = Path(path).read_text().replace("#include <stdio.h>\n", "#include <stdio.h>\n#include <unistd.h>\n")
        Path(path).write_text(text.replace("{\n    printf(", "{\n    usleep(800000);\n    printf(", 1))
    monkeypatch.setitem(bundle.GENERATED, "prog/main.cu", rodinia_data.GeneratedRun((), (), run_timeout=30))
    bundle.write([run], str(tmp_path / "bundle"))
    proc = subprocess.run(["bash", str(tmp_path / "bundle" / "run.sh"), "--runs", "1"], capture_output=True,
                          text=True, env={**os.environ, "RUN_TIMEOUT": "0.3"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| prog | 1 |" in proc.stdout and "| ok" in proc.stdout, proc.stdout
