"""The pass context in three parts: frozen compile options, frozen per-kernel facts built once from one view
of the host program, and a typed decision log whose report entries read as before."""
import dataclasses

import pytest

from gpgpu_opt.launch import sites
from gpgpu_opt.analysis import aliasing
from gpgpu_opt.diagnostics import Diagnostics, Location
from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.host_view import view_of
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.passes.context import Decision, DecisionLog
from gpgpu_opt.passes.facts import kernel_facts
from gpgpu_opt.passes.options import CompileOptions, MergeRequest
from gpgpu_opt.pipeline import compile_program
from gpgpu_opt.targets import get_target

TWO_KERNELS = """
__global__ void scale(float *out, const float *in, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a * in[i];
}

__global__ void add(float *c, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

int main(void)
{
    int n = 1 << 20;
    float *d_a, *d_b, *d_c;
    cudaMalloc(&d_a, n * sizeof(float));
    cudaMalloc(&d_b, n * sizeof(float));
    cudaMalloc(&d_c, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(d_b, d_a, 2.0f, n);
    add<<<(n + 127) / 128, 128>>>(d_c, d_a, d_b, n);
    return 0;
}
"""


def _program(tmp_path, text: str = TWO_KERNELS):
    path = tmp_path / "two.cu"
    path.write_text(text)
    return load_program(str(path), diagnostics=Diagnostics(quiet=True))


def _options(**kw) -> CompileOptions:
    return CompileOptions.of(get_target("sm_90"), parse_pass_list(None), **kw)


def test_options_are_frozen_all_the_way_down():
    options = _options(bindings={"n": 1024}, merge_request=MergeRequest(2, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.vector_width = 4
    with pytest.raises(TypeError):
        options.bindings["n"] = 7          # a read-only copy: the caller's dict cannot reach the passes
    assert isinstance(options.passes, tuple) and options.bindings == {"n": 1024}
    assert options.but(vector_width=2).vector_width == 2 and options.vector_width is None


def test_options_keep_the_passes_the_user_named():
    assert _options().named == frozenset()
    named = CompileOptions.of(get_target("sm_90"), parse_pass_list("coalesce,partition"))
    assert named.named == {"coalesce", "partition"} and named.passes[-1] == "partition"


def test_kernel_facts_are_frozen_and_read_from_the_launches(tmp_path):
    program = _program(tmp_path)
    scale, add = program.kernels
    facts = kernel_facts(program, add, _options(bindings={"n": 64}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.naive_block = (32, 1)
    with pytest.raises(TypeError):
        facts.bindings["n"] = 1
    assert facts.naive_block == (128, 1) and facts.naive_block_known and facts.launched_in_file
    assert facts.launch_block == (128, 1) and facts.launch_covers == {"n"}
    assert facts.aliasing.restrict and facts.alignment["c"] == 256
    assert kernel_facts(program, scale, _options(block_override=(64, 1))).naive_block == (64, 1)


def _counting(monkeypatch, module, name: str) -> list:
    calls, real = [], getattr(module, name)

    def counted(*args):
        calls.append(args)
        return real(*args)
    monkeypatch.setattr(module, name, counted)
    return calls


def test_each_launch_question_is_computed_once_per_kernel_of_a_file(tmp_path, monkeypatch):
    launches = _counting(monkeypatch, sites, "_naive_launch")
    readings = _counting(monkeypatch, aliasing, "_read_launches")
    unread = _counting(monkeypatch, aliasing, "_unread_launches")
    program = _program(tmp_path)
    result = compile_program(program, _options(), Diagnostics(quiet=True))
    assert [k.naive.name for k in result.kernels] == ["scale", "add"]
    # the facts, the race check, the z-axis check and the default block all asked; each computed once
    assert sorted(args[1].name for args in launches) == ["add", "scale"]
    assert sorted(args[0].name for args in readings) == ["add", "scale"]
    assert sorted(args[0].name for args in unread) == ["add", "scale"]
    per_kernel = {"naive launch": 2, "launches read": 2, "launches unread": 2}
    per_program = ("stated space", "every file's text", "buffers", "definable vectors", "launch reading refused",
                   "launches by name", "sites by kernel", "words")
    assert view_of(program).computed == {**per_kernel, **{question: 1 for question in per_program}}


def test_a_program_with_new_text_gets_a_new_view(tmp_path):
    program = _program(tmp_path)
    view = view_of(program)
    assert view_of(program) is view
    program.text = program.text.replace("256>>>", "64>>>")
    assert view_of(program) is not view


def test_a_decision_is_applied_or_skipped_and_nothing_else():
    with pytest.raises(ValueError):
        Decision("coalesce", "done", "kernel", "why")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Decision("coalesce", "applied", "kernel", "why").action = "skipped"


def test_the_log_records_under_the_running_pass_and_notes_a_skip():
    diagnostics = Diagnostics(quiet=True)
    log = DecisionLog(diagnostics, "k")
    log.pass_name = "merge"
    log.applied("A[i]", "merged")
    log.pass_name = "prefetch"
    log.skip("B[i]", "no loop", Location("k.cu", 3))
    assert [(d.pass_name, d.action) for d in log.decisions] == [("merge", "applied"), ("prefetch", "skipped")]
    assert [str(n.message) for n in diagnostics.notes] == ["prefetch: B[i]: no loop"]


def test_report_entries_read_as_before():
    applied = Decision("coalesce", "applied", "A[i]", "staged", Location("k.cu", 12))
    assert applied.as_dict() == {"pass": "coalesce", "action": "applied", "subject": "A[i]", "reason": "staged",
                                 "line": 12}
    assert list(applied.as_dict()) == ["pass", "action", "subject", "reason", "line"]
    assert Decision("merge", "skipped", "kernel", "no").as_dict() == {
        "pass": "merge", "action": "skipped", "subject": "kernel", "reason": "no"}


def test_a_compiled_kernel_reports_its_context(tmp_path):
    program = _program(tmp_path)
    result = compile_program(program, _options(vector_width=1), Diagnostics(quiet=True))
    report = result.report()["kernels"][1]
    assert report["naive_block"] == [128, 1]
    first = report["decisions"][0]
    assert first == {"pass": "restrict", "action": "applied", "subject": "pointer parameters",
                     "reason": first["reason"], "line": 9}
    assert report["aliasing"]["restrict"] is True
