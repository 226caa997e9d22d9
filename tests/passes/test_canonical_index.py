"""Canonical indices and small normalizations that let the passes see real kernels' usual forms.

- `int bx = blockIdx.x; int tx = threadIdx.x; int ei = bx * NUMBER_THREADS + tx;` is the global x index
  where every launch has blocks of NUMBER_THREADS (and only there);
- a final `return;` does not stop coalesce;
- a loop step that is an integer constant expression (`i += (1 << 10)`) is canonical;
- a file-scope `const int` is a constant inside kernels;
- `blocks.x = blocks_x;` copies the value: a later `blocks_x = ...` does not change the launch."""
from __future__ import annotations

from pathlib import Path

import pytest
from pycparser import c_ast, c_parser

from gpgpu_opt.launch import sites
from gpgpu_opt.analysis.loops import canonical_loop
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.passes.normalize.index import substitute_builtin_copies
from gpgpu_opt.passes.normalize.returns import drop_trailing_returns
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

#: srad's style: copies of the built-ins, the block size as a macro, dim3 members assigned one by one, the
#: grid's x copied from a variable that a later loop reuses.
SRAD_STYLE = """
#include <cuda_runtime.h>
#define NUMBER_THREADS 256

__global__ void extract(long d_Ne, float *d_I)
{
    int bx = blockIdx.x;
    int tx = threadIdx.x;
    int ei = (bx * NUMBER_THREADS) + tx;
    if (ei < d_Ne) {
        d_I[ei] = exp(d_I[ei] / 255);
    }
}

int main()
{
    long Ne = 4000000;
    float *d_I;
    cudaMalloc((void **)&d_I, sizeof(float) * Ne);
    dim3 threads;
    int blocks_x;
    dim3 blocks;
    threads.x = NUMBER_THREADS;
    threads.y = 1;
    blocks_x = Ne / threads.x;
    if (Ne % threads.x != 0) {
        blocks_x = blocks_x + 1;
    }
    blocks.x = blocks_x;
    blocks.y = 1;
    for (int it = 0; it < 3; it++) {
        blocks_x = blocks_x / 2;
    }
    extract<<<blocks, threads>>>(Ne, d_I);
    cudaFree(d_I);
    return 0;
}
"""

#: kmeans' invert_mapping: a transpose read that coalesce stages, ending with `return;`.
TRANSPOSE_RETURNS = """
#include <cuda_runtime.h>
__global__ void invert_mapping(float *input, float *output, int npoints, int nfeatures)
{
    int point_id = threadIdx.x + blockDim.x * blockIdx.x;
    int i;
    if (point_id < npoints) {
        for (i = 0; i < nfeatures; i++)
            output[point_id + npoints * i] = input[point_id * nfeatures + i];
    }
    return;
}

int main()
{
    int npoints = 4096, nfeatures = 34;
    float *in, *out;
    cudaMalloc(&in, sizeof(float) * npoints * nfeatures);
    cudaMalloc(&out, sizeof(float) * npoints * nfeatures);
    invert_mapping<<<(npoints + 255) / 256, 256>>>(in, out, npoints, nfeatures);
    return 0;
}
"""


def compile_text(directory: Path, text: str, validate: bool = True):
    path = directory / "k.cu"
    path.write_text(text)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, {},
                             validate=validate)
    return result, diagnostics


def notes(diagnostics: Diagnostics) -> str:
    return "\n".join(n.message for n in diagnostics.notes)


def applied(result, kernel: str) -> set[str]:
    k = next(k for k in result.kernels if k.naive.name == kernel)
    return {d.pass_name for d in k.context.log.decisions if d.action == "applied"}


@pytest.fixture(scope="module")
def srad(tmp_path_factory):
    return compile_text(tmp_path_factory.mktemp("srad"), SRAD_STYLE)


def test_block_size_macro_index_is_the_global_index_and_vectorized(srad):
    result, diagnostics = srad
    k = result.kernels[0]
    assert "vectorize" in applied(result, "extract")
    assert k.validation is not None and k.validation.status == "passed"
    assert "blockIdx.x * 256 read as blockIdx.x * blockDim.x" in notes(diagnostics)
    assert "blockDim.x" in kernel_source(k.optimized.funcdef)


def test_dim3_member_copies_a_value_a_later_write_does_not_change(srad):
    result, diagnostics = srad
    assert "may change before the launch" not in notes(diagnostics)
    found = sites.naive_launch(result.program, result.program.kernels[0], {"Ne": 1000})
    assert found.block[:2] == (256, 1) and found.grid[:2] == (4, 1)


@pytest.mark.parametrize("host_block", ["128", None])
def test_block_size_constant_kept_where_a_launch_differs_or_none_is_known(tmp_path, host_block):
    text = SRAD_STYLE.replace("threads.x = NUMBER_THREADS;", f"threads.x = {host_block};") if host_block else \
        SRAD_STYLE[:SRAD_STYLE.index("int main()")]
    result, diagnostics = compile_text(tmp_path, text, validate=False)
    assert "vectorize" not in applied(result, "extract")
    why = "blocks of 128 threads along x, not 256" if host_block else "the file does not launch 'extract'"
    assert why in notes(diagnostics)


def _kernel(text: str) -> Kernel:
    ast = c_parser.CParser().parse("typedef struct {unsigned x, y, z;} uint3;\n"
                                   "uint3 threadIdx, blockIdx, blockDim, gridDim;\n" + text)
    funcdef = next(e for e in ast.ext if isinstance(e, c_ast.FuncDef))
    return Kernel(funcdef.decl.name, funcdef, (0, 0), 1)


def test_an_int_copy_stays_where_its_signedness_could_show():
    k = _kernel("""void k(float *a, int n) {
        int bx = blockIdx.x; int tx = threadIdx.x; unsigned ty = threadIdx.y;
        int i = bx * 64 + tx;
        if (tx - 1 < n) a[i + ty] = 1.0f;
    }""")
    substitute_builtin_copies(k)
    text = kernel_source(k.funcdef)
    assert "int i = blockIdx.x * 64 + tx;" in text       # bx: only in a sum that initializes an int
    assert "int tx = threadIdx.x;" in text               # `tx - 1 < n` would compare unsigned
    assert "a[i + threadIdx.y]" in text and " ty" not in text   # an unsigned copy is the built-in


def test_trailing_returns_are_dropped_but_not_early_ones():
    k = _kernel("""void k(float *a, int n) {
        int i = threadIdx.x;
        if (i >= n) return;
        if (i > 3) { a[i] = 1.0f; return; } else return;
        return;
    }""")
    drop_trailing_returns(k.body)
    text = kernel_source(k.funcdef)
    assert text.count("return") == 1 and "if (i >= n)" in text


def test_a_final_return_does_not_stop_coalesce(tmp_path):
    result, diagnostics = compile_text(tmp_path, TRANSPOSE_RETURNS)
    assert "returns, breaks or jumps" not in notes(diagnostics)
    assert "coalesce" in applied(result, "invert_mapping")
    assert result.kernels[0].validation.status == "passed"


@pytest.mark.parametrize("step", ["i += (1 << 10)", "i = i + 4 * 256", "i -= -(2 * 3)"])
def test_a_constant_expression_step_is_canonical(step):
    loop = _kernel(f"void k(float *a, int n) {{ for (int i = 0; i < n; {step}) a[i] = 0.0f; }}").body.block_items[0]
    found = canonical_loop(loop, {})
    assert found is not None and found.step == {"i += (1 << 10)": 1024, "i = i + 4 * 256": 1024,
                                                "i -= -(2 * 3)": 6}[step]


FILE_CONSTANT = """
#include <cuda_runtime.h>
const int threads_per_block = 128;
static const unsigned int scale = 3;

__global__ void sum_kernel(float *partial_sums, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        int x;
        float sum = 0;
        int num_blocks = (n + threads_per_block - 1) / threads_per_block;
        for (x = 0; x < num_blocks; x++)
            sum += partial_sums[x];
        partial_sums[0] = sum * scale;
    }
}

__global__ void shadowed(float *a, int n)
{
    int threads_per_block = n;
    a[threadIdx.x] = threads_per_block;
}

int main()
{
    int n = 1000;
    float *d;
    cudaMalloc(&d, sizeof(float) * n);
    sum_kernel<<<(n + threads_per_block - 1) / threads_per_block, threads_per_block>>>(d, n);
    shadowed<<<1, 32>>>(d, n);
    return 0;
}
"""


def test_a_file_scope_const_int_is_a_constant_in_kernels(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(FILE_CONSTANT)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    assert [k.name for k in program.kernels] == ["sum_kernel", "shadowed"] and not program.passed_through
    text = kernel_source(program.kernels[0].funcdef)
    assert "(n + 128 - 1) / 128" in text and "sum * 3u" in text
    assert "a[threadIdx.x] = threads_per_block;" in kernel_source(program.kernels[1].funcdef)


@pytest.mark.parametrize("ne, blocks", [(1024, 4), (1025, 5)])
def test_the_copied_value_follows_the_branch_that_rounds_up(srad, ne, blocks):
    result, _ = srad
    assert sites.naive_launch(result.program, result.program.kernels[0], {"Ne": ne}).grid[0] == blocks


@pytest.mark.parametrize("change", [
    "blocks_x = Ne / threads.x;\n    for (int k = 0; k < 2; k++) { blocks_x = blocks_x + 1; }",   # in a loop
    "blocks_x = Ne / threads.x;\n    if (Ne > 5) { blocks_x = 1; } else { blocks_x = 2; }",         # an else
    "blocks_x = Ne / threads.x;\n    Ne = 7;\n    if (Ne > 5) { blocks_x = 1; }",              # C's input changes
    "blocks_x = Ne / threads.x;\n    bump(&blocks_x);",                                          # address taken
    "blocks_x = Ne / threads.x;\n    if (Ne < 0) goto done;\n    done: ;",                         # a jump
])
def test_a_copy_whose_value_is_not_proved_leaves_the_launch_unknown(tmp_path, change):
    text = SRAD_STYLE.replace("long Ne = 4000000;", "long Ne;\n    Ne = 4000000;").replace(
        "blocks_x = Ne / threads.x;\n    if (Ne % threads.x != 0) {\n        blocks_x = blocks_x + 1;\n    }", change)
    text = text.replace("int main()", "void bump(int *v) { *v += 1; }\nint main()")
    assert change in text
    path = tmp_path / "k.cu"
    path.write_text(text)
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    found = sites.naive_launch(program, program.kernels[0], {"Ne": 1000})
    assert found.grid[0] is None and any("may change before the launch" in why for _, why, _ in found.unknown)
