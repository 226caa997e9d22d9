"""Widening a 2-D grid of threads that marches a z loop (passes/vectorize/streams.py, subscripts.py): the loop's
trip count is a run-time size every lane shares, its center and y neighbours are float4s, its x neighbours
(edge clamps on x) are read lane by lane, and the fill rule counts threads x trips
(launch_dispatch.size_verdict). Every rewrite goes through compile's emulated check (at sizes no tile divides)
and is emulated again here, on the vector path and the scalar one, with z extents where the loop runs and
ones where it does not, and built with nvcc."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.launch_dispatch import DispatchFacts, size_verdict
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


def test_a_loop_of_a_run_time_trip_count_is_widened_only_at_a_width_asked_for(tmp_path_factory):
    """Measured, the widened z march followed the launch's waves, not its size (vectorize.run_time_loop)."""
    result = compile_source(tmp_path_factory, "column_sized", COLUMN, passes="normalize,vectorize")
    (k,) = result.kernels
    assert k.optimized.launch is None
    notes = [d.reason for d in k.context.log.decisions if d.pass_name == "vectorize"]
    assert any("a loop of a run-time trip count (a z march)" in n and "--vector-width" in n for n in notes), notes
    # normalize restated its induction variables for the analyses; nothing else applied: the user's text stays
    assert not k.transformed and "        here += layer;\n        w += layer;" in result.output


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


def test_a_run_time_trip_count_bound_when_compiling_is_still_not_widened(tmp_path_factory):
    """Bindings that fix nz do not make the z march safe: the measured losses were at known sizes."""
    result = compile_source(tmp_path_factory, "column_bound", COLUMN, passes="normalize,vectorize",
                            bindings={"nx": 768, "ny": 768, "nz": 32})
    (k,) = result.kernels
    assert k.optimized.launch is None
    assert any("a loop of a run-time trip count" in d.reason for d in k.context.log.decisions), \
        [d.reason for d in k.context.log.decisions]


def test_a_body_without_a_loop_counts_threads_alone():
    assert not size_verdict(KNOWN, MIN, "slow").keep
    assert not size_verdict(KNOWN, MIN, "slow", None).keep
    cannot = DispatchFacts(None, "line 9", "the file does not launch it")
    assert not size_verdict(cannot, MIN, "slow", 8).keep
