"""merge's z march (passes/merge/z_march): 3-D stencils on 3-D blocks, each thread several consecutive z, the
planes shared with the next z carried in registers, proved on the clamped addresses."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.check.cases import Case, run_case
from tests.passes.vectorize_kit import compile_source

SEVEN_MIN_MAX = """
__global__ void heat(const float *in, float *out, int nx, int ny, int nz, float cc, float cn)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz)
        return;
    int w = max(x - 1, 0);
    int e = min(x + 1, nx - 1);
    int n = max(y - 1, 0);
    int s = min(y + 1, ny - 1);
    int b = max(z - 1, 0);
    int t = min(z + 1, nz - 1);
    int c = x + nx * (y + ny * z);
    out[c] = cc * in[c] + cn * (in[w + nx * (y + ny * z)] + in[e + nx * (y + ny * z)] + in[x + nx * (n + ny * z)]
                                + in[x + nx * (s + ny * z)] + in[x + nx * (y + ny * b)] + in[x + nx * (y + ny * t)]);
}
"""

SEVEN_TERNARY = """
__global__ void heat(const float *in, float *out, int nx, int ny, int nz, float cc, float cn)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = threadIdx.z + blockIdx.z * blockDim.z;
    if (x < nx && y < ny && z < nz) {
        int w = (x == 0) ? x : x - 1;
        int e = (x == nx - 1) ? x : x + 1;
        int n = (y == 0) ? y : y - 1;
        int s = (y == ny - 1) ? y : y + 1;
        int b = (z == 0) ? z : z - 1;
        int t = (z < nz - 1) ? z + 1 : z;
        out[(z * ny + y) * nx + x] = cc * in[(z * ny + y) * nx + x]
            + cn * (in[(z * ny + y) * nx + w] + in[(z * ny + y) * nx + e] + in[(z * ny + n) * nx + x]
                    + in[(z * ny + s) * nx + x] + in[(b * ny + y) * nx + x] + in[(t * ny + y) * nx + x]);
    }
}
"""

def _box27() -> str:
    """A 27-point box average, every neighbour clamped with min/max, written out term by term."""
    terms = []
    for dz, zn in ((-1, "b"), (0, "z"), (1, "t")):
        for dy, yn in ((-1, "n"), (0, "y"), (1, "s")):
            for dx, xn in ((-1, "w"), (0, "x"), (1, "e")):
                terms.append(f"in[{xn} + nx * ({yn} + ny * {zn})]")
    value = " +\n        ".join(terms)
    return f"""
__global__ void box(const float *in, float *out, int nx, int ny, int nz)
{{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz)
        return;
    int w = max(x - 1, 0), e = min(x + 1, nx - 1);
    int n = max(y - 1, 0), s = min(y + 1, ny - 1);
    int b = max(z - 1, 0), t = min(z + 1, nz - 1);
    out[x + nx * (y + ny * z)] = (1.0f / 27.0f) * (
        {value});
}}
"""


#: An interior Jacobi step: the guard bounds z from below too (`z > 0`), the neighbours one plane away.
INTERIOR = """
__global__ void jacobi(const float *in, float *out, int nx, int ny, int nz, float cc, float cn)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x > 0 && x < nx - 1 && y > 0 && y < ny - 1 && z > 0 && z < nz - 1) {
        int i = (z * ny + y) * nx + x;
        out[i] = cc * in[i] + cn * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx] + in[i - nx * ny] + in[i + nx * ny]);
    }
}
"""

COEFFICIENTS = """
__global__ void heat(const float *in, const float *k, float *out, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz)
        return;
    int b = max(z - 1, 0);
    int t = min(z + 1, nz - 1);
    int c = x + nx * (y + ny * z);
    out[c] = in[c] + k[c] * (in[x + nx * (y + ny * b)] + in[x + nx * (y + ny * t)] - 2.0f * in[c]);
}
"""


def program(kernel: str, block_z: int = 2, grid_z: str | None = None) -> str:
    """`kernel` launched from a host function on 3-D blocks of 32 x 4 x block_z, at sizes that no block or z step
    divides (compile's own check runs at them)."""
    name = re.search(r"void (\w+)\(", kernel).group(1)
    args = "d_in, d_k, d_out, nx, ny, nz" if "const float *k" in kernel else \
        "d_in, d_out, nx, ny, nz, 0.4f, 0.1f" if "float cc" in kernel else "d_in, d_out, nx, ny, nz"
    grid_z = grid_z or f"(nz + {block_z - 1}) / {block_z}"
    return kernel + f"""
#include <cuda_runtime.h>
int main()
{{
    int nx = 45;
    int ny = 13;
    int nz = 11;
    size_t bytes = (size_t)nx * ny * nz * sizeof(float);
    float *d_in, *d_k, *d_out;
    cudaMalloc(&d_in, bytes);
    cudaMalloc(&d_k, bytes);
    cudaMalloc(&d_out, bytes);
    dim3 block(32, 4, {block_z});
    dim3 grid((nx + 31) / 32, (ny + 3) / 4, {grid_z});
    {name}<<<grid, block>>>({args});
    cudaDeviceSynchronize();
    return 0;
}}
"""


def compiled(tmp_path_factory, kernel: str, **launch):
    result = compile_source(tmp_path_factory, "zm", program(kernel, **launch), passes=None)
    return result, result.kernels[0]


def assert_cubin(result, tmp_path_factory) -> None:
    """nvcc -arch=sm_90 builds the output (to a file of its own: nvcc run as root may replace /dev/null)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("nvcc") / "out.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(out.with_suffix(".cubin")), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def merge_notes(k, action: str) -> list[str]:
    return [d.reason for d in k.context.log.decisions if d.pass_name == "merge" and d.action == action]


def assert_same_as_naive(k, nx: int, ny: int, nz: int, block_z: int, seed: int = 1) -> None:
    """The marched kernel against the naive one (race check on), the naive launch rounding nz up to block_z."""
    naive_block = (32, 4, block_z)
    grid = (-(-nx // 32), -(-ny // 4), -(-nz // block_z))
    case = Case(sizes={"nx": nx, "ny": ny, "nz": nz}, global_space=(grid[0] * 32, grid[1] * 4),
                block=naive_block, grid=grid)
    result = run_case(k.naive, k.optimized, (32, 4), case, seed=seed, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


@pytest.mark.parametrize("kernel", [SEVEN_MIN_MAX, SEVEN_TERNARY, COEFFICIENTS], ids=["min_max", "ternary", "coef"])
@pytest.mark.parametrize("block_z", [1, 2, 4])
def test_a_seven_point_stencil_marches_z_and_matches_the_naive_one(tmp_path_factory, kernel, block_z):
    result, k = compiled(tmp_path_factory, kernel, block_z=block_z)
    assert k.validation is not None and k.validation.status == "passed", k.validation
    source = kernel_source(k.optimized.funcdef)
    assert "for (int z = z0; z < min(z0 + 4, nz); z++)" in source, source
    assert "threadIdx.z" not in source and k.optimized.launch.z_steps == 4
    assert any("2 of its reads per z are the previous z's" in n for n in merge_notes(k, "applied"))
    # the launch: blocks of one z, the grid's z the naive launch's z threads over 4
    assert "return dim3(32, 4);" in result.output
    assert "(naive_grid.z * naive_block.z + 3) / 4);" in result.output
    for nx, ny, nz in ((37, 9, 7), (32, 4, 3), (40, 5, 1), (33, 6, 9)):   # no 4 divides nz; nz < 4; nz 1
        assert_same_as_naive(k, nx, ny, nz, block_z)


def test_the_carried_registers_rotate_and_the_plane_above_is_the_one_load(tmp_path_factory):
    _, k = compiled(tmp_path_factory, SEVEN_MIN_MAX)
    source = kernel_source(k.optimized.funcdef)
    loop = source[source.index("for (int z"):]
    assert "float in_below = in[x + nx * (y + ny * max(z0 - 1, 0))];" in source
    assert "float in_here = in[x + nx * (y + ny * z0)];" in source
    assert "const float in_above = in[x + nx * (y + ny * t)];" in loop
    assert loop.index("in_below = in_here;") < loop.index("in_here = in_above;")
    assert "int b = " not in loop          # the plane below's clamp: no read is left that needs it


def test_a_27_point_box_carries_each_of_its_nine_columns(tmp_path_factory):
    result, k = compiled(tmp_path_factory, _box27())
    assert k.validation.status == "passed", k.validation
    assert any("18 of its reads per z" in n for n in merge_notes(k, "applied")), merge_notes(k, "applied")
    source = kernel_source(k.optimized.funcdef)
    assert "in9_above" in source and "in1_below" in source     # compile's check emulated it against naive
    assert_cubin(result, tmp_path_factory)


def test_the_stencil3d_program_marches_and_builds(tmp_path_factory):
    from pathlib import Path
    text = (Path(__file__).parents[1] / "programs" / "cxx" / "stencil3d.cu").read_text()
    result = compile_source(tmp_path_factory, "stencil3d", text, passes=None)
    k = result.kernels[0]
    assert k.validation.status == "passed" and k.optimized.launch.z_steps == 4
    assert_cubin(result, tmp_path_factory)
    assert result.report()["kernels"][0]["launch"]["z_steps"] == 4     # the report says the grid's z changed


def test_a_read_two_planes_up_is_not_carried(tmp_path_factory):
    kernel = SEVEN_MIN_MAX.replace("int t = min(z + 1, nz - 1);", "int t = min(z + 2, nz - 1);") \
        .replace(" + in[x + nx * (y + ny * b)]", "")
    _, k = compiled(tmp_path_factory, kernel)
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("nothing to carry in registers" in n for n in merge_notes(k, "skipped")), merge_notes(k, "skipped")


def test_clamps_that_disagree_at_the_edge_are_not_carried(tmp_path_factory):
    # the plane above clamped to nz - 2: at the last z it is not the next z's own plane
    kernel = SEVEN_MIN_MAX.replace("int t = min(z + 1, nz - 1);", "int t = min(z + 1, nz - 2);")
    _, k = compiled(tmp_path_factory, kernel)
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("the clamps disagree near them" in n for n in merge_notes(k, "skipped")), merge_notes(k, "skipped")


def test_a_store_one_plane_down_is_not_marched(tmp_path_factory):
    kernel = COEFFICIENTS.replace("out[c] =", "out[c - nx * ny] =")
    _, k = compiled(tmp_path_factory, kernel)
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("not at the thread's own element" in n for n in merge_notes(k, "skipped")), merge_notes(k, "skipped")


def test_thread_idx_z_in_the_value_is_not_marched(tmp_path_factory):
    kernel = COEFFICIENTS.replace("out[c] = in[c]", "out[c] = threadIdx.z + in[c]")
    _, k = compiled(tmp_path_factory, kernel)
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("threadIdx.z is used beyond the z index" in n for n in merge_notes(k, "skipped"))


def test_a_grid_that_may_stop_short_of_nz_is_not_marched(tmp_path_factory):
    # nz / 2 blocks of 2 may leave the last plane undone: marched threads would compute it
    _, k = compiled(tmp_path_factory, SEVEN_MIN_MAX, grid_z="nz / 2")
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("not proved to start at least `nz` threads in z" in n for n in merge_notes(k, "skipped"))


def test_a_local_no_subscript_uses_need_not_be_affine(tmp_path_factory):
    kernel = COEFFICIENTS.replace("    int c = x", "    int half = nx / 2;\n    int c = x") \
        .replace("out[c] = in[c]", "out[c] = (float)half + in[c]")
    _, k = compiled(tmp_path_factory, kernel)
    assert k.validation.status == "passed" and k.optimized.launch.z_steps == 4, merge_notes(k, "skipped")
    assert_same_as_naive(k, 37, 5, 9, 2)


def test_a_subscript_through_a_division_is_not_marched(tmp_path_factory):
    kernel = COEFFICIENTS.replace("int b = max(z - 1, 0);", "int b = max(z - 1, 0) / 1;")
    _, k = compiled(tmp_path_factory, kernel)
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("'b': `max(z - 1, 0) / 1` is not an integer expression" in n for n in merge_notes(k, "skipped")), \
        merge_notes(k, "skipped")


@pytest.mark.parametrize("lower", ["z > 0", "z >= 1", "0 < z", "1 <= z"])
@pytest.mark.parametrize("block_z", [1, 4])
def test_an_interior_stencil_marches_from_the_guards_first_z(tmp_path_factory, lower, block_z):
    result, k = compiled(tmp_path_factory, INTERIOR.replace("z > 0", lower), block_z=block_z)
    assert k.validation is not None and k.validation.status == "passed", (k.validation, merge_notes(k, "skipped"))
    source = kernel_source(k.optimized.funcdef)
    assert "const int z_first = max(z0, 1);" in source, source
    assert "for (int z = z_first; z < min(z0 + 4, nz - 1); z++)" in source, source
    assert "float in_below = in[(z_first * ny + y) * nx + x - nx * ny];" in source, source
    for nx, ny, nz in ((37, 9, 7), (32, 4, 3), (40, 5, 2), (33, 6, 10), (35, 7, 6)):   # z runs 0, 1, ... times
        assert_same_as_naive(k, nx, ny, nz, block_z)
    assert_cubin(result, tmp_path_factory)


def test_a_first_z_that_is_a_parameter_is_not_marched(tmp_path_factory):
    _, k = compiled(tmp_path_factory, INTERIOR.replace("z > 0", "z > nx / 8"))
    assert k.optimized.launch is None or k.optimized.launch.z_steps is None
    assert any("at most one `z > c` with c a constant" in n for n in merge_notes(k, "skipped")), \
        merge_notes(k, "skipped")


def test_sizes_declared_in_one_list_prove_the_grid_covers_them(tmp_path_factory):
    text = program(INTERIOR, block_z=4).replace("int nx = 45;\n    int ny = 13;\n    int nz = 11;",
                                                  "int nx = 45, ny = 13, nz = 11;")
    assert "int nx = 45, ny = 13, nz = 11;" in text
    result = compile_source(tmp_path_factory, "zm", text, passes=None)
    k = result.kernels[0]
    assert k.validation.status == "passed" and k.optimized.launch.z_steps == 4, merge_notes(k, "skipped")


@pytest.mark.parametrize("kernel", [SEVEN_MIN_MAX, INTERIOR], ids=["clamped", "interior"])
def test_a_kernel_the_file_does_not_launch_marches_under_the_launch_contract(tmp_path_factory, kernel):
    """No launch in the file: blocks of 32 x 8, the grid's z the naive launch's z threads over 4; compile's check
    launched the naive kernel over the planes its guard bounds z to (else one plane would hide the march)."""
    result = compile_source(tmp_path_factory, "zk", kernel, passes=None, assume_restrict=True)
    k = result.kernels[0]
    assert k.validation is not None and k.validation.status == "passed", (k.validation, merge_notes(k, "skipped"))
    assert k.optimized.launch.z_steps == 4 and "return dim3(32, 8);" in result.output
    assert "(naive_grid.z * naive_block.z + 3) / 4);" in result.output
    for nx, ny, nz in ((37, 9, 7), (40, 5, 2), (33, 6, 9)):
        for block_z in (1, 4):
            assert_same_as_naive(k, nx, ny, nz, block_z)
