"""compile's check picks a case the program's launch serves: an unguarded kernel launched with
`dim3 Dg(n / 192), Db(192);` starts no block at the small ragged sizes, and with more threads than `n` its
`a[i + k*n]` stores race. The check then grows the launch's size parameters by whole naive blocks (the
residue stays ragged, so the naive launch leaves the last elements undone), and still compares every
element there."""
import pytest
from pycparser import c_ast, c_parser

from gpgpu_opt import launch, pipeline
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


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("check_case") / "time_step.cu"
    path.write_text(TIME_STEP)
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def _compile(program, pass_names):
    diagnostics = Diagnostics(quiet=True)
    result = pipeline.compile_program(program, get_target("sm_90"), pass_names, diagnostics, validate=True)
    return result.kernels[0], diagnostics


def test_both_dim3_of_one_declaration_are_read(program):
    found = launch.naive_launch(program, program.kernels[0], {"nelr": 421})
    assert found.block == (192, 1, 1) and found.grid == (2, 1, 1)


def test_dim3_declarators_of_a_statement_and_not_of_a_parameter_list():
    from gpgpu_opt.host_scopes import dim3_declarators

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
    assert validation.case.sizes["j"] == 37                    # the launch does not depend on j: not grown
    assert "the naive launch could not run" in validation.detail


def _writes_the_tail(kernel, ctx):
    """A broken pass that only shows past the naive launch's threads: it also stores the last element."""
    tail = c_parser.CParser().parse("void f() { if (i == 0) variables[nelr - 1] = 0.0f; }").ext[0].body
    kernel.body.block_items.extend(tail.block_items)
    return kernel


def test_the_grown_case_still_catches_a_version_that_writes_past_the_naive_launch(program, monkeypatch):
    registered = pipeline.registered_passes()
    monkeypatch.setattr(pipeline, "registered_passes", lambda: {**registered, "bad": _writes_the_tail})
    kernel, diagnostics = _compile(program, [*PASSES, "bad"])
    validation = kernel.validation
    assert validation.status == "rolled back" and validation.emulated, validation.detail
    assert validation.kept_after == "vectorize"
    assert "after bad: variables:" in validation.detail and "differ" in validation.detail
