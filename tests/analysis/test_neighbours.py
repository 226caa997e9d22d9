"""Reuse between the reads of one array at neighbouring threads and iterations (analysis/neighbours.py): a 3-D
stencil's reads share their elements along x, y and z (the thread's z, or a loop marching z), which neither the
per-read reuse nor the 2-D footprints see."""
import textwrap

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target


def reports(tmp_path, text):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(text))
    kernel = load_program(str(path)).kernels[0]
    return {r.access.index_text: r for r in analyze_kernel(kernel, get_target("sm_90")).reports
            if r.access.mode == "read"}


def groups(report) -> list[dict]:
    return [e for e in report.as_dict()["reuse"] if e["kind"] == "group"]


SEVEN_LOOP = """
__global__ void lap(const float *u, float *v, int nx, int ny, int nz)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int plane = nx * ny;
    for (int k = 1; k < nz - 1; ++k) {
        int c = k * plane + j * nx + i;
        v[c] = u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx] + u[c - plane] + u[c + plane] - 6.0f * u[c];
    }
}
"""


def test_a_seven_point_loop_shares_every_read_along_x_y_and_the_loop(tmp_path):
    found = reports(tmp_path, SEVEN_LOOP)
    for index in ("c - 1", "c + plane", "c"):
        (entry,) = groups(found[index])
        assert entry["dimension"] == "x,y,k" and entry["reads"] == 6, entry
    (above,) = groups(found["c + plane"])
    assert "iterations of 'k'" in above["description"]
    assert not found["c"].reuse and found["c"].load_path == "G2R"   # the per-read analysis alone: nothing


def test_a_seven_point_grid_shares_along_the_threads_z(tmp_path):
    found = reports(tmp_path, """
    __global__ void j7(const float *in, float *out, int nx, int ny, int nz)
    {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        int z = blockIdx.z * blockDim.z + threadIdx.z;
        int i = (z * ny + y) * nx + x;
        out[i] = in[i] + in[i - nx * ny] + in[i + nx * ny];
    }
    """)
    (entry,) = groups(found["i - nx * ny"])
    assert entry["dimension"] == "z" and entry["reads"] == 2, entry


def test_reads_two_planes_apart_past_the_reach_or_of_a_written_array_are_not_neighbours(tmp_path):
    far = reports(tmp_path, SEVEN_LOOP.replace("u[c - 1] + u[c + 1] + u[c - nx] + u[c + nx] + u[c - plane] + "
                                               "u[c + plane]", "u[c + 3 * plane]"))
    assert not groups(far["c + 3 * plane"]) and not groups(far["c"])
    written = reports(tmp_path, SEVEN_LOOP.replace("v[c] =", "u[c] ="))
    assert not any(groups(r) for r in written.values())
