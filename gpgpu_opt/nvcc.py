"""nvcc: resource usage of generated kernels (registers, shared memory, spills).

A cubin build is kept: in the process (the passes ask the same question again, and `verify` compiles what
`compile` did), and, where GPGPU_OPT_NVCC_CACHE names a directory, on disk for other processes (the test
suite shares one between its workers). The key is nvcc's identity, the architecture, the flags, the flags
nvcc takes from the environment and the text.

- A build without include directories reads the text and the installation alone (the source sits alone in a
  fresh directory, and `<...>` finds only the toolkit's and the system's headers, which nvcc's identity stands
  for): the key says everything.
- A build with `-IDIR` reads the user's files too: it is kept with a record of the files it read, by content,
  and of the paths that would shadow them (gpgpu_opt.nvcc_includes), and a kept build is used only while that
  record still holds; else it is built again and replaced.
- A build is never kept where the record could miss a file: flags other than `-IDIR`, flags from the
  environment (NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS), include paths from the environment (CPATH...), or a
  build nvcc_includes cannot describe exactly.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from gpgpu_opt import nvcc_includes
from gpgpu_opt.nvcc_includes import IncludeRecord
from gpgpu_opt.toolchain import ToolchainError, find_nvcc
from gpgpu_opt.targets import Target


def nvcc_available() -> bool:
    """nvcc through CUDA_HOME, the PATH or the nvidia-cuda-nvcc wheel (toolchain.find_nvcc)."""
    try:
        find_nvcc()
    except ToolchainError:
        return False
    return True


#: A directory where cubin builds are kept across processes (unset: none).
CACHE_ENV = "GPGPU_OPT_NVCC_CACHE"

#: Variables that add flags (nvcc's) or include directories (the host preprocessor's) the key cannot judge.
_UNKEPT_UNDER = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")


@dataclass(frozen=True)
class _Kept:
    """A build and, for one with include directories, the record it is valid under."""
    proc: subprocess.CompletedProcess
    includes: IncludeRecord | None

    def holds(self) -> bool:
        return self.includes is None or self.includes.still_holds()


_kept: dict[str, _Kept] = {}


def compile_cubin(source: str, arch: str, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    """`nvcc -arch=ARCH -cubin --resource-usage` of `source`, kept as the module docstring says."""
    extra = list(extra or [])
    include_dirs = nvcc_includes.include_directories(extra)
    if include_dirs is None or any(os.environ.get(name) for name in _UNKEPT_UNDER):
        return _build_cubin(source, arch, extra, None)[0]
    key = _cache_key(source, arch, extra, include_dirs)
    kept = _kept.get(key) or _from_disk(key)
    if kept is None or not kept.holds():
        proc, kept = _build_cubin(source, arch, extra, include_dirs)
        if kept is None:
            _kept.pop(key, None)
            return proc
        _to_disk(key, kept)
    _kept[key] = kept
    return kept.proc


def _cache_key(source: str, arch: str, extra: list[str], include_dirs: list[str]) -> str:
    """include_dirs are absolute: a relative -I names another directory from another working directory."""
    flags_from_environment = [os.environ.get(name, "") for name in _UNKEPT_UNDER]
    identity = json.dumps([_nvcc_identity(), arch, extra, include_dirs, flags_from_environment, source])
    return hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()


@functools.lru_cache(maxsize=1)
def _nvcc_identity() -> str:
    """Which nvcc builds: its path and the version it reports (a wrapper script's path says nothing)."""
    nvcc = find_nvcc()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    return f"{nvcc}\n{version}"


def _disk_path(key: str) -> str | None:
    directory = os.environ.get(CACHE_ENV)
    return os.path.join(directory, f"{key}.json") if directory else None


def _from_disk(key: str) -> _Kept | None:
    """The entry kept on disk; None where there is none or it cannot be read (it is then built again)."""
    path = _disk_path(key)
    try:
        with open(path) as fh:                          # type: ignore[arg-type]
            kept = json.load(fh)
        proc = subprocess.CompletedProcess(kept["args"], kept["returncode"], kept["stdout"], kept["stderr"])
        includes = kept["includes"]
        return _Kept(proc, None if includes is None else IncludeRecord.from_json(includes))
    except (TypeError, OSError, ValueError, KeyError):
        return None


def _to_disk(key: str, kept: _Kept) -> None:
    """Written whole under a temporary name, then renamed: a reader in another process sees all or nothing."""
    path = _disk_path(key)
    if path is not None and os.path.isdir(os.path.dirname(path)):
        proc = kept.proc
        record = {"args": list(proc.args), "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                  "includes": None if kept.includes is None else kept.includes.as_json()}
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial")
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)
        os.replace(partial, path)


def _build_cubin(source: str, arch: str, extra: list[str],
                 include_dirs: list[str] | None) -> tuple[subprocess.CompletedProcess, _Kept | None]:
    """The build, and what may be kept of it (None: nothing). include_dirs None: not to be kept; [] none read.
    The source is alone in its directory (nvcc_includes), the outputs beside that directory."""
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "source"))
        path = os.path.join(tmp, "source", "kernel.cu")
        with open(path, "w", errors="surrogateescape") as fh:
            fh.write(source)
        deps = os.path.join(tmp, "deps.d")
        listing = nvcc_includes.dependency_flags(deps) if include_dirs else []
        started = nvcc_includes.now()
        proc = subprocess.run([find_nvcc(), f"-arch={arch}", "-cubin", "-o", os.path.join(tmp, "k.cubin"),
                               "--resource-usage", path, *extra, *listing],
                              capture_output=True, text=True, timeout=300)
        if not include_dirs:
            return proc, None if include_dirs is None else _Kept(proc, None)
        record = nvcc_includes.record_build(path, deps, include_dirs, started)
        return proc, None if record is None else _Kept(proc, record)


def resource_usage(source: str, target: Target, include_dirs: list[str] | None = None) -> dict[str, dict] | None:
    """Per kernel: registers, shared bytes, stack and spill bytes, from `nvcc --resource-usage`.
    None when nvcc is not installed or the file does not compile on its own."""
    if not nvcc_available() or not compiles_for(target.nvcc_arch):
        return None
    proc = compile_cubin(source, target.nvcc_arch, [f"-I{d}" for d in include_dirs or []])
    if proc.returncode != 0:
        return None
    return parse_resource_usage(proc.stdout + proc.stderr)


@functools.lru_cache(maxsize=None)
def compiles_for(arch: str) -> bool:
    """Whether this nvcc builds for `arch` (`nvcc --list-gpu-code`): a build for another fails whatever the
    text, before it reads a file (so it leaves no record to keep it by: nvcc 13 and the paper's sm_50 targets).
    Where nvcc cannot say, the build is made."""
    proc = subprocess.run([find_nvcc(), "--list-gpu-code"], capture_output=True, text=True, timeout=60)
    codes = proc.stdout.split()
    return proc.returncode != 0 or not codes or arch in codes


def parse_resource_usage(text: str) -> dict[str, dict]:
    """ptxas's report: 'Compiling entry function', stack/spill line, 'Used N registers, ..., M bytes smem'."""
    usage: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = _demangle(m.group(1))
            usage[current] = {"registers": 0, "shared_bytes": 0, "stack_bytes": 0, "spill_store_bytes": 0,
                              "spill_load_bytes": 0}
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            usage[current].update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                                  spill_load_bytes=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            usage[current]["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            usage[current]["shared_bytes"] = int(s.group(1)) if s else 0
    return usage


def _demangle(name: str) -> str:
    m = re.match(r"_Z(\d+)(\w+)", name)
    if m:
        n = int(m.group(1))
        return m.group(2)[:n]
    return name


def program_resource_usage(result, target: Target, include_dirs: list[str]) -> dict[str, dict] | None:
    """resource_usage of a compiled program's main file, its user files as the compilation left them: the
    files are copied in their own tree, so that its quoted includes find the edited ones. Where builds are
    kept on disk, that tree is too, named by its content: the same program is then the same -I build in
    another process."""
    program = result.program
    main_dir = os.path.dirname(os.path.abspath(program.main_file))
    if not program.is_multi_file:
        return resource_usage(result.output, target, [main_dir, *include_dirs])
    cache = os.environ.get(CACHE_ENV)
    if cache and os.path.isdir(cache):
        return resource_usage(result.output, target, [_kept_mirror(cache, result), *include_dirs])
    with tempfile.TemporaryDirectory() as tmp:
        return resource_usage(result.output, target, [_mirror(tmp, result), *include_dirs])


def _mirror(root: str, result) -> str:
    """The program's files as compiled, in their own tree under root; the main file's directory there."""
    from gpgpu_opt.cli_output import mirrored

    program = result.program
    destinations = mirrored(root, [f.path for f in program.source_files()])
    for path, destination in destinations.items():
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        with open(destination, "w", errors="surrogateescape") as fh:
            fh.write(result.outputs[path])
    return os.path.dirname(destinations[program.main_file])


def _kept_mirror(cache: str, result) -> str:
    """_mirror under cache/mirrors/<sha256 of the tree>: written once, under a temporary name then renamed
    (a process that loses the race uses the winner's, the same text), then left SETTLE_SECONDS before its first
    build, whose record would otherwise not trust files written as it began (gpgpu_opt.nvcc_includes)."""
    from gpgpu_opt.cli_output import mirrored

    program = result.program
    relatives = mirrored("", [f.path for f in program.source_files()])
    tree = json.dumps(sorted((relative, result.outputs[path]) for path, relative in relatives.items()))
    root = os.path.join(cache, "mirrors", hashlib.sha256(tree.encode("utf-8", "surrogateescape")).hexdigest())
    if not os.path.isdir(root):
        os.makedirs(os.path.dirname(root), exist_ok=True)
        partial = tempfile.mkdtemp(dir=os.path.dirname(root), suffix=".partial")
        _mirror(partial, result)
        try:
            os.rename(partial, root)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
        time.sleep(nvcc_includes.SETTLE_SECONDS)
    return os.path.dirname(os.path.join(root, relatives[program.main_file]))
