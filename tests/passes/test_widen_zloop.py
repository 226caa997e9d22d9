"""Widening a 2-D grid of threads that marches a z loop (passes/vectorize/streams.py, subscripts.py): the loop's
trip count is a run-time size every lane shares, its center and y neighbours are float4s, its x neighbours
(edge clamps on x) are read lane by lane, and the fill rule counts threads x trips
(launch_dispatch.size_verdict). Every rewrite goes through compile's emulated check (at sizes no tile divides)
and is emulated again here, on the vector path and the scalar one, with z extents where the loop runs and
ones where it does not, and built with nvcc."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.launch.dispatch import DispatchFacts, size_verdict
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

#: A diffusion step on a 3-D grid in the style of a thermal simulation: one thread per (x, y) column, a
#: rolling window of three planes, the center and its clamped neighbours stepped plane by plane, no guard.
COLUMN = """
__global__ void column(const float *power, const float *t_in, float *t_out, int nx, int ny, int nz,
                       float k_c, float k_xy, float k_z)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int here = x + y * nx;
    int w = (x == 0) ? here : here - 1;
    int e = (x == nx - 1) ? here : here + 1;
    int n = (y == 0) ? here : here - nx;
    int s = (y == ny - 1) ? here : here + nx;
    int layer = nx * ny;
    float down, mid, up;
    down = mid = t_in[here];
    up = t_in[here + layer];
    t_out[here] = k_c * mid + k_xy * (t_in[w] + t_in[e] + t_in[n] + t_in[s]) + k_z * (down + up) + power[here];
    here += layer;
    w += layer;
    e += layer;
    n += layer;
    s += layer;
    for (int z = 1; z < nz - 1; ++z) {
        down = mid;
        mid = up;
        up = t_in[here + layer];
        t_out[here] = k_c * mid + k_xy * (t_in[w] + t_in[e] + t_in[n] + t_in[s]) + k_z * (down + up) + power[here];
        here += layer;
        w += layer;
        e += layer;
        n += layer;
        s += layer;
    }
    down = mid;
    mid = up;
    t_out[here] = k_c * mid + k_xy * (t_in[w] + t_in[e] + t_in[n] + t_in[s]) + k_z * (down + up) + power[here];
}

void step(float *power, float *t_in, float *t_out, int nx, int ny, int nz)
{
    dim3 block(32, 4);
    dim3 grid(nx / 32, ny / 4);
    column<<<grid, block>>>(power, t_in, t_out, nx, ny, nz, 0.5f, 0.1f, 0.05f);
}
"""

SIZES = {"k_c": 0.5, "k_xy": 0.1, "k_z": 0.05}


@pytest.fixture(scope="module")
def column(tmp_path_factory):
    return compile_source(tmp_path_factory, "column", COLUMN, passes="normalize,vectorize", vector_width=4)


def test_a_z_marching_stencil_is_widened(column):
    """Before: "the loop at line 21 has no constant trip count" (and `here` was assigned more than once)."""
    (k,) = column.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int x = 4 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    # the center, the plane above, the power and the store: float4s from the row the thread's x start
    assert "mid = ((const float4 *) (t_in + y * nx))[x / 4];" in text
    assert "up = ((const float4 *) (t_in + y * nx + z * layer + layer))[x / 4];" in text
    assert "((float4 *) (t_out + y * nx + z * layer))[x / 4] = make_float4(" in text
    # a y neighbour: every lane takes the same piece of its clamp, one float4
    assert "((const float4 *) (t_in + ((y == 0) ? (y * nx) : (y * nx - nx)) + z * layer))[x / 4]" in text
    assert "int4 n" not in text and "int4 s" not in text
    # an x neighbour: lane by lane, each lane its own clamped element
    assert "make_float4(t_in[w.x + z * layer], t_in[w.y + z * layer], t_in[w.z + z * layer], " in text
    assert "int4 w = make_int4((x == 0) ? here.x : (here.x - 1), (x + 1 == 0) ? here.y : (here.y - 1)," in text
    # one alignment test per row start and the plane's stride, not one per access
    assert text.count("& 15) == 0") == 5 and "nx * ny % 4 == 0" in text
    (applied,) = [n for n in vectorize_notes(k, "applied") if n.startswith("kernel: widened")]
    assert "as 4-element vectors (float4)" in applied
    assert k.validation.status == "passed"


@pytest.mark.parametrize("nx, ny, nz", [(64, 8, 5), (64, 8, 2), (64, 4, 1), (96, 12, 3), (34, 8, 4), (66, 4, 3),
                                        (128, 4, 7)])
def test_the_widened_column_matches_the_naive_one(column, nx, ny, nz):
    """nx = 34, 66: rows that do not start aligned (the scalar path); nz = 1, 2: the loop does not run."""
    (k,) = column.kernels
    assert "float4" in kernel_source(k.optimized.funcdef)
    assert_equivalent(k, {"nx": nx, "ny": ny, "nz": nz, **SIZES}, (nx // 32 * 32, ny // 4 * 4), seed=nx + nz)


def test_the_widened_column_builds(column, tmp_path_factory):
    assert_builds(column, tmp_path_factory)


@pytest.fixture(scope="module")
def column_sized(tmp_path_factory):
    """No width asked for: the launch's size is known only at run time."""
    return compile_source(tmp_path_factory, "column_sized", COLUMN, passes="normalize,vectorize")


def test_a_loop_of_a_run_time_trip_count_is_widened_to_8_byte_vectors(column_sized):
    """Measured, 16-byte vectors followed the launch's waves, 8-byte ones gained at every size
    (vectorize.RUN_TIME_LOOP_VECTOR_BYTES): float2, size-dispatched like any widening."""
    (k,) = column_sized.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int x = 2 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    assert "up = ((const float2 *) (t_in + y * nx + z * layer + layer))[x / 2];" in text
    assert "float4" not in text and "& 7) == 0" in text
    (applied,) = [n for n in vectorize_notes(k, "applied") if n.startswith("kernel: widened")]
    assert "as 2-element vectors (float2)" in applied and "widened to 8-byte vectors at most" in applied
    assert k.optimized.size_dispatch == 540672
    assert k.transformed and k.validation.status == "passed"


@pytest.mark.parametrize("nx, ny, nz", [(64, 8, 5), (64, 8, 1), (34, 8, 4), (66, 4, 3)])
def test_the_column_widened_by_two_matches_the_naive_one(column_sized, nx, ny, nz):
    """nx = 34: rows that start unaligned (the scalar path); nz = 1: the loop does not run."""
    (k,) = column_sized.kernels
    assert_equivalent(k, {"nx": nx, "ny": ny, "nz": nz, **SIZES}, (nx // 32 * 32, ny // 4 * 4), seed=nx + nz)


def test_the_column_widened_by_two_builds(column_sized, tmp_path_factory):
    assert_builds(column_sized, tmp_path_factory)


def test_a_double_z_march_is_not_widened_by_size(tmp_path_factory):
    """8 bytes hold one double: no vector is narrow enough, and double2's 16 bytes are what lost."""
    source = COLUMN.replace("float", "double")
    (k,) = compile_source(tmp_path_factory, "column_double", source, passes="normalize,vectorize").kernels
    assert k.optimized.launch is None
    assert any("8-byte vectors at most" in n and "--vector-width" in n for n in vectorize_notes(k, "skipped"))


# -- the fill rule: threads x trips ------------------------------------------------------------------------
KNOWN = DispatchFacts(300000, "line 9", None)           # above one GPU-full of an H100 (270336), below two
MIN = 540672


def test_threads_times_constant_trips_that_fill_the_gpu_keep_the_widening():
    verdict = size_verdict(KNOWN, MIN, "slow", 6)
    assert verdict.keep and verdict.dispatch_threads is None and "300000 threads of 6 trips each" in verdict.reason
    assert not size_verdict(KNOWN, MIN, "slow", 1).keep


def test_at_most_two_trips_count_so_a_loop_never_widens_below_one_gpu_full():
    """Measured (H100, hotspot3D's stencil widened by 4): 0.84x to 0.88x at 200704 threads of 8 and 32 trips,
    0.69x at 65536 threads of 32: trips do not make up for threads."""
    below = DispatchFacts(200704, "line 9", None)
    assert not size_verdict(below, MIN, "slow", 32).keep
    assert not size_verdict(DispatchFacts(262144, "line 9", None), MIN, "slow", 6).keep


def test_constant_trips_at_a_run_time_launch_set_the_threads_it_needs():
    unknown = DispatchFacts(None, "line 9", None)
    assert size_verdict(unknown, MIN, "slow", 8).dispatch_threads == MIN // 2


@pytest.mark.parametrize("side, widened", [(768, True), (512, False)])
def test_a_run_time_trip_count_bound_when_compiling_widens_by_two_where_the_launch_fills_the_gpu(
        tmp_path_factory, side, widened):
    """Bindings that fix nz leave the loop's width at 8 bytes (768 x 768 x 32 is where float4 lost, 0.91x; float2
    ran 1.02x); the fill rule counts the launch's threads: 589824 from 540672 on, 262144 below."""
    result = compile_source(tmp_path_factory, f"column_bound{side}", COLUMN, passes="normalize,vectorize",
                            bindings={"nx": side, "ny": side, "nz": 32})
    (k,) = result.kernels
    if widened:
        assert "float2" in kernel_source(k.optimized.funcdef) and k.optimized.size_dispatch is None
    else:
        assert k.optimized.launch is None
        assert any("fewer than the 540672 that fill the GPU widened" in n for n in vectorize_notes(k, "skipped"))


def test_a_body_without_a_loop_counts_threads_alone():
    assert not size_verdict(KNOWN, MIN, "slow").keep
    assert not size_verdict(KNOWN, MIN, "slow", None).keep
    cannot = DispatchFacts(None, "line 9", "the file does not launch it")
    assert not size_verdict(cannot, MIN, "slow", 8).keep
