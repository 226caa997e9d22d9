"""tests/nvcc_cache.py, the test session's stand-in for nvcc: the resource-usage call replayed from its cache
gives what nvcc gives (output, status, cubin), errors included; any other call is nvcc's own."""
import os
import subprocess
import sys

import pytest

from tests import nvcc_cache
from tests.conftest import requires_nvcc

KERNEL = "__global__ void k(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2; }\n"


def test_only_the_resource_usage_call_is_cached():
    call = ["-arch=sm_90", "-cubin", "-o", "/t/k.cubin", "--resource-usage", "/t/kernel.cu"]
    assert nvcc_cache.cacheable(call) == ("/t/kernel.cu", "/t/k.cubin")
    assert nvcc_cache.cacheable(call + ["-I/inc"]) is None            # headers the key would not see
    assert nvcc_cache.cacheable(["-arch=sm_90", "-o", "a.out", "/t/kernel.cu"]) is None
    assert nvcc_cache.cacheable(["--version"]) is None


def _run(tmp_path, name, text, cache):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "kernel.cu").write_text(text)
    args = ["-arch=sm_90", "-cubin", "-o", str(folder / "k.cubin"), "--resource-usage", str(folder / "kernel.cu")]
    env = {**os.environ, nvcc_cache.CACHE_DIR: str(cache), nvcc_cache.REAL_NVCC: os.environ.get(
        nvcc_cache.REAL_NVCC) or _real_nvcc()}
    proc = subprocess.run([sys.executable, nvcc_cache.__file__, *args], capture_output=True, text=True, env=env)
    cubin = (folder / "k.cubin").read_bytes() if (folder / "k.cubin").exists() else None
    return proc.returncode, proc.stdout, proc.stderr.replace(str(folder), "<dir>"), cubin


def _real_nvcc():
    import shutil
    return shutil.which("nvcc")


@requires_nvcc
@pytest.mark.parametrize("text", [KERNEL, KERNEL.replace("a[i] *= 2;", "a[i] *= ;")])
def test_a_replayed_call_gives_what_nvcc_gave(tmp_path, text):
    cache = tmp_path / "cache"
    cache.mkdir()
    first = _run(tmp_path, "first", text, cache)
    assert len(os.listdir(cache)) == 1                      # recorded
    second = _run(tmp_path, "second", text, cache)          # replayed, from another temporary folder
    assert second == first
    if text == KERNEL:
        assert first[0] == 0 and first[3] and "Used" in first[1] + first[2]
    else:
        assert first[0] != 0 and "<dir>/kernel.cu" in first[2]    # the error names this call's own file
    _run(tmp_path, "other", text + "// another source\n", cache)
    assert len(os.listdir(cache)) == 2                      # another source, another entry
