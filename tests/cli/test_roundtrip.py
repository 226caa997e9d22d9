"""parse -> print -> nvcc: every input comes back out of `compile --passes none` and still compiles."""
import re
import subprocess

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import INPUT_FILES, ROOT, requires_nvcc


#: A function defined at file scope that is not a kernel or a device function (`int main(`, `void f(`).
HOST_FUNCTION = re.compile(r"^(?!__global__|__device__|typedef|struct)[A-Za-z_][\w\s\*]*\b\w+\s*\([^;]*$", re.M)


def test_the_host_function_pattern_tells_kernels_from_host_code():
    kernels_only = [n for n in INPUT_FILES if not HOST_FUNCTION.search((ROOT / "inputs" / n).read_text())]
    assert {"mm.cu", "strsm.cu", "complex_mul.cu"}.isdisjoint(kernels_only) and "mv.cu" in kernels_only


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
    # a file of kernels alone is built device-only (nvcc's front end and ptxas: the host compile would see
    # nvcc's own launch stubs, nothing printed here); one with host functions is compiled whole
    mode = "-c" if HOST_FUNCTION.search(original) else "-cubin"
    build = subprocess.run(["nvcc", "-arch=sm_90", mode, str(out), "-o", str(tmp_path / "o.o"),
                            f"-I{ROOT / 'inputs'}"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
