"""Widening sees a type by the type table's name, however it is written (`uint`, `uint32_t`, `unsigned`), and a
read at an index each lane loads is a gather (the measured rule: widened only at a width asked for). In the
style of graph codes (cuda-samples' segmentationTreeThrust): `uint` locals, offsets read from an array."""
from __future__ import annotations

import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

GRAPH = """
typedef unsigned int uint;

__global__ void add_scalar(uint *array, uint scalar, uint size)
{
    uint tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < size) {
        uint value = array[tid];
        array[tid] = value + scalar;
    }
}

__global__ void successors_of(const uint *offsets, const uint *min_edges, uint *successors, uint count, uint edges)
{
    uint tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < count) {
        uint position = (tid < count - 1) ? (offsets[tid + 1] - 1) : (edges - 1);
        successors[tid] = min_edges[position];
    }
}

void run(uint *a, const uint *o, const uint *m, uint *s, uint n, uint e)
{
    add_scalar<<<(n + 255) / 256, 256>>>(a, 3, n);
    successors_of<<<(n + 255) / 256, 256>>>(o, m, s, n, e);
}
"""


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return compile_source(tmp_path_factory, "graph", GRAPH, passes="vectorize", vector_width=None)


def test_a_uint_local_widens_as_uint4(graph):
    add = graph.kernels[0]
    text = kernel_source(add.optimized.funcdef)
    assert "uint4 value = ((const uint4 *) array)[tid / 4];" in text
    assert "make_uint4(value.x + scalar, value.y + scalar, value.z + scalar, value.w + scalar)" in text
    assert add.validation.status == "passed"


def test_a_read_at_an_index_each_lane_loads_is_a_gather(graph):
    successors = graph.kernels[1]
    assert not successors.transformed
    assert any("a gather body (min_edges[position] read lane by lane)" in n
               for n in vectorize_notes(successors, "skipped"))


@pytest.mark.parametrize("n", [37, 6, 4 * 40 + 1])
def test_both_widened_at_a_width_asked_for_match_the_naive_kernels(tmp_path_factory, n):
    asked = compile_source(tmp_path_factory, "graph4", GRAPH, passes="vectorize", vector_width=4)
    add, successors = asked.kernels
    assert "uint4" in kernel_source(successors.optimized.funcdef)
    assert_equivalent(add, {"size": n, "scalar": 3}, (n, 1), seed=n)
    assert_equivalent(successors, {"count": n, "edges": n + 5}, (n, 1), seed=n + 1)


def test_the_uint_widening_builds(graph, tmp_path_factory):
    assert_builds(graph, tmp_path_factory)
