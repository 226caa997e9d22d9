"""nvcc builds are kept by content: the same kernel text is built once per process, and once per machine
where GPGPU_OPT_NVCC_CACHE names a directory; a build that reads include directories is never kept."""
import json

import pytest

from gpgpu_opt import nvcc
from gpgpu_opt.targets import get_target
from tests.conftest import requires_nvcc

KERNEL = "__global__ void scale(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; " \
         "if (i < n) a[i] *= 2.0f; }\n"


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """The real builds made, counted; an empty in-process memory and a disk cache of this test's own."""
    made = []
    real = nvcc._build_cubin

    def counted(source, arch, extra):
        made.append((arch, tuple(extra)))
        return real(source, arch, extra)

    monkeypatch.setattr(nvcc, "_build_cubin", counted)
    monkeypatch.setattr(nvcc, "_kept", {})
    monkeypatch.setenv(nvcc.CACHE_ENV, str(tmp_path))
    return made


@requires_nvcc
def test_the_same_text_is_built_once_and_its_usage_is_the_built_one(builds):
    target = get_target("sm_90")
    first = nvcc.resource_usage(KERNEL, target)
    again = nvcc.resource_usage(KERNEL, target)
    assert first == again and first["scale"]["registers"] > 0
    assert len(builds) == 1


@requires_nvcc
def test_another_text_or_architecture_is_built_again(builds):
    nvcc.resource_usage(KERNEL, get_target("sm_90"))
    nvcc.resource_usage(KERNEL.replace("2.0f", "3.0f"), get_target("sm_90"))
    nvcc.resource_usage(KERNEL, get_target("sm_80"))
    assert len(builds) == 3


@requires_nvcc
def test_a_build_with_include_directories_is_never_kept(builds, tmp_path):
    (tmp_path / "inc").mkdir()
    for _ in range(2):
        nvcc.resource_usage(KERNEL, get_target("sm_90"), [str(tmp_path / "inc")])
    assert len(builds) == 2


@requires_nvcc
def test_another_process_reads_the_build_from_disk(builds, monkeypatch, tmp_path):
    built = nvcc.compile_cubin(KERNEL, "sm_90")
    assert len(list(tmp_path.glob("*.json"))) == 1
    monkeypatch.setattr(nvcc, "_kept", {})                         # as a new process starts
    read = nvcc.compile_cubin(KERNEL, "sm_90")
    assert len(builds) == 1
    assert (read.returncode, read.stdout, read.stderr) == (built.returncode, built.stdout, built.stderr)


@requires_nvcc
def test_an_unreadable_cache_entry_is_built_again(builds, monkeypatch, tmp_path):
    nvcc.compile_cubin(KERNEL, "sm_90")
    entry, = tmp_path.glob("*.json")
    entry.write_text("{ not json")
    monkeypatch.setattr(nvcc, "_kept", {})
    assert nvcc.compile_cubin(KERNEL, "sm_90").returncode == 0
    assert len(builds) == 2 and json.loads(entry.read_text())["returncode"] == 0


@requires_nvcc
def test_without_the_variable_nothing_is_written(builds, monkeypatch, tmp_path):
    monkeypatch.delenv(nvcc.CACHE_ENV)
    nvcc.compile_cubin(KERNEL, "sm_90")
    assert not list(tmp_path.iterdir())
