"""The generalization benchmark (bench/generalization/): every kernel file is registered, parses and compiles
without an internal error, and `bench` makes its harness or says why it cannot."""
from __future__ import annotations

import pytest

from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.gpu import benchmarks, generalization
from gpgpu_opt.gpu.commands import select_benchmarks
from gpgpu_opt.harness import generate_harness
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import CompileOptions, compile_program
from gpgpu_opt.targets import get_target
from tests.conftest import ROOT

FOLDER = ROOT / generalization.FOLDER
SUITE = [b for b in benchmarks.BENCHMARKS.values() if b.suite == generalization.SUITE]


def test_every_kernel_file_is_registered_once():
    files = sorted(p.name for p in FOLDER.glob("*.cu"))
    assert len(files) >= 15
    registered = sorted(b.path.name for b in SUITE)
    assert registered == files
    assert all(b.path.parent == FOLDER for b in SUITE)


def test_bench_selects_the_suite_by_name():
    chosen = select_benchmarks([generalization.SUITE])
    assert chosen == [b.name for b in SUITE]
    assert not set(chosen) & set(select_benchmarks(["project"]))
    assert set(select_benchmarks([])) == set(chosen) | set(select_benchmarks(["project"]))


def test_each_benchmark_names_a_kernel_of_its_file_and_gives_its_scalars():
    for bench in SUITE:
        program = benchmarks.load(bench)
        kernel = next((k for k in program.kernels if k.name == bench.kernel), None)
        assert kernel is not None, bench.name
        integers = {p.name for p in kernel.scalars if p.base_type in ("int", "unsigned int", "size_t")}
        assert integers <= set(bench.sizes), (bench.name, integers - set(bench.sizes))


@pytest.mark.parametrize("bench", SUITE, ids=lambda b: b.name)
def test_compiles_without_an_internal_error_and_the_harness_is_made_or_refused_with_a_reason(bench):
    """Strict (the tests' default): a pass's internal error raises instead of rolling back. The harness is
    generated as `bench` generates it, or refused with a CompileError that says why."""
    program = benchmarks.load(bench)
    result = compile_program(program, CompileOptions.of(get_target("sm_90"), parse_pass_list(None)),
                             Diagnostics(quiet=True))
    assert [k.naive.name for k in result.kernels] == [bench.kernel]
    try:
        text = generate_harness(program, result, bench.kernel, bench.sizes, bench.space, flops=bench.flops,
                                reference=bench.reference, runs=3)
    except CompileError as err:
        assert str(err).strip()
        return
    assert f"__global__ void {bench.kernel}_naive(" in text and f"{bench.kernel}_opt(" in text
