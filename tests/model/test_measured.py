"""The model against what an H200 measured (tests/model/h200_measured.json): the rank correlation of the
predicted times of `tune`'s variants of mm, conv and mv with the measured ones. ptxas's resources are the
recorded ones (no nvcc here); `python -m tests.model.test_measured` compiles the variants with nvcc and
records them again."""
from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.model import Resources, predict_result, resources, spearman
from gpgpu_opt.passes import PassList, parse_pass_list
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from tests.conftest import INPUTS

SM90 = get_target("sm_90")
FIXTURE = Path(__file__).with_name("h200_measured.json")
MEASURED = json.loads(FIXTURE.read_text())


@lru_cache(maxsize=None)
def variant(kernel: str, label: str):
    """The variant as `tune` compiles it (the sizes bound, as tune binds them)."""
    entry, spec = MEASURED[kernel], MEASURED[kernel]["variants"][label]
    program = load_program(str(INPUTS / entry["file"]), target=SM90)
    passes = [p for p in parse_pass_list(None) if p not in spec.get("without", [])]
    merge = MergeRequest.parse(spec["merge"]) if spec.get("merge") else None
    result = compile_with(program, SM90, PassList(passes, tuple(spec.get("named", ()))), Diagnostics(quiet=True),
                             dict(entry["sizes"]), merge_request=merge)
    return result.kernels[0]


def predictions(kernel: str) -> tuple[list[float], list[float]]:
    entry = MEASURED[kernel]
    measured, predicted = [], []
    for label, spec in entry["variants"].items():
        recorded = Resources(**spec["ptxas"])
        measured.append(spec["ms"])
        predicted.append(predict_result(variant(kernel, label), SM90, entry["sizes"], recorded).seconds)
    return measured, predicted


@pytest.mark.parametrize("kernel", ["mm", "conv"])
def test_the_model_ranks_the_measured_variants(kernel):
    measured, predicted = predictions(kernel)
    assert spearman(measured, predicted) >= 0.7


def test_mv_predictions_are_near_the_measured_times():
    """Two variants rank by chance; what matters is that neither is predicted in seconds (the optimized
    kernel's threadIdx.y once made the model take mv for a 2-D launch) and that the rotated loop start
    of the partition variant counts as the loop it permutes."""
    measured, predicted = predictions("mv")
    for ms, seconds in zip(measured, predicted):
        assert 0.5 < seconds * 1e3 / ms < 2.5


def refresh() -> None:
    """Record ptxas's resources of every variant in the fixture (needs nvcc)."""
    from gpgpu_opt.harness import renamed_source

    for kernel, entry in MEASURED.items():
        if kernel.startswith("_"):
            continue
        for label, spec in entry["variants"].items():
            optimized = variant(kernel, label).optimized
            headers = "".join(f"#include <{h}>\n" for h in optimized.includes)
            found = resources(headers + renamed_source(optimized, optimized.name), SM90)
            spec["ptxas"] = {k: v for k, v in found.as_dict().items() if k != "source"}
            print(kernel, label, spec["ptxas"], file=sys.stderr)
    FIXTURE.write_text(json.dumps(MEASURED, indent=1) + "\n")


if __name__ == "__main__":
    refresh()
