"""File-scope `__constant__` and `__device__` variables: declared for the kernels that use them, held by the
emulator (random contents, the same for the naive and the optimized run; `__device__` ones compared like
outputs), read freely by the passes, and a kernel that may store to a `__device__` variable is left as
written with a note."""
from __future__ import annotations

import copy
import textwrap

import numpy as np
import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.emulator import EmulationError, run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.frontend.program import parse_expression
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, default_cases, run_case

K = 5
DECLARATIONS = """
#define K 5
#define BINS 16
__constant__ float c_filter[K];
__constant__ float c_scale;
static __constant__ float c_w[2][BINS / 4];
__device__ int d_count;
__device__ int d_hist[BINS];
__device__ float d_table[256];
__device__ __constant__ double3 c_origin[1];
__device__ float clampf(float v) { return v < 0.0f ? 0.0f : v; }
"""

SAXPY = """
__global__ void saxpy(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = c_scale * x[i] + y[i] + c_w[1][2];
}

int main(int argc, char **argv)
{
    int n = argc << 16;    /* known at run time: the widened kernel is chosen by size there */
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    saxpy<<<(n + 255) / 256, 256>>>(x, y, n);
    return 0;
}
"""

CONV = """
__global__ void conv(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += c_filter[k] * in[i + k];
        out[i] = sum + d_table[i % 256];
    }
}
"""

HIST = """
__global__ void hist(const int *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&d_hist[in[i] % BINS], 1);
        atomicAdd(&d_count, 1);
    }
}
"""


def program_of(tmp_path, source: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(DECLARATIONS + source))
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def compiled(tmp_path, source: str, passes: str | None = None):
    program = program_of(tmp_path, source)
    diagnostics = Diagnostics(quiet=True)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(passes), diagnostics, validate=False)
    return program, result.kernels, diagnostics


def assert_matches_naive(program, result) -> None:
    for case in default_cases(result.naive, program, {}, None):
        outcome = run_case(result.naive, result.optimized, result.context.facts.naive_block, case, seed=3,
                           device_functions=program.device_functions, check_races=True)
        assert outcome.ok, (outcome.error, outcome.mismatches)
        assert outcome.elements > 0


def test_file_scope_variables_are_declared_with_space_type_and_dims(tmp_path):
    program = program_of(tmp_path, CONV + HIST)
    conv, hist = program.kernels
    assert sorted(conv.file_variables) == ["c_filter", "d_table"]
    assert sorted(hist.file_variables) == ["d_count", "d_hist"]
    c_filter, d_table = conv.file_variables["c_filter"], conv.file_variables["d_table"]
    assert (c_filter.space, c_filter.type_names, c_filter.dims) == ("constant", ("float",), (5,))
    assert (d_table.space, d_table.dims) == ("device", (256,))
    d_count = hist.file_variables["d_count"]
    assert (d_count.space, d_count.dims, d_count.is_array) == ("device", (), False)


def test_declaration_forms_static_both_qualifiers_and_vector_types(tmp_path):
    program = program_of(tmp_path, """
        __global__ void uses(float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n)
                out[i] = c_w[0][i % 4] + (float) c_origin[0].y;
        }
    """)
    (kernel,) = program.kernels
    c_w, c_origin = kernel.file_variables["c_w"], kernel.file_variables["c_origin"]
    assert (c_w.space, c_w.dims) == ("constant", (2, 4))
    assert (c_origin.space, c_origin.type_names, c_origin.dims) == ("constant", ("double3",), (1,))
    assert "clampf" not in kernel.file_variables and "clampf" in program.device_functions


def test_a_local_of_the_same_name_hides_the_file_variable(tmp_path):
    program = program_of(tmp_path, """
        __global__ void hides(float *out, int n)
        {
            float c_scale = 2.0f;
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n)
                out[i] = c_scale;
        }
    """)
    assert program.kernels[0].file_variables == {}


def test_the_emulator_reads_constant_memory_and_stores_device_memory(tmp_path):
    program = program_of(tmp_path, CONV + HIST)
    conv, hist = program.kernels
    n = 64
    x = np.arange(n + K, dtype=np.float32)
    out = np.zeros(n, np.float32)
    filt = np.array([1, 2, 3, 4, 5], np.float32)
    table = np.arange(256, dtype=np.float32) * 10
    run_kernel(conv, (2, 1), (32, 1), {"in": x, "out": out, "n": n, "c_filter": filt, "d_table": table})
    expected = np.array([sum(filt[k] * x[i + k] for k in range(K)) + table[i] for i in range(n)], np.float32)
    np.testing.assert_allclose(out, expected)

    values = np.arange(n, dtype=np.int32) * 3
    counts, total = np.zeros(16, np.int32), np.zeros(1, np.int32)
    run_kernel(hist, (2, 1), (32, 1), {"in": values, "n": n, "d_hist": counts, "d_count": total})
    assert total[0] == n
    np.testing.assert_array_equal(counts, np.bincount(values % 16, minlength=16))


def test_the_emulator_names_a_file_variable_without_contents(tmp_path):
    program = program_of(tmp_path, CONV)
    (conv,) = program.kernels
    with pytest.raises(EmulationError, match="no contents for the file-scope variable 'c_filter'"):
        run_kernel(conv, (1, 1), (32, 1), {"in": np.zeros(40, np.float32), "out": np.zeros(32, np.float32),
                                           "n": 32, "d_table": np.zeros(256, np.float32)})


def test_a_kernel_reading_constant_memory_is_still_optimized_and_matches_naive(tmp_path):
    program, (result,), _ = compiled(tmp_path, SAXPY)
    assert result.transformed
    text = kernel_source(result.optimized.funcdef)
    assert "float4" in text and "c_scale" in text and "c_w[1][2]" in text
    assert_matches_naive(program, result)


def test_the_check_compares_constant_contents_shared_by_both_runs(tmp_path):
    """A rewritten kernel that reads another element of constant memory is caught: the contents are random,
    not a value every element shares."""
    program, (result,), _ = compiled(tmp_path, SAXPY, passes="none")
    wrong = result.naive.copy()
    for node in _walk(wrong.funcdef):
        if getattr(node, "value", None) == "2" and getattr(node, "type", None) == "int":
            node.value = "3"  # c_w[1][2] -> c_w[1][3]
    case = default_cases(result.naive, program, {}, None)[0]
    outcome = run_case(result.naive, wrong, (256, 1), case, seed=3, device_functions=program.device_functions)
    assert not outcome.ok and outcome.mismatches


def test_device_variables_are_compared_like_outputs(tmp_path):
    program, (result,), _ = compiled(tmp_path, """
        __global__ void copy_out(const float *x, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < 256)
                d_table[i] = x[i];
        }
    """, passes="none")
    wrong = result.naive.copy()
    assign = next(n for n in _walk(wrong.funcdef) if type(n).__name__ == "Assignment")
    assign.rvalue = parse_expression("x[i] + 1.0f")
    case = Case({"n": 256}, (256, 1), block=(256, 1, 1), grid=(1, 1, 1))
    same = run_case(result.naive, result.naive.copy(), (256, 1), case, seed=1,
                    device_functions=program.device_functions)
    assert same.ok and same.elements >= 256
    differs = run_case(result.naive, wrong, (256, 1), case, seed=1, device_functions=program.device_functions)
    assert any(m.startswith("d_table:") for m in differs.mismatches)


@pytest.mark.parametrize("body, why", [
    (HIST, "stores to (or takes the address of) the __device__ variable 'd_hist'"),
    ("""
        __device__ void bump() { d_count = d_count + 1; }
        __global__ void via_helper(float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { bump(); out[i] = 1.0f; }
        }
    """, "its helper 'bump' uses the __device__ variable 'd_count'"),
    ("""
        __global__ void scalar_store(float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i == 0) d_count = n;
            if (i < n) out[i] = 1.0f;
        }
    """, "stores to (or takes the address of) the __device__ variable 'd_count'"),
    ("""
        __global__ void escapes(float *out, int n)
        {
            float *t = d_table;
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { t[i % 256] = 0.0f; out[i] = 1.0f; }
        }
    """, "uses the __device__ array 'd_table' as a pointer"),
])
def test_a_kernel_that_may_store_to_device_memory_is_left_as_written(tmp_path, body, why):
    program, (result,), diagnostics = compiled(tmp_path, body)
    assert not result.transformed
    assert kernel_source(result.optimized.funcdef) == kernel_source(result.naive.funcdef)
    assert any(why in n.message and "left as written" in n.message for n in diagnostics.notes), \
        [n.message for n in diagnostics.notes]


def test_a_device_array_whose_address_the_host_takes_is_left_as_written(tmp_path):
    program, (result,), diagnostics = compiled(tmp_path, """
        __global__ void reads(const float *x, float *y, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n)
                y[i] = x[i] * d_table[i % 256];
        }
        int main()
        {
            float *x, *y, *t;
            int n = 1 << 16;
            cudaMalloc(&x, n * sizeof(float));
            cudaGetSymbolAddress((void **) &t, d_table);
            reads<<<(n + 255) / 256, 256>>>(x, t, n);
            return 0;
        }
    """)
    assert not result.transformed
    assert any("address of the __device__ variable 'd_table'" in n.message for n in diagnostics.notes)


def test_a_kernel_only_reading_device_memory_is_optimized_and_matches_naive(tmp_path):
    program, (result,), _ = compiled(tmp_path, """
        __global__ void reads(const float *x, float *y, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n)
                y[i] = x[i] * d_table[i % 256] + c_scale;
        }
        int main(int argc, char **argv)
        {
            float *x, *y;
            int n = argc << 16;
            cudaMalloc(&x, n * sizeof(float));
            cudaMalloc(&y, n * sizeof(float));
            reads<<<(n + 255) / 256, 256>>>(x, y, n);
            return 0;
        }
    """)
    assert result.transformed
    assert_matches_naive(program, result)


def _walk(node):
    from gpgpu_opt.ast_util import walk

    return list(walk(node))


def test_kernel_copies_keep_their_file_variables(tmp_path):
    program = program_of(tmp_path, CONV)
    (conv,) = program.kernels
    assert conv.copy().file_variables.keys() == conv.file_variables.keys()
    assert copy.copy(conv).file_variables is conv.file_variables


def test_analyze_reports_file_scope_reads_and_whether_a_warp_reads_one_address(tmp_path):
    from gpgpu_opt.analysis import analyze_kernel
    from gpgpu_opt.targets import get_target as target

    program = program_of(tmp_path, CONV + """
        __global__ void lookup(const int *idx, float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n)
                out[i] = d_table[idx[i] % 256] + c_w[1][i % 4] + c_w[blockIdx.x % 2][3];
        }
    """)
    conv, lookup = (analyze_kernel(k, target("sm_90")) for k in program.kernels)
    reads = {(a.array, a.index_text): a for a in conv.file_scope_reads + lookup.file_scope_reads}
    assert reads[("c_filter", "k")].extra["uniform"] and reads[("c_filter", "k")].kind == "const-mem"
    assert not reads[("d_table", "i % 256")].extra["uniform"] and reads[("d_table", "i % 256")].kind == "device-mem"
    assert not reads[("d_table", "idx[i] % 256")].extra["uniform"]
    assert not reads[("c_w", "1][i % 4")].extra["uniform"]
    assert reads[("c_w", "blockIdx.x % 2][3")].extra["uniform"]
    listed = lookup.as_dict()["file_scope_reads"]
    assert {"array": "c_w", "index": "blockIdx.x % 2][3", "uniform": True} .items() <= \
        next(d for d in listed if d["index"] == "blockIdx.x % 2][3").items()
    assert all(r.access.array in ("idx", "out") for r in lookup.reports)  # the passes never see them


def test_the_analyze_command_lists_them(tmp_path):
    from tests.cli_in_process import run_cli

    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(DECLARATIONS + CONV))
    out = run_cli("analyze", path)
    assert out.returncode == 0, out.stderr
    assert any("c_filter[k]" in line and "const-mem" in line and "broadcast" in line for line in out.stdout.splitlines())
    assert any("d_table[i % 256]" in line and "per-thread" in line for line in out.stdout.splitlines())


def test_declaration_scanner_forms(tmp_path):
    """`__align__`, initializers with calls and braces, a pointer variable (not modelled: stays undeclared),
    template and plain device functions and prototypes (not variables)."""
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
        __device__ __align__(16) float d_buf[8];
        __constant__ int c_n = 4;
        __constant__ float c_init[3] = {1.0f, 2.0f, 3.0f};
        __device__ float2 d_p = make_float2(1.0f, 2.0f);
        __device__ float *d_ptr;
        __device__ float half_of(float x);
        template <typename T> __device__ T twice(T x) { return x + x; }
        __device__ float half_of(float x) { return 0.5f * x; }
        __global__ void k(float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = half_of(d_buf[i % 8]) + (float) c_n + d_p.y + c_init[i % 3];
        }
    """))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    kernel = program.kernels[0]
    found = {n: (v.space, v.type_names, v.dims) for n, v in kernel.file_variables.items()}
    assert found == {"d_buf": ("device", ("float",), (8,)), "c_n": ("constant", ("int",), ()),
                     "d_p": ("device", ("float2",), ()), "c_init": ("constant", ("float",), (3,))}
    path.write_text(path.read_text().replace("+ c_init[i % 3]", "+ d_ptr[i]"))
    # a pointer variable is not modelled: the kernel reading it passes through, naming it
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    assert program.kernels == [] and "k" in program.passed_through
    assert any("undeclared identifier 'd_ptr'" in note.message for note in diagnostics.notes)


def test_several_declarators_and_a_declaration_that_is_not_c():
    from gpgpu_opt.frontend.cuda_c import parse_c
    from gpgpu_opt.frontend.file_scope import find_file_variables

    text = "__device__ int d_a, d_b[3];\n__device__ unknown_t d_q[2];\n__constant__ float c_z[4];\n"
    found = find_file_variables(text, "", "k.cu", parse_c)
    assert {n: (v.space, v.dims) for n, v in found.items()} == {
        "d_a": ("device", ()), "d_b": ("device", (3,)), "c_z": ("constant", (4,))}
