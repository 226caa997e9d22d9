"""compile's check picks a case the program's launch serves: an unguarded kernel launched with
`dim3 Dg(n / 192), Db(192);` starts no block at the small ragged sizes, and with more threads than `n` its
`a[i + k*n]` stores race. The check then grows the launch's size parameters by whole naive blocks (the
residue stays ragged, so the naive launch leaves the last elements undone), and still compares every
element there."""
from pathlib import Path

import numpy as np
import pytest
from pycparser import c_ast, c_parser

from gpgpu_opt import pipeline
from gpgpu_opt.launch import sites
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target

#: Rodinia cfd's time step, in its style: no guard, the grid rounds down, two dim3 in one declaration.
TIME_STEP = """
#define BLOCK_SIZE 192
#define VAR_DENSITY 0
#define VAR_MOMENTUM 1
#define VAR_DENSITY_ENERGY 4
#define RK 3

__global__ void time_step(int j, int nelr, float *old_variables, float *variables, float *step_factors,
                          float *fluxes)
{
    const int i = (blockDim.x * blockIdx.x + threadIdx.x);
    float factor = step_factors[i] / (float)(RK + 1 - j);
    variables[i + VAR_DENSITY * nelr] = old_variables[i + VAR_DENSITY * nelr] + factor * fluxes[i + VAR_DENSITY * nelr];
    variables[i + VAR_DENSITY_ENERGY * nelr] = old_variables[i + VAR_DENSITY_ENERGY * nelr]
        + factor * fluxes[i + VAR_DENSITY_ENERGY * nelr];
    variables[i + (VAR_MOMENTUM + 0) * nelr] = old_variables[i + (VAR_MOMENTUM + 0) * nelr]
        + factor * fluxes[i + (VAR_MOMENTUM + 0) * nelr];
    variables[i + (VAR_MOMENTUM + 1) * nelr] = old_variables[i + (VAR_MOMENTUM + 1) * nelr]
        + factor * fluxes[i + (VAR_MOMENTUM + 1) * nelr];
    variables[i + (VAR_MOMENTUM + 2) * nelr] = old_variables[i + (VAR_MOMENTUM + 2) * nelr]
        + factor * fluxes[i + (VAR_MOMENTUM + 2) * nelr];
}

void run_time_step(int j, int nelr, float *old_variables, float *variables, float *step_factors, float *fluxes)
{
    dim3 Dg(nelr / BLOCK_SIZE), Db(BLOCK_SIZE);
    time_step<<<Dg, Db>>>(j, nelr, old_variables, variables, step_factors, fluxes);
}
"""

PASSES = ["restrict", "normalize", "vectorize"]
CXX = Path(__file__).resolve().parents[1] / "programs" / "cxx"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("check_case") / "time_step.cu"
    path.write_text(TIME_STEP)
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def _compile(program, pass_names):
    diagnostics = Diagnostics(quiet=True)
    result = pipeline.compile_with(program, get_target("sm_90"), pass_names, diagnostics, validate=True)
    return result.kernels[0], diagnostics


def test_both_dim3_of_one_declaration_are_read(program):
    found = sites.naive_launch(program, program.kernels[0], {"nelr": 421})
    assert found.block == (192, 1, 1) and found.grid == (2, 1, 1)


def test_dim3_declarators_of_a_statement_and_not_of_a_parameter_list():
    from gpgpu_opt.launch.host_scopes import dim3_declarators

    text = "void f(dim3 g, dim3 b) { dim3 grid(n / 4, 2), blk, t = dim3(8); dim3 w{16, 16}; }"
    found = {name: (components, text[at:at + len(name)]) for name, at, components in dim3_declarators(text)}
    assert {name: components for name, (components, _) in found.items()} == {
        "grid": ["n / 4", "2"], "blk": ["1", "1", "1"], "t": ["8"], "w": ["16", "16"]}
    assert all(name == at for name, (_, at) in found.items())   # offsets point at the names


def test_the_check_grows_the_sizes_the_launch_serves_and_keeps_them_ragged(program):
    kernel, diagnostics = _compile(program, PASSES)
    validation = kernel.validation
    assert validation.status == "passed" and validation.kept_after == "vectorize", validation.detail
    nelr = validation.case.sizes["nelr"]
    threads = validation.case.global_space[0]
    assert nelr % 192 and threads == nelr // 192 * 192 < nelr  # the naive launch leaves the tail undone
    assert threads >= 2 * 192                                   # in more than one block
    assert validation.case.sizes["j"] == 37                    # the launch does not depend on j: not grown
    assert "the naive launch could not run" in validation.detail


def _writes_the_tail(kernel, ctx):
    """A broken pass that only shows past the naive launch's threads: it also stores the last element."""
    tail = c_parser.CParser().parse("void f() { if (i == 0) variables[nelr - 1] = 0.0f; }").ext[0].body
    kernel.body.block_items.extend(tail.block_items)
    return kernel


def test_the_grown_case_still_catches_a_version_that_writes_past_the_naive_launch(program, monkeypatch):
    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "bad": _writes_the_tail})
    kernel, diagnostics = _compile(program, [*PASSES, "bad"])
    validation = kernel.validation
    assert validation.status == "rolled back" and validation.emulated, validation.detail
    assert validation.kept_after == "vectorize"
    assert "after bad: variables:" in validation.detail and "differ" in validation.detail


def _breaks_aligned_rows(kernel, ctx):
    """A broken pass that only shows where the rows are aligned (where vectorize takes its vector path)."""
    tail = c_parser.CParser().parse("void f() { if (i == 0 && nelr % 16 == 0) variables[0] = 0.0f; }").ext[0].body
    kernel.body.block_items.extend(tail.block_items)
    return kernel


def test_a_vectorized_version_is_also_checked_where_its_vector_path_runs(program, monkeypatch):
    """The ragged sizes leave `i + j*nelr` rows unaligned, so only the scalar path ran there: the check also
    runs the sizes rounded up to a multiple of 16, and rolls back what fails there."""
    kernel, _ = _compile(program, PASSES)
    assert kernel.validation.status == "passed" and "where rows are aligned" in kernel.validation.detail
    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "bad": _breaks_aligned_rows})
    kernel, _ = _compile(program, [*PASSES, "bad"])
    validation = kernel.validation
    assert validation.status == "rolled back" and validation.kept_after == "vectorize", validation.detail
    assert "where rows are aligned" in validation.detail and "after bad" in validation.detail


#: An optional bias, as C++ code writes it (`bias != nullptr`, lowered to 0).
ADD_BIAS = """
__global__ void add_bias(float *out, const float *in, const float *bias, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i];
        if (bias != 0)
            v += bias[i];
        out[i] = v;
    }
}
"""


@pytest.fixture(scope="module")
def add_bias(tmp_path_factory):
    path = tmp_path_factory.mktemp("check_case") / "add_bias.cu"
    path.write_text(ADD_BIAS)
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def _adds_the_bias_only_when_given(kernel):
    from gpgpu_opt.emulator import run_kernel

    x, b = np.arange(8, dtype=np.float32), np.full(8, 10, np.float32)
    for bias, expected in ((b, x + 10), (None, x)):
        out = np.zeros(8, np.float32)
        run_kernel(kernel, (1, 1, 1), (8, 1, 1), {"out": out, "in": x, "bias": bias, "n": 8})
        assert (out == expected).all()


def test_the_emulator_compares_pointers_with_null_and_runs_a_null_argument(add_bias):
    _adds_the_bias_only_when_given(add_bias.kernels[0])


def _drops_the_null_test(kernel, ctx):
    """A broken pass: it reads the bias whether or not it is null (right for every non-null bias)."""
    for node in walk(kernel.body):
        if isinstance(node, c_ast.If) and isinstance(node.cond, c_ast.BinaryOp) and node.cond.op == "!=":
            node.cond = c_ast.Constant("int", "1")
    ctx.log.applied("kernel", "the bias is read unconditionally")
    return kernel


def test_a_pointer_the_kernel_tests_for_null_is_also_checked_null(add_bias, monkeypatch):
    registered = pipeline.registry.registered_passes()
    monkeypatch.setattr(pipeline.registry, "registered_passes", lambda: {**registered, "bad": _drops_the_null_test})
    kernel, _ = _compile(add_bias, ["restrict", "normalize", "bad"])
    validation = kernel.validation
    assert validation.status == "rolled back" and validation.emulated, validation.detail
    assert "after bad: optimized kernel:" in validation.detail and "'bias'" in validation.detail


def test_cxx_casts_optional_bias_kernel_is_checked_and_transformed():
    program = load_program(str(CXX / "cxx_casts.cu"), diagnostics=Diagnostics(quiet=True))
    kernel, _ = _compile(program, ["restrict", "normalize", "vectorize", "coalesce", "merge"])
    assert kernel.validation.status == "passed", kernel.validation.detail
    assert kernel.validation.kept_after == "merge"


def test_a_pointer_tested_by_its_truth_value_is_checked_null_too(tmp_path):
    from gpgpu_opt.check.cases import null_tested_pointers

    path = tmp_path / "truth.cu"
    path.write_text(ADD_BIAS.replace("if (bias != 0)", "if (bias)"))
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    assert null_tested_pointers(kernel) == {"bias"}
    _adds_the_bias_only_when_given(kernel)


def test_no_grown_case_when_the_program_fixes_every_size(tmp_path):
    from gpgpu_opt.check.validate import _case, _grown_cases

    path = tmp_path / "fixed.cu"
    path.write_text("#define N 1000\n__global__ void flag(float *f, const float *a)\n{\n"
                    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < N) f[0] = a[i];\n}\n")
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    kernel = program.kernels[0]
    assert list(_grown_cases(program, kernel, (256, 1), {}, _case(program, kernel, (256, 1), {}))) == []


POINTER_WALK = """
__global__ void pointer_walk(float *out, const float *a, int n)
{
    int i = threadIdx.x;
    const float *end = a + n;
    float s = 0.0f;
    for (const float *p = a + i; p < end; p += 8)
        s += *p;
    out[i] = (a == (const float *) out) ? -1.0f : s;
}
"""


def test_the_emulator_orders_pointers_into_one_array_and_tells_two_arrays_apart(tmp_path):
    from gpgpu_opt.emulator import run_kernel

    path = tmp_path / "walk.cu"
    path.write_text(POINTER_WALK)
    kernel = load_program(str(path), diagnostics=Diagnostics(quiet=True)).kernels[0]
    a, out = np.arange(20, dtype=np.float32), np.zeros(8, np.float32)
    run_kernel(kernel, (1, 1, 1), (8, 1, 1), {"out": out, "a": a, "n": 20})
    assert out.tolist() == [float(a[i::8].sum()) for i in range(8)]
