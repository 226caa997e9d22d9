"""3-D indices: blockIdx.z / threadIdx.z / blockDim.z / gridDim.z in kernels and dim3(x, y, z) launches.

The passes tile x and y; z is one plane per block. A kernel whose blocks are one z deep (every launch site
says so) is seen with threadIdx.z = 0, blockDim.z = 1; one whose blocks may be deeper is not retiled. The
launch helpers keep the naive grid's z, the emulated check runs every plane, and array sizes cover them."""
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
from gpgpu_opt.check.extents import array_extents

KERNEL_3D = """
__global__ void add3d(float *out, const float *a, const float *b, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz)
        out[(z * ny + y) * nx + x] = a[(z * ny + y) * nx + x] + b[(z * ny + y) * nx + x];
}
"""

PLANES = """
#include <cuda_runtime.h>

__global__ void scale_planes(float *out, const float *in, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z;
    if (x < nx && y < ny && z < nz)
        out[(z * ny + y) * nx + x] = 2.0f * in[(z * ny + y) * nx + x];
}

int main()
{
    int nx = 512, ny = 512, nz = 64;
    size_t bytes = (size_t)nx * ny * nz * sizeof(float);
    float *d_in, *d_out;
    cudaMalloc(&d_in, bytes);
    cudaMalloc(&d_out, bytes);
    dim3 block(32, 8, 1);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8, nz);
    scale_planes<<<grid, block>>>(d_out, d_in, nx, ny, nz);
    cudaDeviceSynchronize();
    return 0;
}
"""


def launched(block: str, grid: str) -> str:
    """KERNEL_3D with a host function that launches it with these dim3s (nx, ny, nz fixed)."""
    return KERNEL_3D + textwrap.dedent(f"""
        #include <cuda_runtime.h>
        int main()
        {{
            int nx = 300, ny = 200, nz = 16;
            size_t bytes = sizeof(float) * nx * ny * nz;
            float *out, *a, *b;
            cudaMalloc(&out, bytes);
            cudaMalloc(&a, bytes);
            cudaMalloc(&b, bytes);
            dim3 block{block};
            dim3 grid{grid};
            add3d<<<grid, block>>>(out, a, b, nx, ny, nz);
            cudaDeviceSynchronize();
            return 0;
        }}
        """)


def compile_text(tmp_path: Path, text: str, target: str = "sm_90", validate: bool = True):
    path = tmp_path / "k.cu"
    path.write_text(text)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target(target), parse_pass_list(None), diagnostics, {},
                             validate=validate)
    return result, diagnostics


def notes(diagnostics: Diagnostics) -> str:
    return "\n".join(n.message for n in diagnostics.notes)


def test_thread_z_without_a_launch_is_not_retiled_and_no_internal_error(tmp_path):
    # Before: the reuse analysis lambdified tid.z and the coalesce pass died with a NameError (strict mode).
    result, diagnostics = compile_text(tmp_path, KERNEL_3D)
    k = result.kernels[0]
    assert not k.rewritten and k.passes_run == ["restrict", "merge"]  # merge only marches z: it declines
    assert "add3d: not retiled: the kernel uses threadIdx.z/blockDim.z and the file does not launch it" \
        in notes(diagnostics)


def test_blocks_one_z_deep_are_flattened_transformed_and_checked_on_every_plane(tmp_path):
    result, _ = compile_text(tmp_path, launched("(32, 8, 1)", "((nx + 31) / 32, (ny + 7) / 8, (nz + 0) / 1)"))
    k = result.kernels[0]
    assert k.transformed and k.validation is not None and k.validation.status == "passed", k.validation
    assert "threadIdx.z" not in kernel_source(k.optimized.funcdef)  # blocks of one z: threadIdx.z is 0
    assert k.validation.as_dict()["detail"].startswith("matches the naive kernel")
    # The optimized kernel keeps the z planes: its grid helper passes the naive grid's z on.
    assert "naive_grid.z);" in result.output


@pytest.mark.parametrize("block", ["(32, 4, 2)", "(32, 4, bz)"])
def test_blocks_that_may_be_deeper_than_one_z_are_not_retiled(tmp_path, block):
    text = launched(block, "((nx + 31) / 32, (ny + 3) / 4, nz)")
    if "bz" in block:
        text = text.replace("int nx = 300", "int bz = rand() % 3 + 1; int nx = 300")
    result, diagnostics = compile_text(tmp_path, text)
    k = result.kernels[0]
    assert not k.rewritten and k.passes_run == ["restrict", "merge"]
    assert "one z per thread kept" in notes(diagnostics)  # merge only marches z, and declines it here
    shown = "2" if "bz" not in block else "not known"
    assert f"its launch's block z is {shown}" in notes(diagnostics)
    assert "add3d_grid(" not in result.output


def test_block_idx_z_planes_are_emulated_and_the_grid_keeps_z(tmp_path):
    result, _ = compile_text(tmp_path, PLANES)
    k = result.kernels[0]
    assert k.rewritten and k.validation.status == "passed", k.validation
    assert k.validation.case.grid[2] > 1  # the check ran several planes of blocks, not only z = 0
    helper = result.output[result.output.index("static dim3 scale_planes_grid"):]
    assert "naive_grid.z);" in helper[:helper.index("}")]


def test_a_kernel_without_z_keeps_its_two_component_grid(tmp_path):
    text = PLANES.replace("int z = blockIdx.z;", "int z = 0;").replace("(ny + 7) / 8, nz)", "(ny + 7) / 8, 1)")
    result, _ = compile_text(tmp_path, text)
    assert result.kernels[0].rewritten
    # the grid of the optimized launch (a size-dispatch test beside it multiplies every component)
    grid_helper = re.search(r"static dim3 \w+_grid\(dim3 naive_grid, dim3 naive_block\)\n\{.*?\n\}", result.output,
                            re.S)
    assert grid_helper and "naive_grid.z" not in grid_helper.group(0)


def test_array_extents_cover_every_plane_of_blocks_and_threads(tmp_path):
    result, _ = compile_text(tmp_path, KERNEL_3D, validate=False)
    naive = result.kernels[0].naive
    sizes = {"nx": 40, "ny": 6, "nz": 5}
    extents = array_extents(naive, sizes, (8, 2, 2), (40, 6), grid=(5, 3, 3))
    # z reaches (3 - 1) * 2 + 1 = 5: six planes of 40 x 6 threads (before: plane 0 only, 240 elements).
    assert extents["out"] == extents["a"] == (5 * 6 + 5) * 40 + 39 + 1


def test_a_transformed_plane_kernel_matches_the_naive_one_on_a_3d_launch(tmp_path):
    result, _ = compile_text(tmp_path, PLANES, validate=False)
    k = result.kernels[0]
    assert k.rewritten
    case = Case(sizes={"nx": 70, "ny": 19, "nz": 3}, global_space=(70, 19), block=(32, 8, 1), grid=(3, 3, 3))
    res = run_case(k.naive, k.optimized, (32, 8), case, seed=3, device_functions={})
    assert res.ok, res.error or res.mismatches
    assert res.elements == 70 * 19 * 3


def test_a_deep_grid_counts_its_planes_in_the_work_of_the_check(tmp_path):
    # 256 x 256 threads per plane is within the check's budget, 128 planes of them are not: the check samples
    # the blocks at two corners instead of emulating 8M threads.
    text = PLANES.replace("int nx, int ny, int nz", "int unused").replace("nx, ny, nz);", "0);")
    text = "#define nx 256\n#define ny 256\n#define nz 128\n" + text.replace("int nx = 512, ny = 512, nz = 64;", "")
    result, _ = compile_text(tmp_path, text)
    k = result.kernels[0]
    assert k.validation is not None and k.validation.status == "passed", k.validation
    assert "in the blocks at two corners of the thread space" in k.validation.detail


def test_a_device_helper_reading_z_keeps_the_passes_off(tmp_path):
    text = PLANES.replace("__global__ void scale_planes", "__device__ int plane() { return blockIdx.z; }\n"
                          "__global__ void scale_planes").replace("int z = blockIdx.z;", "int z = plane();")
    result, diagnostics = compile_text(tmp_path, text)
    assert not result.kernels[0].rewritten
    assert "'plane', a __device__ function it calls, reads the z axis" in notes(diagnostics)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on the PATH")
def test_the_3d_output_builds(tmp_path):
    result, _ = compile_text(tmp_path, PLANES)
    out = tmp_path / "out.cu"
    out.write_text(result.output)
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "out.cubin"), str(out)], check=True,
                   capture_output=True)
