"""The whole programs of tests/programs (benchmark-suite style: no __restrict__, sizes as parameters or
macros, block shapes from macros, a utility .c include with disabled blocks): each compiles, nvcc builds
the output, and `verify` passes at small sizes. The report carries the alias proof from the launch sites."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import requires_nvcc

HERE = Path(__file__).resolve().parent
PROGRAMS = sorted(p.name for p in HERE.glob("*.cu"))

#: Small sizes for the programs whose sizes are macros (each is guarded by #ifndef), so that compile's own
#: check can emulate them: none divides the tiles.
SMALL = {
    "gemm.cu": ["NI=37", "NJ=45", "NK=29"],
    "3mm.cu": ["NI=37", "NJ=45", "NK=29", "NL=41", "NM=23"],
    "bicg.cu": ["NX=45", "NY=37"],
    "mvt_racy.cu": ["N=45"],
    "syrk.cu": ["N=37", "M=29"],
    "correlation.cu": ["M=37", "N=45"],
    "2DConvolution.cu": ["NI=37", "NJ=45"],
    "trisolv.cu": ["N=29", "M=45"],
    "rank1_update.cu": ["NI=37", "NJ=45"],
}
#: Gathers need the extent of the array they index into (verify cannot see it in the subscript).
EXTENTS = {"gather.cu": ["src=2880", "v=64", "x=64"]}


def _cli(*args, cwd=HERE):
    return run_cli(*args, cwd=cwd)


def _defines(name):
    return [f"-D{d}" for d in SMALL.get(name, [])]


class CompiledPrograms(dict):
    """The programs compiled for sm_90, each on first use: (output path, report, stderr) by name. Lazy, so
    that a worker compiles only the programs of the tests it was sent (conftest.py sends this file's tests
    in units of one program: see SPLIT_BY_PARAMETER), and each of them once."""

    def __init__(self, out: Path):
        super().__init__()
        self.out = out

    def __missing__(self, name):
        target = self.out / name
        report = self.out / f"{name}.json"
        proc = _cli("compile", name, "-o", str(target), "--report", str(report), "--no-resource-usage",
                    *_defines(name))
        assert proc.returncode == 0, proc.stderr
        self[name] = (target, json.loads(report.read_text()), proc.stderr)
        return self[name]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every program compiled once for sm_90, on first use: (output path, report, stderr) by name."""
    out = tmp_path_factory.mktemp("programs")
    (out / "common").symlink_to(HERE / "common")
    return CompiledPrograms(out)


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_pointer_parameter_is_proved_not_to_alias(compiled, name):
    _, report, _ = compiled[name]
    for kernel in report["kernels"]:
        assert kernel["aliasing"]["restrict"], (kernel["name"], kernel["aliasing"])
        if kernel["aliasing"]["how"] == "launch sites":
            assert kernel["aliasing"]["launch_sites"]


@requires_nvcc
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_output_builds_and_verifies(compiled, name, tmp_path):
    output, report, _ = compiled[name]
    # No -D here: `-DN=45` on nvcc's command line would also rename N inside CUDA's own headers.
    build = subprocess.run(["nvcc", "-arch=sm_90", "-I", str(HERE), "-o", str(tmp_path / "a.out"), str(output)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    extents = [f"--extent={e}" for e in EXTENTS.get(name, [])]
    proc = _cli("verify", name, *_defines(name), *extents)
    if name == "mvt_racy.cu":
        assert proc.returncode == 1 and "the naive kernel races" in proc.stdout, proc.stdout + proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    for kernel in report["kernels"]:
        validation = kernel.get("validation", {"status": "not needed"})
        if validation.get("emulated") is False:  # only a gather whose target's size the subscript does not tell:
            # its check cannot run, so what the passes did is not written
            assert validation["status"] == "rolled back" and "--extent" in validation["detail"], validation
        else:
            assert validation["status"] in ("passed", "not needed"), validation


@pytest.mark.parametrize("name", ["gemm.cu"])   # one program: its unit of work (conftest)
def test_gemm_promotes_c_with_its_beta_update_and_keeps_the_source_style(compiled, name):
    output, report, _ = compiled[name]
    text = output.read_text()
    kernel = report["kernels"][0]
    applied = [d for d in kernel["decisions"] if d["action"] == "applied"]
    assert any(d["pass"] == "normalize" and d["subject"].startswith("c[") and "updates before the loop" in d["reason"]
               for d in applied)
    # then the register tile keeps each output's start (load, beta update) and store once, per output
    body = text.split("void gemm_kernel")[1].split("\n}\n")[0]
    assert body.count("c_acc[r][c2] *= 1.2f;") == 1 and body.count("c_acc[r][c2] += ") == 1
    assert body.count("] = c_acc[r][c2];") == 1
    assert len(re.findall(r"\bc\[", body)) == 2  # one load before the loop, one store after it


def test_gemm_on_g80_stages_its_reads(tmp_path):
    report = tmp_path / "r.json"
    proc = _cli("compile", "gemm.cu", "-o", str(tmp_path / "gemm.cu"), "--target", "g80", "--report", str(report),
                *_defines("gemm.cu"))
    assert proc.returncode == 0, proc.stderr
    decisions = json.loads(report.read_text())["kernels"][0]["decisions"]
    assert any(d["pass"] == "coalesce" and d["action"] == "applied" and d["subject"].startswith("a[")
               for d in decisions)


@pytest.mark.parametrize("name", ["mvt_racy.cu"])   # one program: its unit of work (conftest)
def test_the_racy_launch_is_reported_and_left_as_written(compiled, name):
    output, report, stderr = compiled[name]
    assert stderr.count("warning: the naive launch races") == 2
    assert "differ only in threadIdx.y" in stderr and "block 32x8" in stderr
    assert output.read_text() == (HERE / "mvt_racy.cu").read_text()
    for kernel in report["kernels"]:
        assert kernel["passes"] == [] and kernel["naive_launch_races"][0]["dimension"] == "threadIdx.y"


def test_a_program_with_a_utility_include_under_disabled_profiling_compiles_without_it():
    assert "#ifdef BENCH_PAPI" in (HERE / "common" / "bench_utils.c").read_text()
    assert not (HERE / "common" / "papi_counters.list").exists()


@pytest.mark.parametrize("name", ["dot_atomic.cu"])   # one program: its unit of work (conftest)
def test_unchanged_kernels_keep_the_users_text(compiled, name):
    output, report, _ = compiled[name]
    text = output.read_text()
    scale = next(k for k in report["kernels"] if k["name"] == "scale_kernel")
    if any(d["action"] == "applied" and d["pass"] not in ("restrict", "normalize") for d in scale["decisions"]):
        assert "float4" in text.split("__global__ void scale_kernel")[1]   # widened (vectorize) instead
    else:
        assert "c[i] = a[i] * result[0] / n;" in text
        assert "DATA_TYPE" in text.split("__global__ void scale_kernel")[1].split("{")[0]


def test_trisolv_down_loops_are_staged_on_g80_and_verify(tmp_path):
    report = tmp_path / "r.json"
    proc = _cli("compile", "trisolv.cu", "-o", str(tmp_path / "t.cu"), "--target", "g80", "--report", str(report),
                *_defines("trisolv.cu"))
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads(report.read_text())["kernels"][0]
    assert any(d["pass"] == "coalesce" and d["action"] == "applied" and d["subject"].startswith("U[")
               for d in kernel["decisions"]), kernel["decisions"]
    assert kernel["validation"]["status"] == "passed"
    assert "counting down as it did" in (tmp_path / "t.cu").read_text()


@pytest.mark.parametrize("name, kernel", [("atax.cu", "atax_kernel1"), ("mvt.cu", "mvt_kernel1")])
def test_row_walking_kernels_get_a_warp_per_output_on_sm90(compiled, name, kernel):
    """The suite style declares the counter before the loop (`int j; for (j = 0; ...)`): no obstacle. (bicg
    has the same kernel, but compiled here with its macros at 45: a loop too short to split, rightly.)"""
    output, report, _ = compiled[name]
    found = next(k for k in report["kernels"] if k["name"] == kernel)
    assert any(d["pass"] == "merge" and d["action"] == "applied" for d in found["decisions"]), found["decisions"]
    assert found["launch"]["block"] == [32, 8] and found["validation"]["status"] == "passed"
    assert "__shfl_down_sync" in output.read_text().split(f"void {kernel}")[1].split("\n}\n")[0]


@pytest.mark.parametrize("name", ["rank1_update.cu"])   # one program: its unit of work (conftest)
def test_rank1_update_is_widened_and_checked(compiled, name):
    """The rank-1 update's rows are 4 floats per thread along x (vectorize: j + 3 < nj tested, a scalar path for
    the tail), checked by compile. The widened kernel's two paths declare the row's locals twice, so the thread
    merge in y that it got before vectorize (v[j] and bias[j] read once for 4 rows) now declines."""
    output, report, _ = compiled[name]
    (kernel,) = report["kernels"]
    assert any(d["pass"] == "vectorize" and d["action"] == "applied" for d in kernel["decisions"]), kernel["decisions"]
    assert kernel["validation"]["status"] == "passed"
    body = output.read_text().split("void rank1_kernel")[1].split("\n}\n")[0]
    assert "float4" in body


@pytest.mark.parametrize("name", ["image_filter.cu"])   # one program: its unit of work (conftest)
def test_image_filter_is_register_blocked(compiled, name):
    """A KSIZE x KSIZE filter over a host-padded image (sizes as parameters, the pitch a local, `int i, j;`
    declared before the loops, 32x8 naive blocks): the convolution tile with its halo, checked by compile."""
    output, report, _ = compiled[name]
    (kernel,) = report["kernels"]
    assert any(d["pass"] == "merge" and d["action"] == "applied" and d["reason"].startswith("convolution register")
               for d in kernel["decisions"]), kernel["decisions"]
    assert kernel["launch"]["block"] == [16, 8] and kernel["launch"]["outputs_per_block"] == [128, 64]
    assert kernel["validation"]["status"] == "passed"
    body = output.read_text().split("void filter_kernel")[1].split("\n}\n")[0]
    assert "__shared__ __align__(16) float tile_padded[70][136];" in body   # 64 + 6 rows, 128 + 6 columns
    assert "float acc[8][8];" in body and body.count("__syncthreads();") == 1
