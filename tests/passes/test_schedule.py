"""The schedule is data: each scheduling pass records an entry (pass_api/schedule.py) and one lowering
(pass_api/lowering.py, with the steps the passes register) generates the kernel from the schedule's source; no
pass re-plans from another's input."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.passes import lowering
from gpgpu_opt.pass_api.schedule import ENTRY_ORDER, Merge, Prefetch, Rows, Schedule, Staging, Widening
from gpgpu_opt.pipeline import compile_with


from gpgpu_opt.rewriting.tidy import tidy
from gpgpu_opt.targets import get_target


def lower(schedule, ctx):
    """The kernel the schedule describes, tidied as the compile's last step leaves the kernel it writes."""
    kernel = lowering()(schedule, ctx)
    tidy(kernel.funcdef, last=True)
    return kernel

INPUTS = Path(__file__).resolve().parents[2] / "inputs"


def compile_path(name: str, target: str, passes: str | None = None):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(INPUTS / name), diagnostics=diagnostics)
    return compile_with(program, get_target(target), parse_pass_list(passes), diagnostics, {})


def only(result, name: str):
    return next(k for k in result.kernels if k.naive.name == name)


def fresh(schedule: Schedule, **entries) -> Schedule:
    """The same source and entries (changed by `entries`), with nothing lowered yet."""
    return Schedule(schedule.source, **{**dict(zip(ENTRY_ORDER, schedule.entries())), **entries})


@pytest.fixture(scope="module")
def mm_g80():
    return only(compile_path("mm.cu", "g80"), "mm")


@pytest.fixture(scope="module")
def mv_g80():
    return only(compile_path("mv.cu", "g80"), "mv")


def test_entries_are_frozen_values_and_a_schedule_is_its_entries():
    staging = Staging("reads", (16, 1), (16, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        staging.steps = 2
    source = object()
    a = Schedule(source, staging=staging)
    assert a == Schedule(source, staging=Staging("reads", (16, 1), (16, 1)))   # what was lowered is not compared
    merged = a.with_(merge=Merge("block_merge", (2, 1)))
    assert a.merge is None and merged.merge == Merge("block_merge", (2, 1))
    assert merged.without("staging", "merge").empty
    with pytest.raises(TypeError):
        a.with_(source=None)


def test_mm_schedule_records_block_merge_as_an_amended_staging(mm_g80):
    """Block merge does not stage again from an earlier pass's input: it widens the staging entry's block
    and step, and records its factors; the rows per thread follow."""
    schedule = mm_g80.context.schedule
    assert schedule.staging == Staging("reads", (256, 1), (256, 1), 16, schedule.staging.comment)
    assert schedule.staging.comment.startswith("merge: 16 blocks of 16x1 threads merged in x")
    assert schedule.merge == Merge("block_merge", (16, 1))
    assert schedule.rows == Rows(16)
    assert schedule.source.launch is None and "__shared__" not in kernel_source(schedule.source.funcdef)


def test_lowering_the_schedule_from_its_source_gives_the_compiled_kernel(mm_g80):
    schedule = fresh(mm_g80.context.schedule)
    assert not schedule.lowered
    lowered = lower(schedule, mm_g80.context)
    assert kernel_source(lowered.funcdef) == kernel_source(mm_g80.optimized.funcdef)
    assert lowered.launch == mm_g80.optimized.launch


def test_block_merge_lowers_once_from_the_source_with_the_merged_block(mm_g80):
    """The staging entry alone, lowered from the source: one tile for the merged block of 256 threads,
    loaded 16 steps at once (no trace of coalesce's 16-thread staging)."""
    schedule = fresh(mm_g80.context.schedule, rows=None)
    text = kernel_source(lower(schedule.without("merge"), mm_g80.context).funcdef)
    assert "__shared__ float tile_A[256];" in text and text.count("__shared__") == 1
    assert "k0 += 256" in text and "// merge: 16 blocks of 16x1 threads merged in x" in text
    assert text == kernel_source(lower(schedule, mm_g80.context).funcdef)   # the merge entry adds nothing


def test_rotation_is_lowered_before_the_prefetch(mv_g80):
    """partition plans its rotation on the lowering without the prefetch entry; the prefetch is then simply
    lowered after the rotated loop."""
    schedule = mv_g80.context.schedule
    assert schedule.block_order is not None and schedule.block_order.kind == "rotation"
    assert schedule.prefetch == Prefetch("A -> tile_A, x -> tile_x", "registers")
    unprefetched = kernel_source(lower(fresh(schedule, prefetch=None), mv_g80.context).funcdef)
    assert "_next" not in unprefetched and "_next" in kernel_source(mv_g80.optimized.funcdef)
    assert kernel_source(lower(fresh(schedule), mv_g80.context).funcdef) == kernel_source(mv_g80.optimized.funcdef)


def test_conv_tile_drops_the_staging_and_records_its_own():
    kernel = only(compile_path("conv.cu", "sm_90"), "conv")
    schedule = kernel.context.schedule
    assert schedule.staging is None and schedule.merge.kind == "conv_tile" and schedule.merge.shape is not None
    assert kernel_source(lower(fresh(schedule), kernel.context).funcdef) == kernel_source(kernel.optimized.funcdef)


def test_each_pass_adds_its_entry_and_keeps_the_others():
    """coalesce alone on mm: its staging is the schedule; `--passes coalesce,prefetch` adds the prefetch."""
    staged = only(compile_path("mm.cu", "g80", "coalesce"), "mm").context.schedule
    assert staged.staging == Staging("reads", (16, 1), (16, 1)) and staged.entries()[2:] == (None,) * 4
    prefetched = only(compile_path("mm.cu", "g80", "coalesce,prefetch"), "mm").context.schedule
    assert prefetched.staging == staged.staging and prefetched.prefetch is not None


def test_widening_is_an_entry_lowered_from_the_source():
    """vectorize's widening is decided (4 x per thread for vv's floats on sm_90) and recorded; coalesce then
    leaves the kernel (its launch is set), and merge gives each thread 16 rows of the widened kernel."""
    kernel = only(compile_path("vv.cu", "sm_90"), "vv")
    schedule = kernel.context.schedule
    assert schedule.widening == Widening(4) and schedule.rows == Rows(16)
    assert schedule.staging is None and schedule.merge is None and schedule.prefetch is None
    assert "float4" not in kernel_source(schedule.source.funcdef) and schedule.source.launch is None
    lowered = lower(fresh(schedule), kernel.context)
    assert kernel_source(lowered.funcdef) == kernel_source(kernel.optimized.funcdef)
    assert lowered.launch == kernel.optimized.launch


def test_no_pass_reads_the_decision_log_or_another_pass_input():
    """What one pass decided reaches another through the schedule only: no pass looks up the log's
    decisions, and no kernel as an earlier pass received it is kept (`received`)."""
    passes = Path(__file__).resolve().parents[2] / "gpgpu_opt" / "passes"
    offending = [f"{path.relative_to(passes)}: {word}" for path in sorted(passes.rglob("*.py"))
                 for word in ("ctx.log.decisions", ".received") if word in path.read_text()]
    assert offending == []
