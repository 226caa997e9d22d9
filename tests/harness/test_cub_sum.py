"""The `cub_sum` reference of the run harness (reductions): the benchmark harnesses `reduction` (the paper's
form) and `sum_atomic` (one atomicAdd per element) time cub::DeviceReduce::Sum with its temporary storage
allocated outside the timed region, check our total against CUB's, and build with nvcc."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpgpu_opt.gpu import benchmarks
from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.harness import generate_harness
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

ROOT = Path(__file__).resolve().parents[2]


def _generate(name: str) -> str:
    text, _ = benchmarks.generate(name, "sm_90", None, 30)
    return text


@pytest.mark.parametrize("name,kernel,out", [("reduction", "reduction", "out"), ("sum_atomic", "sum_kernel", "total")])
def test_cub_sum_harness_times_cub_with_storage_outside_the_timed_region(name, kernel, out):
    text = _generate(name)
    assert "#include <cub/cub.cuh>" in text and "cublas" not in text
    assert f"__global__ void {kernel}_naive(" in text and f"__global__ void {kernel}_opt(" in text
    reference = text.split("/* Reference:")[1]
    sizing = reference.index("CHECK(cudaMalloc(&d_temp, temp_bytes));")
    assert sizing < reference.index("auto run_ref = [&]()") < reference.index('median_ms("cub::DeviceReduce::Sum"')
    assert f"# CHECK reference: total of {out}[]" in reference
    assert 'result_line("cub::DeviceReduce::Sum", ref_ms' in reference
    assert "CHECK(cudaFree(d_temp));" in reference
    if name == "reduction":
        # the user's launch: 1024 blocks of 256, each thread a segment of 256 elements; the naive block kept
        assert "Sizes: n=67108864, segSize=256" in text
        assert "const dim3 naive_grid(1024, 1), naive_block(256, 1);" in text
        assert "const dim3 opt_grid(1024, 1), opt_block(256, 1);" in text
        assert "const double tol = 0.0001;" in text
    else:
        # (n + 255) / 256 blocks of 256 naively; one wave of grid-stride blocks, the total less its initial value
        assert "const dim3 naive_grid(262144, 1), naive_block(256, 1);" in text
        assert re.search(r"const dim3 opt_grid\(\d+, 1\), opt_block\(256, 1\);", text)
        assert "(double)r_total[k] - (double)h_total[k]" in reference


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", ["sum_atomic", "reduction"])
def test_cub_sum_harness_compiles(name, tmp_path):
    """Built device-only: -cubin runs nvcc's front end over the whole file (host code and CUB's host templates
    instantiated and type-checked) and compiles every kernel. The host compiler's pass over CUB's host side
    (about 15 of 21 CPU-seconds a build) checks CUB, not the harness; the other harnesses are built whole
    (test_harness.py), and `run`/`bench` build this one whole on the GPU machine."""
    src = tmp_path / f"{name}.cu"
    src.write_text(_generate(name))
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", str(src), "-o", str(tmp_path / f"{name}.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_cub_sum_needs_one_float_input():
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(ROOT / "tests" / "programs" / "dot_atomic.cu"), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics)
    with pytest.raises(CompileError, match="exactly one float input"):
        generate_harness(program, result, "dot_kernel", {"n": 1024}, (1024, 1), reference="cub_sum")
