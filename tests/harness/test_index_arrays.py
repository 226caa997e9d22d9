"""`run` on kernels whose subscripts go through locals and index arrays (check/index_arrays.py): clamped locals
bound their arrays, CSR row pointers and gather indices are filled with valid values, and what cannot be
bounded is named with the `--extent` that `run` takes."""
from __future__ import annotations

import shutil
import textwrap

import pytest
import sympy

from gpgpu_opt.check.extents import _extreme
from gpgpu_opt.check.index_arrays import local_ranges, row_pointer_loops
from gpgpu_opt.analysis.symbolic import opaque
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from tests.cli_in_process import run_cli

BILINEAR = """
__global__ void resize_bilinear(const float *in, float *out, int in_w, int in_h, int out_w, int out_h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= out_w || y >= out_h)
        return;
    float sx = (x + 0.5f) * in_w / out_w - 0.5f;
    float sy = (y + 0.5f) * in_h / out_h - 0.5f;
    int x0 = min(max((int)floorf(sx), 0), in_w - 1);
    int y0 = min(max((int)floorf(sy), 0), in_h - 1);
    int x1 = min(x0 + 1, in_w - 1);
    int y1 = min(y0 + 1, in_h - 1);
    float fx = sx - floorf(sx);
    float fy = sy - floorf(sy);
    float top = in[y0 * in_w + x0] * (1.0f - fx) + in[y0 * in_w + x1] * fx;
    float bottom = in[y1 * in_w + x0] * (1.0f - fx) + in[y1 * in_w + x1] * fx;
    out[y * out_w + x] = top * (1.0f - fy) + bottom * fy;
}
"""

#: The source row's stride fixed, the scale a float: nothing bounds x0 but the user.
SCALED = """
__global__ void resize_nearest(const float *in, float *out, int w, int h, float scale)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        int x0 = (int)(x * scale);
        int y0 = (int)(y * scale);
        out[y * w + x] = in[y0 * 8192 + x0];
    }
}
"""

SPMV = """
__global__ void spmv_csr(const int *rowptr, const int *col, const float *val, const float *x, float *y, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int p = rowptr[r]; p < rowptr[r + 1]; ++p)
            sum += val[p] * x[col[p]];
        y[r] = sum;
    }
}
"""

#: The column through a local, and the row's ends in locals of their own.
SPMV_LOCALS = """
__global__ void spmv(int n, const int *row_start, const int *cols, const double *vals, const double *v,
                     double *out)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        double dot = 0.0;
        for (int k = row_start[row]; k < row_start[row + 1]; k++) {
            int c = cols[k];
            dot += vals[k] * v[c];
        }
        out[row] = dot;
    }
}
"""


def needs_nvcc():
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")


def run_build_only(tmp_path, source: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    out = tmp_path / "harness"
    proc = run_cli("run", path, "--build-only", "--out", out, *args)
    harness = next(out.glob("*.cu")).read_text() if out.exists() and any(out.glob("*.cu")) else ""
    return proc.returncode, proc.stdout + proc.stderr, harness


def test_clamped_locals_bound_the_array_they_index(tmp_path):
    needs_nvcc()
    code, said, harness = run_build_only(tmp_path, BILINEAR, "--size", "in_w=1000", "--size", "in_h=700",
                                         "--size", "out_w=1500", "--size", "out_h=900")
    assert code == 0, said
    assert "const size_t n_in = 700000ULL;" in harness        # in_w * in_h: y0 <= in_h - 1, x1 <= in_w - 1
    assert "const size_t n_out = 1350000ULL;" in harness


def test_the_ranges_of_clamped_locals(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
    __global__ void k(const float *in, float *out, int n, float s)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        int a = min(max((int)(i * s), 0), n - 1);
        int b = min(a + 1, n - 1);
        int c = (int)(i * s) > 3 ? 3 : -2;
        int d = max((unsigned int)(i * s) - 1, 0);
        out[i] = in[a] + in[b] + in[c + 2] + in[d];
    }
    """))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    n = sympy.Symbol("n", integer=True)
    ranges = {n: (50, 50)}
    found = local_ranges(kernel, _extreme, ranges)
    assert found[opaque("a")] == (0, 49)
    assert found[opaque("b")] == (1, 49)         # min(a + 1, n - 1): at most n - 1, at least min(1, n - 1)
    assert found[opaque("c")] == (-2, 3)
    assert opaque("d") not in found              # an unsigned cast may wrap: no bound below


def test_a_local_nothing_bounds_is_named_with_the_extent_run_takes(tmp_path):
    code, said, _ = run_build_only(tmp_path, SCALED, "--size", "w=1000", "--size", "h=1000")
    assert code != 0
    assert "cannot size array 'in' for emulation: its subscript 'y0 * 8192 + x0'" in said, said
    assert "has no bound the analysis sees" in said and "(give its size with --extent in=N)" in said
    needs_nvcc()
    code, said, harness = run_build_only(tmp_path, SCALED, "--size", "w=1000", "--size", "h=1000",
                                         "--size", "scale=0.5", "--extent", "in=4096000")
    assert code == 0, said
    assert "const size_t n_in = 4096000ULL;" in harness


def test_csr_row_pointers_and_columns_are_filled_with_valid_values(tmp_path):
    needs_nvcc()
    code, said, harness = run_build_only(tmp_path, SPMV, "--size", "rows=10000")
    assert code == 0, said
    assert "const size_t n_rowptr = 10001ULL;" in harness
    assert "fill_row_pointers(h_rowptr, n_rowptr, 160000ULL);" in harness     # 16 elements a row
    assert "const size_t n_val = 160000ULL;" in harness and "const size_t n_col = 160000ULL;" in harness
    assert "fill_index(h_col, n_col, 10000ULL);" in harness                    # columns of x
    # the number of elements and of columns as the user gives them
    code, said, harness = run_build_only(tmp_path, SPMV, "--size", "rows=10000", "--extent", "val=50000",
                                         "--extent", "x=777")
    assert code == 0, said
    assert "fill_row_pointers(h_rowptr, n_rowptr, 50000ULL);" in harness
    assert "fill_index(h_col, n_col, 777ULL);" in harness and "const size_t n_x = 777ULL;" in harness


def test_a_gather_through_a_local_fills_its_index_array(tmp_path):
    needs_nvcc()
    code, said, harness = run_build_only(tmp_path, SPMV_LOCALS, "--size", "n=3000", "--extent", "v=5000")
    assert code == 0, said
    assert "fill_row_pointers(h_row_start, n_row_start, 48000ULL);" in harness
    assert "fill_index(h_cols, n_cols, 5000ULL);" in harness


def test_only_row_pointer_loops_are_taken_for_csr(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
    __global__ void k(const int *rp, const float *v, float *y, int n)
    {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < n) {
            float s = 0.0f;
            for (int p = rp[r]; p < rp[r + 2]; ++p)
                s += v[p];
            for (int p = rp[r]; p < rp[r + 1]; p += 2)
                s += v[p];
            for (int q = rp[r]; q < rp[r + 1]; ++q)
                s += v[q];
            y[r] = s;
        }
    }
    """))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    assert [(l.array, l.var) for l in row_pointer_loops(kernel)] == [("rp", "q")]
