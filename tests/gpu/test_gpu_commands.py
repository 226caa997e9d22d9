"""run / tune / bench without a GPU: harness builds (--build-only), variant enumeration and dedupe, the tuning
database and compile's use of it, the results parser and the bench table/JSON/plot from canned output, split
mode (--emit, --from-results), and the messages for a missing nvcc or GPU."""
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpgpu_opt.cli import app
from gpgpu_opt.frontend import load_program
from gpgpu_opt import toolchain
from gpgpu_opt.gpu import report, script
from gpgpu_opt.gpu.results import GpuUnavailable, parse_output
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.targets import get_target
from gpgpu_opt.tune import command, rank, variants
from gpgpu_opt.tune.db import Choice, Entry, TuningDB, source_hash

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

CANNED = """# device: NVIDIA H200, 132 SMs, L2 62914560 bytes
# harness: mv (rows=16384, cols=16384), 1073872896 bytes, 5.369e+08 flops
# CHECK optimized y: 16384 elements ok, max rel err 2.384e-07
# TIMING naive: min 2.1 ms, median 2.2 ms, max 2.3 ms over 30 runs
RESULT mv naive 2.2000 488.1 244.0 base
# TIMING optimized: min 0.26 ms, median 0.27 ms, max 0.28 ms over 30 runs
RESULT mv optimized 0.2700 3977.3 1988.5 ok
# CHECK reference y: 16384 elements ok, max rel err 1.192e-07
RESULT mv cublasSgemv 0.2600 4130.3 2065.2 ok
"""


def test_results_parser_and_run_table():
    run = parse_output(CANNED, "mv", 0)
    assert run.device == "NVIDIA H200" and run.kernel == "mv" and run.ok
    assert [r.variant for r in run.results] == ["naive", "optimized", "cublasSgemv"]
    assert run.result("optimized").max_rel_error == pytest.approx(2.384e-07)
    assert run.speedup("optimized") == pytest.approx(2.2 / 0.27)
    table = report.markdown(report.bench_rows([run], get_target("sm_90")))
    # CHECK: | mv | 2.2000 | 0.2700 | cublasSgemv | 0.2600 | 8.15 | 0.96 | 3977.3 | 1988.5 | 83% | ok |
    assert "| mv | 2.2000 | 0.2700 | cublasSgemv | 0.2600 | 8.15 | 0.96 | 3977.3 | 1988.5 | 83% | ok |" in table
    assert "GPU: NVIDIA H200" in table
    from gpgpu_opt.gpu.results import run_table
    assert "| optimized | 0.2700 | 3977.3 | 1988.5 | 8.15 | 2.38e-07 | ok |" in run_table(run)


def test_failed_check_and_missing_gpu():
    failed = parse_output(CANNED.replace("1988.5 ok", "1988.5 FAIL"), "mv", 1)
    assert not failed.ok and report.bench_rows([failed], get_target("sm_90"))[0]["check"] == "FAIL"
    stderr = "h.cu:231: CUDA error in cudaSetDevice(0): CUDA driver version is insufficient for CUDA runtime version"
    with pytest.raises(GpuUnavailable, match="no usable GPU on this machine .*--build-only"):
        parse_output("", "mv", 2, stderr)
    other = parse_output("# device: X, 1 SMs\n", "mv", 2, "h.cu:9: CUDA error in k: an illegal memory access")
    assert "illegal memory access" in other.error and not other.ok


def test_missing_nvcc_message(monkeypatch):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(toolchain, "_wheel_nvcc", lambda: None)
    with pytest.raises(toolchain.ToolchainError, match="nvcc not found: set CUDA_HOME"):
        toolchain.find_nvcc()
    result = runner.invoke(app, ["run", str(ROOT / "inputs" / "mv.cu"), "--size", "rows=64", "--size", "cols=64",
                                 "--build-only"])
    assert result.exit_code == 2 and "error: nvcc not found" in result.output
    assert "Traceback" not in result.output


def test_bench_split_mode_table_json_plot(tmp_path):
    run_sh = script.emit(str(tmp_path), "bench", "sm_90", {"mv": "// harness\n"}, {"mv"}, {"target": "sm_90"})
    text = run_sh.read_text()
    assert text.startswith("#!/usr/bin/env bash") and 'names=(mv)' in text and "-DHARNESS_NO_REFERENCE" in text
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(tmp_path / "manifest.json", results)
    (results / "mv.out").write_text(CANNED)
    (results / "mv.rc").write_text("0\n")
    out_json = tmp_path / "bench.json"
    args = ["bench", "--from-results", str(results), "--json", str(out_json)]
    plot = tmp_path / "bench.png"
    try:
        import matplotlib  # noqa: F401
        args += ["--plot", str(plot)]
    except ImportError:
        plot = None
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "| mv | 2.2000 | 0.2700 | cublasSgemv |" in result.output
    data = json.loads(out_json.read_text())
    assert data["benchmarks"][0]["speedup"] == pytest.approx(2.2 / 0.27)
    if plot is not None:
        assert plot.read_bytes()[:4] == b"\x89PNG"


def test_variant_plan_and_dedupe(monkeypatch):
    planned = variants.plan_variants(["restrict", "normalize", "coalesce", "merge"], (1, 4), uses_y=True)
    labels = [v.label for v in planned]
    assert labels[0] == "model" and "merge-x1-y2" in labels and "merge-x2-y8" in labels
    assert "no-coalesce" in labels and "no-merge" in labels and "merge-x0-y2" not in labels
    assert next(v for v in planned if v.label == "no-coalesce").choice.passes == ("restrict", "normalize", "merge")
    monkeypatch.setattr(variants, "nvcc_available", lambda: False)
    program = load_program(str(ROOT / "inputs" / "vv.cu"), include_dirs=[str(ROOT / "inputs")])
    found = variants.build_variants(program, get_target("sm_90"), "vv", {}, parse_pass_list(None))
    assert found.model_factors == (4, 16)          # float4 in x (vectorize), 16 rows per thread (merge)
    by_label = {v.label: v for v in found.variants}
    # asking for the model's own factors compiles to the model's kernel: one variant
    assert by_label["merge-x4-y16"].duplicate_of == "model"
    assert by_label["merge-x2-y8"].duplicate_of is None
    assert len(found.unique) == len({variants._identity(v.result) for v in found.unique})
    # the variants are read off the model's plan: vv's schedules a widening and merged rows, so the passes that
    # schedule nothing for it (prefetch, partition's block order) are not tried without
    assert by_label["model"].schedule.describe() == "widening (width 4); rows (factor 16)"
    assert "no-vectorize" in by_label and "no-merge" in by_label and "no-prefetch" not in by_label
    # the x factor means nothing beside a widening of 4: the same plan, one variant
    assert by_label["merge-x4-y8"].duplicate_of == "merge-x2-y8"
    assert by_label["merge-x2-y8"].schedule.rows.factor == 8


def test_spearman():
    assert rank.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert rank.spearman([1, 2], [1, 2]) is None


def test_tuning_db_and_compile_uses_it(tmp_path):
    db = TuningDB(tmp_path / "tuning.json")
    program = load_program(str(ROOT / "inputs" / "vv.cu"), include_dirs=[str(ROOT / "inputs")])
    key = source_hash(program.kernels[0])
    entry = Entry("vv", key, {}, "sm_90", "NVIDIA H200", Choice(("restrict", "normalize", "coalesce", "merge"),
                                                               "x=1,y=8"), "merge-x1-y8", 0.5, 2.0)
    db.store(entry)
    db.store(entry)  # the same key replaces
    assert len(db.entries()) == 1
    assert db.lookup(key, "sm_90").choice.merge == "x=1,y=8"
    assert db.lookup(key, "sm_80") is None and db.lookup("0" * 16, "sm_90") is None
    assert db.lookup(key, "sm_90", gpu="NVIDIA H100") is None
    assert db.lookup(key, "sm_90", sizes={"n": 1}) is None
    out, rep = tmp_path / "vv_opt.cu", tmp_path / "vv.json"
    result = runner.invoke(app, ["compile", "-v", str(ROOT / "inputs" / "vv.cu"), "-o", str(out), "--report",
                                 str(rep), "--db", str(db.path)])
    assert result.exit_code == 0, result.output
    assert "using the tuned choice merge-x1-y8" in result.output and "--no-tuned ignores it" in result.output
    tuned = json.loads(rep.read_text())
    assert tuned["tuned"]["choice"]["merge"] == "x=1,y=8"
    assert tuned["kernels"][0]["launch"]["outputs_per_block"] == [32, 64]
    result = runner.invoke(app, ["compile", str(ROOT / "inputs" / "vv.cu"), "-o", str(out), "--report", str(rep),
                                 "--db", str(db.path), "--no-tuned"])
    assert result.exit_code == 0 and "tuned" not in json.loads(rep.read_text())


def test_tune_model_only_without_the_model_says_so(tmp_path, monkeypatch):
    """At once: the variants (each planned and checked, some 20 s) are not compiled for a ranking that cannot
    be made."""
    def planned(*args):
        raise AssertionError("the variants were compiled before the model was looked for")

    monkeypatch.setattr(rank, "model_available", lambda: False)
    monkeypatch.setattr(command, "variants_for", planned)
    result = runner.invoke(app, ["tune", str(ROOT / "inputs" / "vv.cu"), "--model-only", "--db",
                                 str(tmp_path / "db.json")])
    assert result.exit_code == 2 and "needs the offline model" in result.output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_run_build_only(tmp_path):
    result = runner.invoke(app, ["run", str(ROOT / "inputs" / "mv.cu"), "--size", "rows=1000", "--size", "cols=700",
                                 "--reference", "mv", "--build-only", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mv").exists() and "built" in result.output
    text = (tmp_path / "mv.cu").read_text()
    assert "mv_opt<<<opt_grid, opt_block>>>" in text and '--runs' in text and "cublasSgemv" in text
