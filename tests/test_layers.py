"""The import contracts (.importlinter, docs/ARCHITECTURE.md): the floors import only downwards, no pass package
imports another, no import cycles. Checked with import-linter on the package, and the checker itself on copies of
the package with one forbidden import added, so that a contract that cannot fail is caught too."""
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

CONFIG = ROOT / ".importlinter"


def lint(root) -> subprocess.CompletedProcess:
    """import-linter over the `gpgpu_opt` found first under `root` (no cache: the copies change)."""
    script = ("import sys; from importlinter.cli import lint_imports; "
              "sys.exit(lint_imports(config_filename='.importlinter', no_cache=True, no_logo=True))")
    return subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "", "PYTHONDONTWRITEBYTECODE": "1"})


def copy_with_import(tmp_path, module: str, line: str):
    """A copy of the package and its contracts, with `line` added at the end of `module` (a path in it)."""
    shutil.copytree(ROOT / "gpgpu_opt", tmp_path / "gpgpu_opt", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONFIG, tmp_path / ".importlinter")
    target = tmp_path / "gpgpu_opt" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return tmp_path


def test_the_import_contracts_hold():
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize("module, line, broken, culprit", [
    # an analysis reaching up to the pipeline
    ("analysis/loops.py", "from gpgpu_opt.pipeline import compile_program",
     "Floors: commands > pipeline", "gpgpu_opt.analysis.loops -> gpgpu_opt.pipeline"),
    # the rewriting floor reaching up to a pass at run time
    ("rewriting/tiles/plan.py", "from gpgpu_opt.passes.merge import register_tile",
     "Floors: commands > pipeline", "gpgpu_opt.rewriting.tiles.plan -> gpgpu_opt.passes.merge.register_tile"),
    # the pass API reaching up to the builders the passes share
    ("pass_api/context.py", "from gpgpu_opt.rewriting.cbuild import Unsupported",
     "Floors: commands > pipeline", "gpgpu_opt.pass_api.context -> gpgpu_opt.rewriting.cbuild"),
    # coalesce asking merge directly instead of through the registry
    ("passes/coalesce/halo.py", "from gpgpu_opt.passes.merge.split_loop import plan_split",
     "No pass package imports another", "gpgpu_opt.passes.coalesce.halo -> gpgpu_opt.passes.merge.split_loop"),
    # the tile record importing its planner: the circle the record was split out to break
    ("rewriting/tiles/staged.py", "from gpgpu_opt.rewriting.tiles.plan import plan_reads",
     "No import cycles", "gpgpu_opt.rewriting.tiles"),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, broken, culprit):
    proc = lint(copy_with_import(tmp_path, module, line))
    assert proc.returncode != 0, proc.stdout
    report = proc.stdout.split("Broken contracts", 1)[-1]
    assert broken in report and culprit in report, proc.stdout + proc.stderr


def test_an_import_under_type_checking_is_no_dependency(tmp_path):
    """The tiles name the pass's context in annotations only; such an import is allowed, a run-time one is
    not (above)."""
    proc = lint(copy_with_import(tmp_path, "rewriting/tiles/staged.py",
                                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from gpgpu_opt.pipeline import compile_program"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_debt_whose_import_went_must_leave_the_list(tmp_path):
    """An `ignore_imports` line that matches no import fails: the list of debts only shrinks by deleting."""
    root = copy_with_import(tmp_path, "kernel.py", "")
    config = root / ".importlinter"
    text = config.read_text()
    assert "ignore_imports =\n" in text
    config.write_text(text.replace("ignore_imports =\n", "ignore_imports =\n    gpgpu_opt.kernel -> gpgpu_opt.pipeline\n", 1))
    proc = lint(root)
    assert proc.returncode != 0 and "No matches for ignored import gpgpu_opt.kernel -> gpgpu_opt.pipeline" \
        in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _floor_entries() -> list[str]:
    text = CONFIG.read_text()
    block = text.split("layers =\n", 1)[1].split("\n\n", 1)[0]
    return [name.strip() for line in block.splitlines() for name in line.split("|") if name.strip()]


def _modules() -> list[str]:
    package = ROOT / "gpgpu_opt"
    out = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_module_stands_on_a_floor():
    """A module on no floor of the contract is checked by none of its rules: each one is a floor or inside one.
    The packages that hold modules of several floors (the root, its wings launch/ and check/) are no floor;
    their `__init__` imports nothing of the compiler, so that importing one module of a wing does not bring
    the others."""
    floors = _floor_entries()
    wings = {"gpgpu_opt", "gpgpu_opt.launch", "gpgpu_opt.check"}
    stray = [m for m in _modules() if m not in wings
             and not any(m == f or m.startswith(f + ".") for f in floors)]
    assert not stray, f"modules on no floor of .importlinter: {stray}"
    for wing in wings:
        init = ROOT / wing.replace(".", "/") / "__init__.py"
        assert "import gpgpu_opt" not in init.read_text() and "from gpgpu_opt" not in init.read_text(), init


def test_the_passes_folder_holds_the_registry_and_the_passes_alone():
    """The independence contract names `gpgpu_opt.passes.*`: that is every pass the registry lists, and nothing
    else may stand there (a shared module would be a pass to the contract: it belongs in pass_api/,
    rewriting/ or analysis/)."""
    from gpgpu_opt.passes import PACKAGES, records

    folder = ROOT / "gpgpu_opt" / "passes"
    present = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} | \
        {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert present == set(PACKAGES)
    assert "gpgpu_opt.passes.*" in CONFIG.read_text().split("[importlinter:contract:passes]", 1)[1]
    assert [r.name for r in records()] == list(PACKAGES)
