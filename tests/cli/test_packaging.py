"""A built wheel carries the templates (templates/ at the project root, shipped as gpgpu_opt/templates), the
benchmarked sources (inputs/, four of tests/programs/, bench/generalization/) and every module, and the compiler it installs finds
them from any directory."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

from tests.conftest import GOLDEN, ROOT


def test_the_wheel_carries_the_templates_and_compiles_from_another_directory(tmp_path):
    src = tmp_path / "src"   # a copy: building in the checkout would leave build/ there, stale files and all
    for name in ("gpgpu_opt", "templates", "inputs", "tests/programs", "bench/generalization"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"gpgpu_opt/templates/{p.name}" for p in (ROOT / "templates").glob("*.j2")}
    assert templates and templates <= names, sorted(templates - names)
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gpgpu_opt").rglob("*.py")}
    assert modules <= names, f"packages missing from pyproject.toml: {sorted(modules - names)}"

    installed, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    zipfile.ZipFile(wheel).extractall(installed)
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    where = "from gpgpu_opt.templating import template_dir; print(template_dir())"
    found = subprocess.run([sys.executable, "-c", where], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert found.stdout.strip() == str(installed / "gpgpu_opt" / "templates"), found.stderr
    compiled = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", str(ROOT / "inputs" / "vv.cu"), "-o", "-",
                               "--no-validate"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    assert compiled.stdout == (GOLDEN / "sm_90" / "vv.cu").read_text()      # what the editable install writes
    sources = ("from gpgpu_opt.gpu.benchmarks import BENCHMARKS\n"
               "for b in BENCHMARKS.values(): print(b.path, b.path.is_file())")
    found = subprocess.run([sys.executable, "-c", sources], capture_output=True, text=True, cwd=elsewhere, env=env)
    rows = [line.rsplit(" ", 1) for line in found.stdout.splitlines()]
    assert rows and all(ok == "True" and path.startswith(str(installed)) for path, ok in rows), found.stdout + found.stderr
