import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from gpgpu_opt.nvcc import CACHE_ENV as NVCC_CACHE_ENV

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ROOT / "inputs"
GOLDEN = ROOT / "golden"
INPUT_FILES = sorted(p.name for p in INPUTS.glob("*.cu"))
GOLDEN_TARGETS = ["g80", "sm_90"]


def pytest_configure(config):
    """Every compile in the tests runs strict (GPGPU_OPT_STRICT, compile_program's default, inherited by the
    CLI subprocesses too): a pass's internal error fails the test instead of becoming a silent rollback."""
    os.environ["GPGPU_OPT_STRICT"] = "1"
    if "PYTEST_XDIST_WORKER" not in os.environ and NVCC_CACHE_ENV not in os.environ:
        # One nvcc cache for the session, inherited by the workers and the CLI subprocesses: the same kernel
        # text is built once (gpgpu_opt/nvcc.py: with -I, while the files it read are the same).
        config.nvcc_cache = os.environ[NVCC_CACHE_ENV] = tempfile.mkdtemp(prefix="gpgpu-opt-nvcc-")


def pytest_unconfigure(config):
    if getattr(config, "nvcc_cache", None):
        shutil.rmtree(config.nvcc_cache, ignore_errors=True)
        os.environ.pop(NVCC_CACHE_ENV, None)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files instead of comparing (review the diff!)")


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")


@pytest.fixture
def check_golden(update_golden):
    def check(path: Path, actual: str):
        if update_golden or not path.exists():
            if not update_golden:
                pytest.fail(f"missing golden file {path.relative_to(ROOT)} (run pytest --update-golden and review)")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual)
            return
        expected = path.read_text()
        assert actual == expected, f"{path.relative_to(ROOT)} differs (pytest --update-golden to accept, after review)"
    return check


requires_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@pytest.fixture(autouse=True)
def _private_tuning_cache(tmp_path_factory, monkeypatch):
    """`compile` reads tuned choices from the user's cache: the tests must not see this machine's."""
    monkeypatch.setenv("GPGPU_OPT_CACHE", str(tmp_path_factory.mktemp("cache")))


# -- how pytest-xdist shares the work (pyproject: `-n auto --dist loadfile`) ---------------------------------
#: Files whose expensive work is per parameter, not per file: their tests are sent to the workers in units of
#: one parameter (the first part of the test's id, e.g. a program's name), so that two workers share them.
#: Every other file stays one unit, so that its module fixtures are built once. A test of such a file with
#: no parameter is a unit of the file's remaining tests.
SPLIT_BY_PARAMETER = ("tests/programs/test_programs.py", "tests/cli/test_compile.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or for SPLIT_BY_PARAMETER its file and first parameter."""
    path, _, rest = nodeid.partition("::")
    if path not in SPLIT_BY_PARAMETER or not rest.endswith("]") or "[" not in rest:
        return path
    return f"{path}::{rest[rest.index('[') + 1:-1].split('-')[0]}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Largest units first (by number of tests, the split files' units before all others, being the slowest
    per test): a long unit started last would leave the other workers idle at the end."""
    sizes = Counter(work_unit(item.nodeid) for item in items)

    def rank(item):
        unit = work_unit(item.nodeid)
        return (unit.partition("::")[0] not in SPLIT_BY_PARAMETER, -sizes[unit], unit)
    items.sort(key=rank)   # stable: a unit's tests keep their order


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with the units of work_unit() and in collection order (see above)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return UnitScheduling(config, log)
