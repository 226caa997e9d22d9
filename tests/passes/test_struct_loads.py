"""Arrays of POD structs (a struct of m fields of one scalar type): the emulator runs them on a flat view of
their fields (emulator/structs.py), the check makes and compares them, and vectorize loads a struct that a
statement reads whole, 8 or 16 bytes, as one vector (passes/vectorize/struct_loads.py)."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import UnsupportedConstruct, run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

PROGRAM = """
typedef struct latLong { float lat; float lng; } LatLong;
struct Body { float x, y, z, m; };
struct Pair { float a, b; };
struct Wide { float a, b, c; };

__global__ void euclid(LatLong *d_locations, float *d_distances, int numRecords, float lat, float lng)
{
    int globalId = blockDim.x * blockIdx.x + threadIdx.x;
    LatLong *latLong = d_locations + globalId;
    if (globalId < numRecords) {
        float *dist = d_distances + globalId;
        *dist = (float)sqrt((lat - latLong->lat) * (lat - latLong->lat) + (lng - latLong->lng) * (lng - latLong->lng));
    }
}

__global__ void weigh(const Body *b, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = b[i].m * (b[i].x + b[i].y + b[i].z);
}

__global__ void swap(Pair *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float t = p[i].a + p[i].b;
        p[i].a = t;
    }
}

__global__ void guarded(const Pair *p, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = p[i].a > 0.0f ? p[i].b : 0.0f;
}

__global__ void wide(const Wide *w, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = w[i].a + w[i].b + w[i].c;
}

__global__ void unknown(const Pair *p, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = p[i].a * p[i].b;
}

void run_unknown(const Pair *p, float *out, int n)
{
    unknown<<<(n + 255) / 256, 256>>>(p, out, n);
}

int main()
{
    int n = 1 << 16;
    LatLong *loc; Body *b; Pair *p, *g, *u; Wide *w; float *out;
    cudaMalloc(&loc, n * sizeof(LatLong));
    cudaMalloc(&b, n * sizeof(Body));
    cudaMalloc(&p, n * sizeof(Pair));
    cudaMalloc(&g, n * sizeof(Pair));
    cudaMalloc(&u, n * sizeof(Pair));
    cudaMalloc(&w, n * sizeof(Wide));
    cudaMalloc(&out, n * sizeof(float));
    euclid<<<(n + 255) / 256, 256>>>(loc, out, n, 1.0f, 2.0f);
    weigh<<<(n + 255) / 256, 256>>>(b, out, n);
    swap<<<(n + 255) / 256, 256>>>(p, n);
    guarded<<<(n + 255) / 256, 256>>>(g, out, n);
    wide<<<(n + 255) / 256, 256>>>(w, out, n);
    run_unknown(u, out, n);
    return 0;
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("struct_loads") / "k.cu"
    path.write_text(textwrap.dedent(PROGRAM))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    diagnostics = Diagnostics(quiet=True)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=True)
    return program, {k.naive.name: k for k in result.kernels}, [n.message for n in diagnostics.notes]


def test_the_emulator_runs_an_array_of_structs_on_a_flat_view_of_its_fields(compiled):
    program, _, _ = compiled
    swap = program.kernel("swap")
    fields = np.arange(8, dtype=np.float32)          # 4 structs {a, b}
    run_kernel(swap, (1, 1), (4, 1), {"p": fields, "n": 4})
    assert fields.tolist() == [1, 1, 5, 3, 9, 5, 13, 7]  # p[i].a = p[i].a + p[i].b, b kept


def test_the_emulator_refuses_a_struct_pointer_used_other_than_through_its_fields(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text("struct Pair { float a, b; };\n"
                    "__global__ void k(Pair *p, Pair *q) { if (p == q) p[0].a = 1.0f; }\n")
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernel("k")
    with pytest.raises(UnsupportedConstruct, match="pointer to a struct"):
        run_kernel(kernel, (1, 1), (1, 1), {"p": np.zeros(2, np.float32), "q": np.zeros(4, np.float32)})


@pytest.mark.parametrize("kernel, vector, load", [
    ("euclid", "float2", "const float2 latLong_v = ((const float2 *) latLong)[0];"),
    ("weigh", "float4", "const float4 b_v = ((const float4 *) b)[i];"),
])
def test_a_struct_read_whole_is_one_vector_load_checked_by_the_emulator(compiled, kernel, vector, load):
    _, kernels, _ = compiled
    result = kernels[kernel]
    text = kernel_source(result.optimized.funcdef)
    assert load in text, text
    assert "->" not in text and "].lat" not in text and "].x" not in text
    assert result.validation.as_dict()["status"] == "passed", result.validation.as_dict()


def test_the_components_follow_the_fields(compiled):
    text = kernel_source(compiled[1]["weigh"].optimized.funcdef)
    assert "b_v.w * (b_v.x + b_v.y + b_v.z)" in text


@pytest.mark.parametrize("kernel, why", [
    ("swap", None),   # the struct is written: no note, its reads stay
    ("guarded", "a field read lies under '?:'"),
    ("wide", "'Wide' is 12 bytes, not the size of a CUDA vector"),
    ("unknown", "'p' is not known to be 8-byte aligned"),
])
def test_a_struct_read_is_left_as_written_where_the_vector_is_not_proved(compiled, kernel, why):
    _, kernels, notes = compiled
    text = kernel_source(kernels[kernel].optimized.funcdef)
    assert "_v = " not in text, text
    if why is not None:
        assert any("whole struct not loaded as one vector: " + why in n for n in notes), notes


def test_the_emulator_reads_the_vector_view_of_the_fields_in_field_order(compiled):
    optimized = compiled[1]["weigh"].optimized
    fields = np.array([1, 2, 3, 10, 4, 5, 6, 100], dtype=np.float32)   # 2 structs {x, y, z, m}
    out = np.zeros(2, np.float32)
    run_kernel(optimized, (1, 1), (2, 1), {"b": fields, "out": out, "n": 2})
    assert out.tolist() == [60.0, 1500.0]


def test_a_local_struct_pointer_declared_twice_has_no_known_origin(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
        struct Pair { float a, b; };
        __global__ void k(const Pair *p, const Pair *r, float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                { const Pair *q = (i % 2 ? p : r) + i; out[i] = q[0].a * q[0].b; }
                { const Pair *q = r + i; out[i] += q[0].a; }
            }
        }
        int main()
        {
            int n = 1 << 10;
            Pair *p, *r; float *out;
            cudaMalloc(&p, n * sizeof(Pair));
            cudaMalloc(&r, n * sizeof(Pair));
            cudaMalloc(&out, n * sizeof(float));
            k<<<(n + 255) / 256, 256>>>(p, r, out, n);
            return 0;
        }
        """))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    diagnostics = Diagnostics(quiet=True)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, validate=True)
    assert "_v = " not in kernel_source(result.kernels[0].optimized.funcdef)
    assert any("whole struct not loaded as one vector: the pointer is not a parameter" in n.message
               for n in diagnostics.notes), [n.message for n in diagnostics.notes]
