"""A launch whose grid rounds down (`dim3(nx / 32, ny / 4)`) may stop short of the kernel's guard: the last
rows and columns stay undone, and that is the program's meaning. No pass may round such a grid up to bigger
blocks (launch.truncating_grids, pass_api.instruments.grid_overreach)."""
from __future__ import annotations

import textwrap

from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.sites import truncating_grids
from gpgpu_opt.check.cases import default_cases, run_case
from tests.passes.test_split_loop import compile_text, only

BOX5 = """
#define R 2
__global__ void box5(float *dst, const float *src, int nx, int ny)
{
    const int i = threadIdx.x + blockIdx.x * blockDim.x;
    const int j = threadIdx.y + blockIdx.y * blockDim.y;
    if (i < R || j < R || i >= nx - R || j >= ny - R) return;
    float acc = 0.f;
    for (int dj = -R; dj <= R; ++dj)
        for (int di = -R; di <= R; ++di)
            acc += src[(j + dj) * nx + (i + di)];
    dst[j * nx + i] = acc * (1.0f / 25.0f);
}
int main()
{
    int nx = 4096, ny = 4096;
    float *a, *b;
    cudaMalloc(&a, nx * ny * 4); cudaMalloc(&b, nx * ny * 4);
    box5<<<dim3(nx / 32, ny / 4), dim3(32, 4)>>>(b, a, nx, ny);
    return 0;
}
"""


def grids(tmp_path, launch_line: str, prelude: str = "") -> dict[str, str]:
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(f"""
        {prelude}
        __global__ void k(float *d, int n, int m) {{
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x < n && y < m) d[y * n + x] = 0.0f;
        }}
        int main() {{
            int n = 1000, m = 1000; float *d; cudaMalloc(&d, n * m * 4);
            {launch_line}
            return 0;
        }}
    """))
    program = load_program(str(path))
    return truncating_grids(program, program.kernels[0])


def test_which_grids_round_down(tmp_path):
    assert set(grids(tmp_path, "k<<<dim3(n / 32, m / 4), dim3(32, 4)>>>(d, n, m);")) == {"x", "y"}
    assert set(grids(tmp_path, "k<<<dim3((n + 31) / 32, m / 8), dim3(32, 8)>>>(d, n, m);")) == {"y"}
    assert grids(tmp_path, "k<<<dim3((n + 31) / 32, (m + 7) / 8), dim3(32, 8)>>>(d, n, m);") == {}
    assert grids(tmp_path, "k<<<dim3(ceil(n / 32.0), ceil(m / 8.0)), dim3(32, 8)>>>(d, n, m);") == {}
    # a named dim3, and macros: a division known to be exact rounds nothing down
    assert set(grids(tmp_path, "dim3 g(n / 16, m / 16); k<<<g, dim3(16, 16)>>>(d, n, m);")) == {"x", "y"}
    assert grids(tmp_path, "k<<<dim3(N / 32, N / 8), dim3(32, 8)>>>(d, n, m);", "#define N 1024") == {}
    where = grids(tmp_path, "k<<<dim3(N / 32, N / 16), dim3(32, 16)>>>(d, n, m);", "#define N 1000")
    assert set(where) == {"x", "y"} and where["y"].startswith("the grid's y `N / 16` at line")
    assert set(grids(tmp_path, "k<<<dim3(N / 32, N / 8), dim3(32, 8)>>>(d, n, m);", "#define N 1000")) == {"x"}


def test_a_grid_that_rounds_down_is_never_rounded_up_past_the_naive_threads(tmp_path):
    """At ny = 23 the naive launch covers 20 rows and the guard admits 21: row 20 stays undone. Blocks of 8
    rows (coalesce's halo tile) or 128 columns (the stencil window) would compute it, so both roll back
    with their reason; the kernel agrees with the naive one at that size."""
    result = compile_text(tmp_path, BOX5)
    k = only(result)
    notes = [d.reason for d in k.context.log.decisions if d.action == "skipped"]
    assert any("the grid's y `ny / 4` at line" in n and "rounds down" in n for n in notes)
    assert k.optimized.launch is None or all(
        n % c == 0 for n, c in zip(k.context.facts.naive_block, k.optimized.launch.outputs_per_block))
    for case in default_cases(k.naive, result.program, {"nx": 45, "ny": 23}, None):
        assert case.global_space == (32, 20)
        res = run_case(k.naive, k.optimized, k.context.facts.naive_block, case, seed=5, device_functions={})
        assert res.ok, res.error or res.mismatches


def test_the_same_kernel_launched_with_a_rounded_up_grid_is_still_optimized(tmp_path):
    rounded = BOX5.replace("dim3(nx / 32, ny / 4)", "dim3((nx + 31) / 32, (ny + 3) / 4)")
    k = only(compile_text(tmp_path, rounded))
    assert k.optimized.launch is not None and k.optimized.launch.outputs_per_block[1] > 4
    assert not any("rounds down" in d.reason for d in k.context.log.decisions)


def test_verify_global_sets_the_naive_launch_not_the_sites_grid(tmp_path):
    """`verify --global 45,23 --block 32,4` on a program whose site launches `dim3(nx / 32, ny / 4)`: the
    naive launch is then the blocks that cover 45x23 threads, not the site's grid (which covers 32x20)."""
    result = compile_text(tmp_path, BOX5)
    k = only(result)
    (case,) = default_cases(k.naive, result.program, {"nx": 45, "ny": 23}, (45, 23), block=(32, 4))
    assert case.global_space == (45, 23) and case.grid is None
    res = run_case(k.naive, k.optimized, k.context.facts.naive_block, case, seed=5, device_functions={})
    assert res.ok and res.elements == 45 * 23       # every element of dst compared (the border: poison in both)
