import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ROOT / "inputs"
GOLDEN = ROOT / "golden"
INPUT_FILES = sorted(p.name for p in INPUTS.glob("*.cu"))
GOLDEN_TARGETS = ["g80", "sm_90"]


def pytest_configure(config):
    """Every compile in the tests runs strict (GPGPU_OPT_STRICT, compile_program's default, inherited by the
    CLI subprocesses too): a pass's internal error fails the test instead of becoming a silent rollback."""
    os.environ["GPGPU_OPT_STRICT"] = "1"


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
