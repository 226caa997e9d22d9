"""What the widening tests share (test_vectorize_width.py, test_widen_lanes.py): compile a kernel's source
for sm_90, read vectorize's decisions, emulate the result against the naive kernel, build it with nvcc."""
from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case


def compile_source(tmp_path_factory, name: str, source: str, passes: str | None = "vectorize",
                   validate: bool = True, **options):
    """`source` (dedented) compiled for sm_90 with `passes` and CompileOptions' `options` (vector_width=4)."""
    path = tmp_path_factory.mktemp(name) / f"{name}.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    return compile_with(program, get_target("sm_90"), parse_pass_list(passes), diagnostics, validate=validate,
                        **options)


def compile_with_notes(tmp_path_factory, name: str, source: str, passes: str | None = None):
    """compile_source with every pass by default, and the notes the compile printed."""
    path = tmp_path_factory.mktemp(name) / f"{name}.cu"
    path.write_text(textwrap.dedent(source))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(passes), diagnostics, validate=True)
    return result, [n.message for n in diagnostics.notes]


def vectorize_notes(kernel, action: str) -> list[str]:
    """vectorize's decisions on `kernel` with `action` ('applied', 'skipped'), as 'subject: reason'."""
    return [f"{d.subject}: {d.reason}" for d in kernel.context.log.decisions
            if d.pass_name == "vectorize" and d.action == action]


def assert_equivalent(kernel, sizes: dict, space: tuple[int, int], seed: int) -> None:
    """The optimized kernel computes what the naive one does at these sizes (race check on)."""
    result = run_case(kernel.naive, kernel.optimized, kernel.context.facts.naive_block,
                      Case(sizes=sizes, global_space=space), seed=seed, device_functions={}, check_races=True)
    assert result.ok, result.error or result.mismatches


def assert_builds(result, tmp_path_factory) -> None:
    """nvcc -cubin accepts the compiled program's output (skipped without nvcc)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    out = tmp_path_factory.mktemp("nvcc") / "out.cu"
    out.write_text(result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "/dev/null", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
