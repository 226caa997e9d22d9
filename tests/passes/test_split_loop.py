"""The merge pass's loop split (several threads per output): the warp form for row-wise loops (mv), the
block-column form for loops already coalesced across outputs (tmv), equivalence at ragged sizes in the
emulator, what it leaves alone and why, that coalesce leaves it the kernels it takes, and nvcc."""
from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"

ROWS = """
__global__ void rows(const float *A, const float *x, float *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0;
        for (int c = 0; c < cols; c++) {
            sum += A[r * cols + c] * x[c];
        }
        y[r] = sum;
    }
}
"""

COLUMNS = """
__global__ void columns(const float *A, const float *x, float *y, int w, int h)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < w) {
        float sum = 0;
        for (int k = 0; k < h; k++) {
            float a = A[k * w + i];
            sum += a * x[k];
        }
        y[i] = sum;
    }
}
"""


def compile_text(tmp_path: Path, source: str, target: str = "sm_90", passes: str | None = None, bindings=None):
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return compile_file(path, target, passes, bindings)


def compile_file(path: Path, target: str = "sm_90", passes: str | None = None, bindings=None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, bindings or {})


def only(result):
    (kernel,) = result.kernels
    return kernel


def merge_decisions(kernel, action: str) -> list[str]:
    return [d.reason for d in kernel.context.log.decisions if d.pass_name == "merge" and d.action == action]


def assert_equivalent(kernel, sizes: dict, outputs: int) -> None:
    case = Case(sizes=sizes, global_space=(outputs, 1))
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block, case, seed=3,
                      device_functions={})
    assert result.ok, result.error or result.mismatches
    assert result.elements == outputs


def assert_nvcc_compiles(result, tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path / "split_out.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "/dev/null", f"-I{INPUTS}", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


# -- shapes ---------------------------------------------------------------------------------------------
def test_mv_sm90_one_warp_per_row(tmp_path):
    result = compile_file(INPUTS / "mv.cu")
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "int r = blockIdx.x * 8 + threadIdx.y;" in text
    assert "for (int c = threadIdx.x; c < cols; c += 32)" in text
    assert "sum += __shfl_down_sync(0xffffffff, sum, offset);" in text
    assert re.search(r"if \(r < rows && threadIdx.x == 0\)\s*\{\s*y\[r\] = sum;", text)
    assert "__shared__" not in text and "__syncthreads" not in text
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 8), (8, 1))
    assert any("the summation order changes" in r for r in merge_decisions(k, "applied"))
    coalesce = [d.reason for d in k.context.log.decisions if d.pass_name == "coalesce"]
    assert any("left to merge: several threads per output" in r for r in coalesce)
    assert "(32 threads per output)" in result.output
    assert_nvcc_compiles(result, tmp_path)


def test_tmv_sm90_threads_in_y_per_column(tmp_path):
    result = compile_file(INPUTS / "tmv.cu")
    k = only(result)
    text = kernel_source(k.optimized.funcdef)
    assert "__shared__ float partial_sum[16][32];" in text
    assert "const int idx = blockIdx.x * 32 + threadIdx.x;" in text
    assert "for (int i = threadIdx.y; i < 4096; i += 16)" in text
    assert text.count("__syncthreads();") == 1
    assert re.search(r"if \(threadIdx.y == 0\)\s*\{\s*for \(int part = 1; part < 16; part\+\+\)\s*"
                     r"sum \+= partial_sum\[part\]\[threadIdx.x\];\s*C\[idx\] = sum;", text)
    assert (k.optimized.launch.block, k.optimized.launch.outputs_per_block) == ((32, 16), (32, 1))
    assert_nvcc_compiles(result, tmp_path)


def test_g80_keeps_one_thread_per_output():
    """No shuffles on cc 1.0, and 4096 outputs already fill the paper's GPU: Fig. 3b and tmv as before."""
    mv = only(compile_file(INPUTS / "mv.cu", "g80"))
    assert "tile_A[32][17]" in kernel_source(mv.optimized.funcdef)    # Fig. 3b, 2 blocks merged
    assert all(r.startswith(("thread-block merge", "blocks of 32x1")) for r in merge_decisions(mv, "applied"))
    alone = only(compile_file(INPUTS / "mv.cu", "g80", passes="merge"))
    assert any("warp shuffles" in r for r in merge_decisions(alone, "skipped"))
    tmv = only(compile_file(INPUTS / "tmv.cu", "g80", passes="merge"))
    assert any("keep the target busy" in r for r in merge_decisions(tmv, "skipped"))
    assert not merge_decisions(tmv, "applied")


def test_coalesce_alone_still_stages_mv():
    k = only(compile_file(INPUTS / "mv.cu", passes="coalesce"))
    assert "tile_A" in kernel_source(k.optimized.funcdef)


def test_known_sizes_choose_threads_per_output(tmp_path):
    """The column form's T fills the GPU: 8192 outputs x 16 ... capped; 100 iterations allow only 8 (8 each)."""
    many = only(compile_text(tmp_path, COLUMNS, bindings={"w": 8192, "h": 4096}))
    assert many.optimized.launch.block == (32, 16)
    short = only(compile_text(tmp_path, COLUMNS, bindings={"w": 8192, "h": 100}))
    assert short.optimized.launch.block == (32, 8)


# -- equivalence at ragged sizes --------------------------------------------------------------------------
@pytest.mark.parametrize("rows,cols", [(37, 300), (9, 1000), (70, 33)])
def test_rows_equivalent(tmp_path, rows, cols):
    k = only(compile_text(tmp_path, ROWS))
    assert k.optimized.launch.block == (32, 8)
    assert_equivalent(k, {"rows": rows, "cols": cols}, rows)


@pytest.mark.parametrize("w,h", [(37, 301), (70, 200)])
def test_columns_equivalent(tmp_path, w, h):
    k = only(compile_text(tmp_path, COLUMNS, bindings={"w": w, "h": h}))
    assert k.optimized.launch.block[1] > 1
    assert_equivalent(k, {"w": w, "h": h}, w)


def test_mv_input_equivalent():
    k = only(compile_file(INPUTS / "mv.cu"))
    assert_equivalent(k, {"rows": 45, "cols": 333}, 45)


@pytest.mark.parametrize("update", ["sum = sum + A[r * cols + c] * x[c];", "sum -= A[r * cols + c] * x[c];",
                                    "sum = x[c] * A[r * cols + c] + sum;"])
def test_update_forms_and_start_value_equivalent(tmp_path, update):
    """`acc = acc + f`, `-=`, and a start value that only the finishing lane may add."""
    source = ROWS.replace("sum += A[r * cols + c] * x[c];", update).replace("float sum = 0;", "float sum = x[0];")
    k = only(compile_text(tmp_path, source))
    text = kernel_source(k.optimized.funcdef)
    assert "sum = (threadIdx.x == 0) ? x[0] : 0;" in text
    assert_equivalent(k, {"rows": 21, "cols": 290}, 21)


def test_nvcc_compiles_ragged_forms(tmp_path):
    assert_nvcc_compiles(compile_text(tmp_path, ROWS), tmp_path)
    assert_nvcc_compiles(compile_text(tmp_path, COLUMNS, bindings={"w": 1000, "h": 5000}), tmp_path)


# -- what it leaves alone ---------------------------------------------------------------------------------
@pytest.mark.parametrize("change,why", [
    (("sum += A[r * cols + c] * x[c];", "sum += A[r * cols + c] * sum;"), "other than to add to it"),
    (("c++)", "c += 2)"), "does not count up by 1"),
    (("float sum = 0;", "int sum = 0;"), "not a float or double"),
    (("float sum = 0;", "float sum = 0; y[r] = 0;"), "writes memory"),
    (("y[r] = sum;", "y[r] = sum + blockDim.x;"), "depends on the block shape"),
    (("threadIdx.x;", "threadIdx.x + 1;"), "is not the global thread index"),
    (("float sum = 0;", "__shared__ float s[4]; float sum = 0;"), "already uses shared memory"),
    (("y[r] = sum;", "y[r] = sum; sum = 0;"), "changed outside the loop"),
    (("float sum = 0;", "int n = rows; rows = 0; float sum = n;"), "the guard's variables change"),

])
def test_unsafe_kernels_are_skipped_with_a_note(tmp_path, change, why):
    """Run without coalesce, which would otherwise stage these kernels first (merge then leaves them)."""
    k = only(compile_text(tmp_path, ROWS.replace(*change), passes="merge"))
    assert not merge_decisions(k, "applied")
    assert any(why in r for r in merge_decisions(k, "skipped")), merge_decisions(k, "skipped")


def test_store_in_the_loop_is_no_accumulation(tmp_path):
    """Not the shape the split is for: left alone without a note."""
    k = only(compile_text(tmp_path, ROWS.replace("sum += A[r * cols + c] * x[c];",
                                                 "sum += A[r * cols + c] * x[c]; y[c] = sum;")))
    assert not [d for d in k.context.log.decisions if d.pass_name == "merge"]


def test_double_accumulator_and_other_locals(tmp_path):
    source = ROWS.replace("float sum = 0;", "double sum = 0; int n = cols;").replace("c < cols", "c < n")
    k = only(compile_text(tmp_path, source))
    assert merge_decisions(k, "applied")
    assert_equivalent(k, {"rows": 13, "cols": 257}, 13)


def test_short_loop_is_skipped(tmp_path):
    k = only(compile_text(tmp_path, ROWS, passes="merge", bindings={"cols": 100}))
    assert any("too few to split over 32 threads" in r for r in merge_decisions(k, "skipped"))


def test_many_outputs_are_skipped(tmp_path):
    k = only(compile_text(tmp_path, ROWS, passes="merge", bindings={"rows": 1 << 20, "cols": 4096}))
    assert any("keep the target busy" in r for r in merge_decisions(k, "skipped"))


def test_unknown_number_of_columns_is_skipped(tmp_path):
    k = only(compile_text(tmp_path, COLUMNS))
    assert any("number of outputs is not known" in r for r in merge_decisions(k, "skipped"))


def test_two_dimensional_kernels_are_not_split():
    """mm is the register tile's (test_register_tile.py); the split has nothing to say about it."""
    k = next(k for k in compile_file(INPUTS / "mm.cu").kernels if k.naive.name == "mm")
    assert not [d for d in k.context.log.decisions if d.pass_name == "merge" and "split" in d.reason]


OUTSIDE_COUNTER = ROWS.replace("float sum = 0;\n        for (int c = 0;", "float sum = 0;\n        int c;\n        for (c = 0;")


def test_a_counter_declared_before_the_loop_is_split_as_the_suites_write_it(tmp_path):
    k = only(compile_text(tmp_path, OUTSIDE_COUNTER, passes="merge"))
    assert merge_decisions(k, "applied")
    from gpgpu_opt.codegen import kernel_source

    assert "for (c = threadIdx.x; c < cols; c += 32)" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"rows": 45, "cols": 301}, 45)


def test_a_counter_used_after_the_loop_is_not_split(tmp_path):
    k = only(compile_text(tmp_path, OUTSIDE_COUNTER.replace("y[r] = sum;", "y[r] = sum + c;"), passes="merge"))
    assert not merge_decisions(k, "applied")
    assert any("is used outside the loop" in r for r in merge_decisions(k, "skipped"))
