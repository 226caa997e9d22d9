"""merge's column march (passes/merge/z_march/loop.py): a 2-D grid whose threads march their column through a z
loop, the loop split over the grid's z and the planes one z shares with the next carried in registers. Each
rewrite passes compile's emulated check and is emulated again here against the naive kernel (race check on) at
sizes no block divides, with z loops of no trips, one block's share, and several blocks' shares."""
from __future__ import annotations

import pytest

from gpgpu_opt.check.cases import Case, run_case
from gpgpu_opt.codegen import kernel_source
from tests.passes.test_z_march import assert_cubin, merge_notes
from tests.passes.vectorize_kit import compile_source

#: A 7-point Laplacian, kernel only: an early return on x and y, then the z loop.
LAPLACE = """
__global__ void laplace(const float *u, float *v, int nx, int ny, int nz, float h)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 1 || i >= nx - 1 || j < 1 || j >= ny - 1)
        return;
    int plane = nx * ny;
    for (int k = 1; k < nz - 1; ++k) {
        int c = k * plane + j * nx + i;
        v[c] = h * (u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx] + u[c - plane] + u[c + plane] - 6.0f * u[c]);
    }
}
"""

#: A 27-point box with clamped neighbours (every point an output), the loop inside the guard, z from 0.
BOX = """
#define AT(X, Y, Z) a[((Z) * ny + (Y)) * nx + (X)]
__global__ void box(const float *a, float *b, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < nx && y < ny) {
        int w = max(x - 1, 0), e = min(x + 1, nx - 1);
        int n = max(y - 1, 0), s = min(y + 1, ny - 1);
        for (int z = 0; z < nz; z++) {
            int d = max(z - 1, 0), t = min(z + 1, nz - 1);
            b[(z * ny + y) * nx + x] = AT(w, n, d) + AT(x, n, d) + AT(e, n, d) + AT(w, y, d) + AT(x, y, d)
                + AT(e, y, d) + AT(w, s, d) + AT(x, s, d) + AT(e, s, d) + AT(w, n, z) + AT(x, n, z) + AT(e, n, z)
                + AT(w, y, z) + AT(x, y, z) + AT(e, y, z) + AT(w, s, z) + AT(x, s, z) + AT(e, s, z)
                + AT(w, n, t) + AT(x, n, t) + AT(e, n, t) + AT(w, y, t) + AT(x, y, t) + AT(e, y, t)
                + AT(w, s, t) + AT(x, s, t) + AT(e, s, t);
        }
    }
}
"""

#: (nx, ny, nz): no block divides x or y; the loops run no trips, one block's share, and three blocks' shares.
SIZES = ((37, 9, 2), (33, 6, 18), (35, 7, 41), (40, 5, 3))


def compiled(tmp_path_factory, kernel: str, **options):
    result = compile_source(tmp_path_factory, "cm", kernel, passes=None, **options)
    return result, result.kernels[0]


def assert_same_as_naive(k, nx: int, ny: int, nz: int, naive_block=(16, 16), seed: int = 3) -> None:
    grid = (-(-nx // naive_block[0]), -(-ny // naive_block[1]), 1)
    case = Case(sizes={"nx": nx, "ny": ny, "nz": nz}, global_space=(grid[0] * naive_block[0], grid[1] * naive_block[1]),
                block=(*naive_block, 1), grid=grid)
    result = run_case(k.naive, k.optimized, naive_block, case, seed=seed, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def test_a_laplacian_marching_z_is_split_over_the_grids_z(tmp_path_factory):
    result, k = compiled(tmp_path_factory, LAPLACE, assume_restrict=True)
    assert k.validation is not None and k.validation.status == "passed", (k.validation, merge_notes(k, "skipped"))
    source = kernel_source(k.optimized.funcdef)
    assert "const int k_chunk = max(16, (nz - 2 + ((int) gridDim.z) - 1) / ((int) gridDim.z));" in source, source
    assert "const int k0 = 1 + blockIdx.z * k_chunk;" in source
    assert "for (int k = k0; k < min(k0 + k_chunk, nz - 1); k++)" in source
    assert "float u_below = u[k0 * plane + j * nx + i - plane];" in source
    assert k.optimized.launch.z_blocks == 32 and "(global_y + 7) / 8, 32);" in result.output
    for nx, ny, nz in SIZES:
        assert_same_as_naive(k, nx, ny, nz)
    assert_same_as_naive(k, 35, 7, 41, naive_block=(32, 2))
    assert_cubin(result, tmp_path_factory)


def test_a_clamped_27_point_box_carries_its_nine_columns(tmp_path_factory):
    result, k = compiled(tmp_path_factory, BOX, assume_restrict=True)
    assert k.validation is not None and k.validation.status == "passed", (k.validation, merge_notes(k, "skipped"))
    assert any("18 of its reads per z" in n for n in merge_notes(k, "applied")), merge_notes(k, "applied")
    for nx, ny, nz in SIZES:
        assert_same_as_naive(k, nx, ny, nz)
    assert_cubin(result, tmp_path_factory)


def test_a_launched_column_march_keeps_the_naive_block_and_sets_the_grids_z(tmp_path_factory):
    program = LAPLACE + """
void step(float *u, float *v, int nx, int ny, int nz)
{
    dim3 block(32, 4);
    dim3 grid((nx + 31) / 32, (ny + 3) / 4);
    laplace<<<grid, block>>>(u, v, nx, ny, nz, 0.5f);
}
"""
    result, k = compiled(tmp_path_factory, program.replace("const float *u, float *v", "const float *__restrict__ u, "
                                                           "float *__restrict__ v"))
    assert k.validation.status == "passed", k.validation
    assert k.optimized.launch.block.xy == (32, 4)
    assert "laplace<<<laplace_grid(grid, block), laplace_block(grid, block)>>>" in result.output
    assert result.report()["kernels"][0]["launch"]["z_blocks"] == 32     # the report says the grid's z changed
    assert_same_as_naive(k, 45, 11, 37, naive_block=(32, 4))


def test_pointers_that_may_alias_are_not_marched(tmp_path_factory):
    _, k = compiled(tmp_path_factory, LAPLACE)
    assert k.optimized.launch is None or k.optimized.launch.z_blocks is None
    assert any("may alias the arrays read" in n for n in merge_notes(k, "skipped")), merge_notes(k, "skipped")


@pytest.mark.parametrize("change, why", [
    (("for (int k = 1; k < nz - 1; ++k)", "for (int k = 1; k < nz - 1; k += 2)"), "does not step `k` by 1"),
    (("for (int k = 1;", "for (int k = nx;"), "at a constant c >= 0"),
    (("v[c] =", "v[c - plane] ="), "not at the thread's own element"),
    (("int c = k * plane", "int c = blockIdx.z + k * plane"), "it reads blockIdx.z"),
    (("int plane = nx * ny;", "int plane = nx * ny * gridDim.x;"), "it reads gridDim.x"),
])
def test_what_the_column_march_cannot_prove_it_leaves(tmp_path_factory, change, why):
    _, k = compiled(tmp_path_factory, LAPLACE.replace(*change), assume_restrict=True)
    assert k.optimized.launch is None or k.optimized.launch.z_blocks is None
    notes = merge_notes(k, "skipped")
    assert any(why in n for n in notes), notes


def test_the_run_harness_launches_the_blocks_in_z(tmp_path_factory):
    """`run` times the kernel as its launch helpers launch it: with one block in z it would march all of z."""
    from gpgpu_opt.harness import generate_harness

    result, k = compiled(tmp_path_factory, LAPLACE, assume_restrict=True)
    text = generate_harness(result.program, result, "laplace", {"nx": 64, "ny": 32, "nz": 40}, (64, 32))
    assert "const dim3 opt_grid(2, 4, 32), opt_block(32, 8);" in text, text[:2000]
