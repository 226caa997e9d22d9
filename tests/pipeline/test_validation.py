"""compile checks what it writes: a rewritten kernel that does not match the naive one in the emulator is
rolled back to the last version that does, with a note and a report entry; --no-validate skips the check."""
import json
import subprocess
import sys

from pycparser import c_ast

from gpgpu_opt import pipeline
from gpgpu_opt.ast_util import walk
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target
from tests.conftest import INPUTS

MV = str(INPUTS / "mv.cu")


def _off_by_one(kernel, ctx):
    """A broken pass: every subscript of the written array reads one element further."""
    for node in list(walk(kernel.body)):
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID) and node.name.name == "A":
            node.subscript = c_ast.BinaryOp("+", node.subscript, c_ast.Constant("int", "1"))
    return kernel


def test_a_pass_that_changes_the_result_is_rolled_back(monkeypatch):
    registered = pipeline.registered_passes()
    monkeypatch.setattr(pipeline, "registered_passes", lambda: {**registered, "bad": _off_by_one})
    program = load_program(MV, diagnostics=Diagnostics(quiet=True))
    diagnostics = Diagnostics(quiet=True)
    result = pipeline.compile_program(program, get_target("sm_90"), ["restrict", "normalize", "coalesce", "bad"],
                                      diagnostics, validate=True)
    kernel = result.kernels[0]
    assert kernel.validation.status == "rolled back" and kernel.validation.kept_after == "coalesce"
    assert "after bad:" in kernel.validation.detail
    assert kernel.optimized.launch is not None  # coalesce's version, which passes, is what is written
    assert any("the emulated check failed" in str(n) for n in diagnostics.notes)
    report = result.report()["kernels"][0]["validation"]
    assert report["status"] == "rolled back" and report["kept"] == "coalesce" and report["sizes"]


def test_compile_validates_by_default_and_no_validate_skips(tmp_path):
    for flags, expected in (([], "passed"), (["--no-validate"], None)):
        report = tmp_path / "r.json"
        proc = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", MV, "-o", str(tmp_path / "o.cu"),
                               "--report", str(report), *flags], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        validation = json.loads(report.read_text())["kernels"][0].get("validation")
        assert (validation or {}).get("status") == expected
        if expected:
            assert validation["sizes"] == {"rows": 37, "cols": 45}  # ragged: divides no tile
