"""Arrays of arrays (`const float a[][W]`, `double c[][Y][X]`) read as flat arrays (rewriting/flat_arrays.py):
the passes rewrite the flat kernel, and the output keeps the parameters as declared, each bound once to a flat
pointer. A row sum is merged to a warp per row, a 2-D scale widened; both emulated against the naive kernels
at row counts no tile divides, and built with nvcc. A row used as a pointer keeps the kernel as written."""
from __future__ import annotations

import textwrap

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.rewriting import flat_arrays
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, compile_with_notes

#: In the style of C numerical code ported to CUDA: fixed row widths in the types, the row count at run time.
ROWS = """
#define W 300
__global__ void rowsum(const float a[][W], float *sums, int rows)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {
        float sum = 0.0f;
        for (int k = 0; k < W; k++)
            sum += a[i][k];
        sums[i] = sum;
    }
}

__global__ void scale2d(const float a[][W], float (*b)[W], float alpha, int rows)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < W && y < rows)
        b[y][x] = alpha * a[y][x];
}

int main(int argc, char **argv)
{
    int rows = argc * 4000;
    typedef float row[W];
    row *a, *b;
    float *sums;
    cudaMalloc(&a, rows * sizeof(row));
    cudaMalloc(&b, rows * sizeof(row));
    cudaMalloc(&sums, rows * sizeof(float));
    rowsum<<<(rows + 127) / 128, 128>>>(a, sums, rows);
    dim3 block(32, 8);
    scale2d<<<dim3((W + 31) / 32, (rows + 7) / 8), block>>>(a, b, 0.5f, rows);
    return 0;
}
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return compile_source(tmp_path_factory, "rows", ROWS, passes=None)


def test_the_passes_rewrite_the_flat_kernel_and_the_parameters_stay_as_declared(rows):
    rowsum, scale2d = rows.kernels
    text = kernel_source(rowsum.optimized.funcdef)
    assert "void rowsum(const float a[][300], float *__restrict__ sums, int rows)" in text
    assert "    // arrays of arrays read as flat arrays: a (n x 300)\n    const float *a_flat = &a[0][0];" in text
    assert "sum += a_flat[i * 300 + k];" in text and "__shfl_down_sync" in text
    scaled = kernel_source(scale2d.optimized.funcdef)
    assert "void scale2d(const float a[][300], float (*b)[300], float alpha, int rows)" in scaled
    assert "float *b_flat = &b[0][0];" in scaled and "float4" in scaled
    assert rowsum.validation.status == "passed" and scale2d.validation.status == "passed"


@pytest.mark.parametrize("count", [37, 5, 261])
def test_the_flat_kernels_match_the_naive_ones(rows, count):
    rowsum, scale2d = rows.kernels
    assert_equivalent(rowsum, {"rows": count}, (count, 1), seed=count)
    assert_equivalent(scale2d, {"rows": count, "alpha": 0.5}, (300, count), seed=count + 1)


def test_the_flat_kernels_build(rows, tmp_path_factory):
    assert_builds(rows, tmp_path_factory)


def test_subscripts_are_flattened_row_major(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
        __global__ void planes(const double c[][8][32], double out[][8][32], int nz)
        {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            for (int z = 0; z < nz; z++)
                out[z][y][x] = 2.0 * c[z][y][x] + c[z][y][(x + 1) % 32];
        }
    """))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    flat = flat_arrays.flatten(kernel)
    text = kernel_source(flat.kernel.funcdef)
    assert "void planes(const double *c, double *out, int nz)" in text
    assert "out[(z * 8 + y) * 32 + x] = 2.0 * c[(z * 8 + y) * 32 + x] + c[(z * 8 + y) * 32 + (x + 1) % 32];" in text
    assert flat.names == ("c", "out") and flat.dims == ((8, 32), (8, 32))


@pytest.mark.parametrize("body, why", [
    ("const float *r = a[i]; if (i < n) o[i] = r[0];", "'a' is used as a row (1 of its 2 subscripts)"),
    ("float a = 1.0f; if (i < n) o[i] = a;", "a local declares the name 'a' of an array of arrays"),
])
def test_an_array_used_otherwise_than_by_element_keeps_the_kernel_as_written(tmp_path_factory, body, why):
    source = f"""
        __global__ void k(const float a[][16], float *o, int n)
        {{
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            {body}
        }}
        int main() {{ float *o; float (*a)[16]; k<<<8, 128>>>(a, o, 1000); return 0; }}
    """
    result, notes = compile_with_notes(tmp_path_factory, "kept", source)
    kernel = result.kernels[0]
    assert not kernel.transformed
    assert kernel_source(kernel.optimized.funcdef) == kernel_source(kernel.naive.funcdef)
    assert f"'k' left as written: its arrays of arrays are not read element by element ({why})" in notes
