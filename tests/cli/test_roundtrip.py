"""parse -> print -> nvcc: every input comes back out of `compile --passes none` and still compiles."""
import subprocess

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import INPUT_FILES, ROOT, requires_nvcc


@requires_nvcc
@pytest.mark.parametrize("name", INPUT_FILES)
def test_passes_none_round_trip_compiles_with_nvcc(name, tmp_path):
    out = tmp_path / name
    proc = run_cli("compile", f"inputs/{name}", "-o", out, "--passes", "none", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    original = (ROOT / "inputs" / name).read_text()
    if "int main" in original:  # host code is kept byte for byte
        assert original[original.index("int main"):] == text[text.index("int main"):]
    build = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(out), "-o", str(tmp_path / "o.o"),
                            f"-I{ROOT / 'inputs'}"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
