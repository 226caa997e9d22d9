"""`compile --report`: each kernel's registers, shared memory and spills from nvcc's build of the output. That
build is made only for the report: without `--report`, or with `--no-resource-usage`, nvcc is not run."""
import json
import shutil

import pytest

import gpgpu_opt.nvcc
from tests.cli_in_process import run_cli
from tests.conftest import ROOT


@pytest.fixture
def builds(monkeypatch):
    """The programs whose resource usage was asked of nvcc (program_resource_usage, counted, then run)."""
    asked = []
    real = gpgpu_opt.nvcc.program_resource_usage

    def counted(result, target, include_dirs):
        asked.append(result.program.main_file)
        return real(result, target, include_dirs)

    monkeypatch.setattr(gpgpu_opt.nvcc, "program_resource_usage", counted)
    return asked


def _compile(tmp_path, *extra):
    return run_cli("compile", ROOT / "inputs" / "vv.cu", "-o", tmp_path / "vv.cu", "--target", "sm_90", *extra)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_the_report_carries_each_kernels_registers(tmp_path, builds):
    proc = _compile(tmp_path, "--report", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr
    (kernel,) = json.loads((tmp_path / "r.json").read_text())["kernels"]
    assert kernel["resources"]["registers"] > 0 and len(builds) == 1


def test_no_report_no_nvcc_build(tmp_path, builds):
    proc = _compile(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert builds == [] and (tmp_path / "vv.cu").exists()


def test_no_resource_usage_leaves_them_out_of_the_report(tmp_path, builds):
    proc = _compile(tmp_path, "--report", tmp_path / "r.json", "--no-resource-usage")
    assert proc.returncode == 0, proc.stderr
    (kernel,) = json.loads((tmp_path / "r.json").read_text())["kernels"]
    assert "resources" not in kernel and builds == []
