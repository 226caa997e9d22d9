"""nvcc builds are kept by content: the same kernel text is built once per process, and once per machine
where GPGPU_OPT_NVCC_CACHE names a directory; a build that reads include directories is kept with the files
it read and the paths that would shadow them, and built again when either changes."""
import dataclasses
import json

import pytest

from gpgpu_opt import nvcc, nvcc_includes
from gpgpu_opt.targets import get_target
from tests.conftest import requires_nvcc

KERNEL = "__global__ void scale(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; " \
         "if (i < n) a[i] *= 2.0f; }\n"


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """The real builds made, counted; an empty in-process memory and a disk cache of this test's own."""
    made = []
    real = nvcc._build_cubin

    def counted(source, arch, extra, include_dirs):
        made.append((arch, tuple(extra)))
        return real(source, arch, extra, include_dirs)

    monkeypatch.setattr(nvcc, "_build_cubin", counted)
    monkeypatch.setattr(nvcc, "_kept", {})
    monkeypatch.setenv(nvcc.CACHE_ENV, str(tmp_path))
    # the headers here are written just before they are built: trusted at once (the settling has its own test)
    monkeypatch.setattr(nvcc_includes, "SETTLE_SECONDS", 0.0)
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


INCLUDING = "#include \"scale.h\"\n__global__ void scale(float *a, int n) { int i = blockIdx.x * blockDim.x + " \
            "threadIdx.x; if (i < n) a[i] *= FACTOR; }\n"


def headers(root, **files):
    """Directories under root (their names the keywords) with a scale.h each defining FACTOR as given."""
    for name, factor in files.items():
        (root / name).mkdir(exist_ok=True)
        (root / name / "scale.h").write_text(f"#define FACTOR {factor}\n")
    return [str(root / name) for name in files]


def forget(monkeypatch):
    monkeypatch.setattr(nvcc, "_kept", {})                         # as a new process starts


@requires_nvcc
def test_a_build_with_include_directories_is_kept_while_its_headers_are_the_same(builds, monkeypatch, tmp_path):
    inc, = headers(tmp_path, inc="2.0f")
    first = nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])
    again = nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])
    forget(monkeypatch)
    from_disk = nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])
    assert first.returncode == 0 and len(builds) == 1
    assert (again.stdout, again.stderr) == (from_disk.stdout, from_disk.stderr) == (first.stdout, first.stderr)


@requires_nvcc
def test_a_header_edited_between_two_builds_is_built_again(builds, monkeypatch, tmp_path):
    inc, = headers(tmp_path, inc="2.0f")
    for _ in range(2):
        nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])
    headers(tmp_path, inc="3.0f")
    nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])
    forget(monkeypatch)
    nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])           # the entry on disk was replaced
    assert len(builds) == 2


@requires_nvcc
@pytest.mark.parametrize("spelling", ['"scale.h"', "<scale.h>"])
def test_a_header_added_that_shadows_the_one_read_is_built_again(builds, tmp_path, spelling):
    """-I first -I second: scale.h read from second, until first has one (found first on the path)."""
    source = INCLUDING.replace('"scale.h"', spelling)
    (tmp_path / "first").mkdir()
    second, = headers(tmp_path, second="2.0f")
    flags = [f"-I{tmp_path / 'first'}", f"-I{second}"]
    for _ in range(2):
        assert nvcc.compile_cubin(source, "sm_90", flags).returncode == 0
    assert len(builds) == 1
    headers(tmp_path, first="garbage that does not compile")
    assert nvcc.compile_cubin(source, "sm_90", flags).returncode != 0
    assert len(builds) == 2


@requires_nvcc
def test_a_header_that_a_system_header_would_find_first_is_a_shadow_too(builds, tmp_path):
    """<stdint.h> reads headers of its own through the include path: one added in an -I directory is read."""
    source = "#include <stdint.h>\n" + KERNEL
    inc = tmp_path / "inc"
    inc.mkdir()
    for _ in range(2):
        assert nvcc.compile_cubin(source, "sm_90", [f"-I{inc}"]).returncode == 0
    assert len(builds) == 1
    (inc / "bits").mkdir()
    (inc / "bits" / "libc-header-start.h").write_text("#error shadowed\n")
    assert nvcc.compile_cubin(source, "sm_90", [f"-I{inc}"]).returncode != 0
    assert len(builds) == 2


@requires_nvcc
def test_a_computed_include_is_not_kept(builds, tmp_path):
    inc, = headers(tmp_path, inc="2.0f")
    source = "#define HEADER \"scale.h\"\n" + INCLUDING.replace('"scale.h"', "HEADER")
    for _ in range(2):
        assert nvcc.compile_cubin(source, "sm_90", [f"-I{inc}"]).returncode == 0
    assert len(builds) == 2


@requires_nvcc
def test_a_header_changed_as_the_build_began_is_not_kept(builds, monkeypatch, tmp_path):
    """Its hash is taken after the build, which may have read it before the change."""
    monkeypatch.setattr(nvcc_includes, "SETTLE_SECONDS", 3600.0)
    inc, = headers(tmp_path, inc="2.0f")
    for _ in range(2):
        nvcc.compile_cubin(INCLUDING, "sm_90", [f"-I{inc}"])
    assert len(builds) == 2


@requires_nvcc
@pytest.mark.parametrize("flags, variable", [(["-DFACTOR=2.0f"], None), ([], "NVCC_APPEND_FLAGS"),
                                             ([], "CPATH")])
def test_flags_the_record_cannot_follow_are_not_kept(builds, monkeypatch, flags, variable):
    """Only -IDIR flags are kept (another flag may read files: -include, -isystem...); the environment can add
    flags and include directories that the record does not see."""
    if variable:
        monkeypatch.setenv(variable, "-DUNUSED=1" if variable.startswith("NVCC") else "/nonexistent")
    for _ in range(2):
        nvcc.compile_cubin(KERNEL, "sm_90", flags)
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


@requires_nvcc
def test_a_program_of_several_files_is_built_once_across_processes(builds, monkeypatch, tmp_path):
    """Its files are mirrored for the build in a tree named by their content (not a fresh temporary one, whose
    name in -I would make every process's key another)."""
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.frontend import load_program
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with

    program_dir = tmp_path / "program"
    program_dir.mkdir()
    (program_dir / "scale.cuh").write_text(KERNEL)
    (program_dir / "main.cu").write_text('#include "scale.cuh"\n')
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(program_dir / "main.cu"), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list("none"), diagnostics)
    assert program.is_multi_file
    usages = []
    for _ in range(2):
        forget(monkeypatch)
        usages.append(nvcc.program_resource_usage(result, get_target("sm_90"), []))
    assert usages[0] == usages[1] and usages[0]["scale"]["registers"] > 0
    assert len(builds) == 1


@requires_nvcc
def test_an_architecture_this_nvcc_does_not_build_for_is_not_built(builds):
    """It would fail whatever the text, before reading a file: no usage, and no build to keep."""
    unknown = dataclasses.replace(get_target("sm_90"), nvcc_arch="sm_10")
    assert nvcc.resource_usage(KERNEL, unknown, ["/nonexistent"]) is None
    assert nvcc.resource_usage(KERNEL, get_target("sm_90"), ["/nonexistent"])["scale"]["registers"] > 0
    assert len(builds) == 1
