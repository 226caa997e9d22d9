"""bench/corpus.py and its helpers (bench/corpus_kit): build files read as text, kernels counted from the
source, exits classified (a traceback is never ok), causes sorted, and the table of a small suite written
here in Rodinia's layout."""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from corpus_kit.buildfiles import build_units, parse_cmake, parse_makefile  # noqa: E402
from corpus_kit.causes import error_context, file_cause, kernel_cause  # noqa: E402
from corpus_kit.runner import (classify_exit, first_error_line, kernel_transformed, nvcc_builds,  # noqa: E402
                               output_include_dirs, read_report, CompileOutcome)
from tests.conftest import requires_nvcc  # noqa: E402
from corpus_kit.sources import kernels_in, main_files, program_kernels  # noqa: E402

KERNEL_CU = """\
// kernels of the program
__global__ void scale(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];   /* { not a brace } */
}
"""
MAIN_CU = """\
#include <stdio.h>
#include "kernel.cu"
int main(void)
{
    float *x, *y;
    int n = 1 << 22;   /* enough threads to fill the GPU widened */
    cudaMalloc((void **)&x, n * sizeof(float));
    cudaMalloc((void **)&y, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(y, x, n);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""
MAKEFILE = """\
include ../../common/make.config

CC := $(CUDA_DIR)/bin/nvcc
SRC = main.cu
EXE = prog

ifeq ($(dbg),1)
	FLAGS += -D_DEBUG
else
	FLAGS += -DNDEBUG_RUN
endif

release: $(SRC)
	$(CC) $(FLAGS) $(SRC) -o $(EXE) -I../util \\
		-DTIMING -DBLOCK=256

clang: $(SRC)
	clang++ $(SRC) -o $(EXE) -I../clang_only -DCLANG_ONLY
"""


def _suite(tmp_path: Path) -> Path:
    """A suite in Rodinia's layout: common/make.config, cuda/util, cuda/prog (Makefile, main.cu, kernel.cu)."""
    (tmp_path / "common").mkdir(parents=True)
    (tmp_path / "common" / "make.config").write_text("CUDA_DIR = /nonexistent/cuda\n")
    prog = tmp_path / "cuda" / "prog"
    prog.mkdir(parents=True)
    (tmp_path / "cuda" / "util").mkdir()
    (prog / "Makefile").write_text(MAKEFILE)
    (prog / "main.cu").write_text(MAIN_CU)
    (prog / "kernel.cu").write_text(KERNEL_CU)
    return prog


def test_makefile_files_and_flags(tmp_path):
    prog = _suite(tmp_path)
    unit = parse_makefile(str(prog / "Makefile"))
    assert unit.cu_files == [str(prog / "main.cu")]
    assert unit.include_dirs == [str(tmp_path / "cuda" / "util")]          # -I../util, not clang's
    assert unit.defines == ["NDEBUG_RUN", "TIMING", "BLOCK=256"]           # the else branch of ifeq dbg
    assert unit.missing_include_dirs == []


def test_makefile_objects_name_their_sources_and_includes_are_not_main_files(tmp_path):
    (tmp_path / "Makefile").write_text("OBJS = a.o b.o\nall: $(OBJS)\n%.o: %.cu\n\tnvcc -c $< -I inc\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "a.cu").write_text('#include "b.cu"\n')
    (tmp_path / "b.cu").write_text(KERNEL_CU)
    unit = parse_makefile(str(tmp_path / "Makefile"))
    assert unit.cu_files == [str(tmp_path / "a.cu"), str(tmp_path / "b.cu")]
    assert unit.include_dirs == [str(tmp_path / "inc")]
    assert main_files(unit.cu_files, unit.include_dirs) == [str(tmp_path / "a.cu")]


def test_cmake_files_and_flags(tmp_path):
    (tmp_path / "Common").mkdir()
    sample = tmp_path / "Samples" / "0_Intro" / "vecAdd"
    sample.mkdir(parents=True)
    (sample / "vecAdd.cu").write_text(KERNEL_CU)
    (sample / "CMakeLists.txt").write_text(textwrap.dedent("""\
        # a comment naming other.cu
        include_directories(../../../Common)
        add_executable(vecAdd vecAdd.cu)
        target_compile_definitions(vecAdd PRIVATE USE_FAST=1 -DVERBOSE)
        """))
    unit = parse_cmake(str(sample / "CMakeLists.txt"))
    assert unit.cu_files == [str(sample / "vecAdd.cu")]
    assert unit.include_dirs == [str(tmp_path / "Common")]
    assert unit.defines == ["USE_FAST=1", "VERBOSE"]


def test_no_build_file_takes_every_cu_file(tmp_path, monkeypatch):
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "x.cu").write_text(KERNEL_CU)
    monkeypatch.chdir(tmp_path)
    [unit] = build_units("prog")                        # a relative directory gives absolute paths
    assert unit.build_file is None and unit.cu_files == [str(tmp_path / "prog" / "x.cu")]


def test_kernels_counted_from_the_source(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(KERNEL_CU + textwrap.dedent("""\
        __global__ void declared_only(float *a);
        template <typename T, int B>
        __global__ void __launch_bounds__(256) tiled(T *a)
        {
            __shared__ T tile[B];
            tile[threadIdx.x] = a[threadIdx.x];
            __syncthreads();
            a[threadIdx.x] = tile[B - 1 - threadIdx.x];
        }
        // __global__ void commented_out(float *a) { }
        """))
    kernels = kernels_in(str(path))
    assert [(k.name, k.naive_style, k.template) for k in kernels] == [("scale", True, False), ("tiled", False, True)]
    assert (kernels[0].line, kernels[0].end_line) == (2, 6)


def test_a_kernel_that_calls_a_staging_function_is_not_naive_style(tmp_path):
    (tmp_path / "transform.h").write_text(textwrap.dedent("""\
        template <int W>
        struct Transform {
            __device__ static void run(float *in, float *out)
            {
                __shared__ float window[W];
                window[threadIdx.x] = in[threadIdx.x];
                __syncthreads();
                out[threadIdx.x] = window[W - 1 - threadIdx.x];
            }
        };
        __device__ float twice(float v) { return 2.0f * v; }
        """))
    (tmp_path / "main.cu").write_text(textwrap.dedent("""\
        #include "transform.h"
        __global__ void staged(float *in, float *out) { Transform<64>::run(in, out); }
        __global__ void plain(float *in, float *out) { out[threadIdx.x] = twice(in[threadIdx.x]); }
        """))
    kernels = program_kernels(str(tmp_path / "main.cu"), [])
    assert [(k.name, k.naive_style) for k in kernels] == [("staged", False), ("plain", True)]


def test_a_traceback_is_never_ok():
    trace = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'\n"
    assert classify_exit(0, trace) == "traceback"
    assert classify_exit(3, "x.cu:1:1: error: internal error in pass merge\n") == "internal error"
    assert classify_exit(1, "x.cu:1:1: error: expected ';'\n") == "error"
    assert classify_exit(0, "x.cu:1:1: note: merge: kept\n") == "ok"
    assert first_error_line(trace) == "KeyError: 'a'"


def test_transformed_means_more_than_restrict():
    restrict_only = {"decisions": [{"pass": "restrict", "action": "applied"}],
                     "validation": {"status": "rolled back", "kept": "restrict"}}
    merged = {"decisions": [{"pass": "restrict", "action": "applied"}, {"pass": "merge", "action": "applied"}],
              "validation": {"status": "passed"}}
    rolled_back = dict(merged, validation={"status": "rolled back", "kept": "naive"})
    order = ["restrict", "normalize", "vectorize", "merge"]
    kept_before_any_change = {"passes": order, "decisions": merged["decisions"],
                              "validation": {"status": "rolled back", "kept": "normalize"}}
    kept_after_merge = dict(kept_before_any_change, validation={"status": "rolled back", "kept": "merge"})
    assert not kernel_transformed(restrict_only)
    assert kernel_transformed(merged)
    assert not kernel_transformed(rolled_back)
    assert not kernel_transformed(kept_before_any_change)   # nothing but restrict applied up to the kept version
    assert kernel_transformed(kept_after_merge)


def test_an_induction_variable_restated_is_not_a_transformation():
    restated = {"decisions": [{"pass": "restrict", "action": "applied"},
                              {"pass": "normalize", "action": "applied",
                               "reason": "induction variable read in closed form (steps of xy)"}],
                "validation": {"status": "passed"}}
    promoted = {"decisions": [{"pass": "normalize", "action": "applied",
                               "reason": "global accumulator promoted to a register across the loop"}],
                "validation": {"status": "passed"}}
    assert not kernel_transformed(restated)
    assert kernel_transformed(promoted)


def test_causes_from_the_program_text(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("__constant__ float coeffs[9];\n__global__ void k(float *a) {\n  bool flag = true;\n}\n")
    undeclared = f"{src}:5:3: error: use of undeclared identifier 'coeffs'"
    entry = {"result": "error", "first_line": undeclared, "file": "k.cu", "kernels": [],
             "context": error_context(undeclared, [str(src)])}
    assert file_cause(entry) == "__constant__ / __device__ globals undeclared"
    syntax = f"{src}:3:8: error: expected expression or statement before 'flag'"
    entry = dict(entry, first_line=syntax, context=error_context(syntax, [str(src)]))
    assert file_cause(entry) == "bool in device code"
    src.write_text("struct Particle { float x; };\n__global__ void k(Particle *p) { }\n")
    syntax = f"{src}:2:28: error: expected expression or statement before '*'"
    entry = dict(entry, first_line=syntax, context=error_context(syntax, [str(src)]))
    assert file_cause(entry) == "struct types (parameters, fields)"
    src.write_text("__global__ void k(clock_t *t) { }\n")
    syntax = f"{src}:1:38: error: expected expression or statement before '*'"
    entry = dict(entry, first_line=syntax, context=error_context(syntax, [str(src)]))
    assert file_cause(entry) == "C / CUDA header types (uint32_t, uint, size_t, clock_t, ...)"
    src.write_text("__global__ void init(curandState *const states) { }\n")
    entry = dict(entry, first_line=f"{src}:1:38: error: expected expression or statement before '*'")
    entry["context"] = error_context(entry["first_line"], [str(src)])
    assert file_cause(entry) == "types of CUDA libraries (curand, cuFFT, cooperative groups, graphs)"
    printf = dict(entry, first_line=f"{src}:1:1: error: use of undeclared identifier 'printf'", context={})
    assert file_cause(printf) == "C library call in device code (printf, assert, ...)"
    no_kernel = dict(entry, first_line="m.cu:1:1: error: no __global__ kernel in 'm.cu'", context={},
                     file="m.cu", kernels=[{"file": "kernel.cu", "name": "k"}])
    assert file_cause(no_kernel) == "kernels live in an included file"
    assert file_cause(dict(no_kernel, kernels=[])) == "host-only .cu file (no kernel at all)"


def test_kernel_cause_from_its_notes(tmp_path):
    kernel = {"name": "saxpy", "file": "s.cu", "path": str(tmp_path / "s.cu"), "line": 3, "end_line": 8,
              "naive_style": True}
    entry = {"file": "s.cu", "reported": ["saxpy"], "passed_through": [],
             "notes": [f"{tmp_path / 's.cu'}:20:1: note: coalesce: other kernel: not affine",
                       f"{tmp_path / 's.cu'}:5:9: note: merge: kernel: the loop is not canonical"]}
    assert kernel_cause(kernel, entry) == "grid-stride loop (not canonical)"
    passed = dict(entry, reported=[], passed_through=["saxpy"],
                  notes=[f"{tmp_path / 's.cu'}:3:1: note: 'saxpy' uses C++ (template, typename); passed through"])
    assert kernel_cause(kernel, passed) == "template kernel passed through"
    restrict_only = dict(entry, notes=[f"{tmp_path / 's.cu'}:3:1: note: restrict: may alias: 'a' is a parameter of "
                                       "the function that launches the kernel"])
    assert kernel_cause(kernel, restrict_only) == "aliasing not proved"
    assert kernel_cause(dict(kernel, file="k.cuh"), dict(entry, reported=[])) == \
        "kernel in an included file (not read)"


def test_kernel_cause_from_the_front_ends_pass_through_notes(tmp_path):
    """The notes of the multi-file front end's pass-through are sorted by what they name (an instance's note
    names it with its template arguments)."""
    kernel = {"name": "step", "file": "k.cu", "path": str(tmp_path / "k.cu"), "line": 30, "end_line": 40,
              "naive_style": True}
    entry = {"file": "k.cu", "reported": [], "passed_through": ["step"]}

    def cause(note: str) -> str:
        return kernel_cause(kernel, dict(entry, notes=[f"{tmp_path / 'k.cu'}:30:1: note: {note}"]))
    assert cause("'step' passed through unchanged: it calls 'flux', which is passed through (it uses C++)") == \
        "passed through: calls a __device__ function passed through (a C++ reference parameter...)"
    assert cause("'step' passed through unchanged: use of undeclared identifier 'tex1Dfetch' at k.cu:33:5") == \
        "passed through: texture fetch (tex1Dfetch / tex2D: texture references)"
    assert cause("'step' passed through unchanged: Invalid declaration before: knode at k.cu:31:3") == \
        "passed through: struct type named without `struct` (C++ style) or a union: not parsed"
    assert cause("'step<WIN_SX, WIN_SY>' (line 50): the argument 'WIN_SX' of 'WIN_SX' is not an integer "
                 "constant; passed through") == \
        "passed through: template: its arguments are not integer constants or are deduced"
    instance = dict(entry, reported=["step__float_256"], passed_through=[],
                    notes=[f"{tmp_path / 'k.cu'}:30:1: note: restrict: pointer parameters: may alias: no launch of "
                           "'step__float_256' in this file"])
    assert kernel_cause(kernel, instance) == "launch unknown or refused"    # an instance, by its name
    wmma = dict(entry, notes=[f"{tmp_path / 'k.cu'}:30:1: note: 'step' uses C++ (qualified name "
                              "'wmma::fragment<wmma::accumulator, 16, 16, 16, float>', line 245); passed through"])
    assert kernel_cause(kernel, wmma) == "C++ passed through: qualified name 'wmma::...'"
    unseen = dict(entry, passed_through=[], notes=[f"{tmp_path / 'k.cu'}:1:1: note: no __global__ kernel in 'k.cu'"])
    assert kernel_cause(kernel, unseen).startswith("kernel not seen: 'no __global__ kernel'")
    left = dict(entry, reported=["step"], passed_through=[],
                notes=[f"{tmp_path / 'k.cu'}:30:1: note: 'step' left as written: the parameter 'p' is a pointer "
                       "to a struct ('Point'), whose members the analyses do not model"])
    assert kernel_cause(kernel, left) == "pointer-to-struct parameter (members not modelled)"


def test_corpus_run_table_and_json(tmp_path):
    _suite(tmp_path / "suite")
    out_json = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "corpus.py"), str(tmp_path / "suite"),
                           "--json", str(out_json), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert re.search(r"^\| prog \| [01]/1 \| 1 \| 1 \| [01] \| [01] \| ", proc.stdout, re.M), proc.stdout + proc.stderr
    run = json.loads(out_json.read_text())
    assert run["complete"] is True
    [row] = run["rows"]
    [entry] = row["files"]
    assert entry["file"] == "main.cu" and entry["defines"] == ["NDEBUG_RUN", "TIMING", "BLOCK=256"]
    assert [k["name"] for k in entry["kernels"]] == ["scale"]
    # compiled with -o OUTDIR/: the kernel of the included kernel.cu is rewritten in that file's copy
    prog = tmp_path / "suite" / "cuda" / "prog"
    assert entry["result"] == "ok", entry["first_line"]
    assert entry["changed"] == [str(prog / "main.cu"), str(prog / "kernel.cu")]   # the launch site too
    assert entry["transformed_at"] == [[str(prog / "kernel.cu"), "scale"]]
    copy = Path(entry["written"][str(prog / "kernel.cu")])
    assert copy.read_text() != KERNEL_CU and Path(entry["output"]).parent == copy.parent
    assert row["kernels_by_file"] == {"kernel.cu": {"kernels": 1, "naive_style": 1, "transformed": 1}}
    assert run["summary"]["totals"]["transformed"] == 1
    assert proc.returncode == 0
    again = subprocess.run([sys.executable, str(ROOT / "bench" / "corpus.py"), "--summary", str(out_json)],
                           capture_output=True, text=True)
    assert again.stdout.split("### rejected")[0] == proc.stdout.split("### rejected")[0]


def test_changed_files_are_compared_not_taken_from_the_report(tmp_path):
    """A one-file program's report lists no changed files: the copies are compared with the originals."""
    (tmp_path / "a.cu").write_text("naive\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.cu").write_text("optimized\n")
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"file": str(tmp_path / "a.cu"), "kernels": [],
                                  "written": [str(tmp_path / "out" / "a.cu")]}))
    outcome = CompileOutcome("ok")
    read_report(str(report), outcome)
    assert outcome.written == {str(tmp_path / "a.cu"): str(tmp_path / "out" / "a.cu")}
    assert outcome.changed == [str(tmp_path / "a.cu")]
    (tmp_path / "out" / "a.cu").write_text("naive\n")
    outcome = CompileOutcome("ok")
    read_report(str(report), outcome)
    assert outcome.changed == []


def test_output_include_dirs_point_at_the_copies_first(tmp_path):
    """An -I directory inside the program's tree is searched in the output tree first (a header found through
    it may have been rewritten), the original after it; one outside the tree only as it is."""
    src, out = tmp_path / "src", tmp_path / "out"
    for d in (src / "prog", src / "common", out / "prog", out / "common", tmp_path / "elsewhere"):
        d.mkdir(parents=True)
    written = {str(src / "prog" / "main.cu"): str(out / "prog" / "main.cu"),
               str(src / "common" / "k.h"): str(out / "common" / "k.h")}
    dirs = [str(src / "common"), str(tmp_path / "elsewhere")]
    assert output_include_dirs(written, dirs) == [str(out / "common"), *dirs]
    assert output_include_dirs({}, dirs) == dirs


@requires_nvcc
def test_nvcc_links_a_unit_with_its_host_files(tmp_path):
    """A build unit whose main() is in a host .c file links with it: the check covers the whole program."""
    (tmp_path / "k.cu").write_text('__global__ void k(float *a) { }\nextern "C" void launch(float *a) '
                                   '{ k<<<1, 1>>>(a); }\n')
    (tmp_path / "main.c").write_text("void launch(float *a);\nint main(void) { launch(0); return 0; }\n")
    sources = [str(tmp_path / "k.cu"), str(tmp_path / "main.c")]
    assert nvcc_builds(sources, [], [], str(tmp_path), link=True) == (True, "")
    ok, message = nvcc_builds(sources[:1], [], [], str(tmp_path), link=True)
    assert not ok and "undefined reference" in message


@requires_nvcc
def test_nvcc_check_links_a_whole_program(tmp_path):
    """A definition whose parameters no longer match the prototype compiles with -c but does not link: the
    check of a one-file program links (gaussian's Fan2 once came out like this)."""
    src = tmp_path / "p.cu"
    src.write_text("__global__ void k(float *a);\nint main() { k<<<1, 1>>>((float *)0); return 0; }\n"
                   "__global__ void k(const float *__restrict__ a) { }\n")
    assert nvcc_builds(str(src), [], [], str(tmp_path))[0]
    ok, message = nvcc_builds(str(src), [], [], str(tmp_path), link=True)
    assert not ok and "undefined reference" in message


@requires_nvcc
def test_nvcc_finds_headers_the_suite_expects_installed(tmp_path):
    """`--system-include`: a header the suite expects beside the toolkit (Rodinia's cfd: <helper_cuda.h>)."""
    (tmp_path / "sdk").mkdir()
    (tmp_path / "sdk" / "helper_sdk.h").write_text("#define SDK_BLOCK 64\n")
    (tmp_path / "k.cu").write_text("#include <helper_sdk.h>\n__global__ void k(float *a) { a[SDK_BLOCK] = 0; }\n")
    assert not nvcc_builds(str(tmp_path / "k.cu"), [], [], str(tmp_path))[0]
    assert nvcc_builds(str(tmp_path / "k.cu"), [], [], str(tmp_path), system_dirs=(str(tmp_path / "sdk"),)) == (True, "")


def test_a_host_file_the_main_file_includes_is_not_linked_again(tmp_path):
    """srad_v1: the Makefile names graphics.c, which main.cu includes; linked beside it, it would not build."""
    from corpus_kit.sources import linked_host_files
    (tmp_path / "graphics.c").write_text("void draw(fp *image) { }\n")
    (tmp_path / "timer.c").write_text("long ticks(void) { return 0; }\n")
    (tmp_path / "main.cu").write_text('typedef float fp;\n#include "graphics.c"\nint main(void) { return 0; }\n')
    hosts = [str(tmp_path / "graphics.c"), str(tmp_path / "timer.c")]
    assert linked_host_files(hosts, [str(tmp_path / "main.cu")], []) == [str(tmp_path / "timer.c")]


def test_a_dispatched_kernel_counts_as_transformed_and_the_table_says_so():
    """A kernel launched optimized only from a size on (the naive one kept for smaller launches) is transformed,
    marked "dispatched" in the program's cell and counted apart in the totals."""
    from corpus_kit import table
    outcome = {"result": "ok", "transformed": ["step", "flux"], "transformed_at": [[None, "step"], [None, "flux"]],
               "dispatched": ["step"], "first_line": "", "nvcc_output": None, "reported": ["step", "flux", "other"],
               "passed_through": [], "notes": []}
    kernels = [{"name": n, "file": "k.cu", "path": "k.cu", "naive_style": True} for n in ("step", "flux", "other")]
    row = {"program": "cfd", "files": [dict(outcome, file="k.cu", kernels=kernels)]}
    counts = table.program_counts(row)
    assert counts["transformed"] == 2 and counts["dispatched"] == 1 and counts["passed_through"] == 1
    summary = table.summarize([row])
    text = table.markdown([row], summary, "rodinia")
    assert "| cfd | 1/1 | 3 | 3 | 2 (1 dispatched) | 1 | ok |" in text
    assert "dispatched by the launch's size: 1" in text
