"""nvcc: resource usage of generated kernels (registers, shared memory, spills).

A cubin build whose source names no include directory is a function of nvcc, the architecture, the flags and
the text alone, so its result is kept: in the process (the passes ask the same question again, and `verify`
compiles what `compile` did), and, where GPGPU_OPT_NVCC_CACHE names a directory, on disk for other processes
(the test suite shares one between its workers). A build with -I reads files the key does not see: never kept.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile

from gpgpu_opt.toolchain import ToolchainError, find_nvcc
from gpgpu_opt.targets import Target


def nvcc_available() -> bool:
    """nvcc through CUDA_HOME, the PATH or the nvidia-cuda-nvcc wheel (toolchain.find_nvcc)."""
    try:
        find_nvcc()
    except ToolchainError:
        return False
    return True


#: A directory where cubin builds without include directories are kept across processes (unset: none).
CACHE_ENV = "GPGPU_OPT_NVCC_CACHE"

_kept: dict[str, subprocess.CompletedProcess] = {}


def compile_cubin(source: str, arch: str, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    """`nvcc -arch=ARCH -cubin --resource-usage` of `source`; kept (module docstring) when `extra` names no
    include directory."""
    extra = list(extra or [])
    if any(flag.startswith("-I") for flag in extra):
        return _build_cubin(source, arch, extra)
    key = _cache_key(source, arch, extra)
    if key not in _kept:
        _kept[key] = _from_disk(key) or _to_disk(key, _build_cubin(source, arch, extra))
    return _kept[key]


def _cache_key(source: str, arch: str, extra: list[str]) -> str:
    flags_from_environment = [os.environ.get(name, "") for name in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")]
    identity = json.dumps([_nvcc_identity(), arch, extra, flags_from_environment, source])
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


def _from_disk(key: str) -> subprocess.CompletedProcess | None:
    path = _disk_path(key)
    try:
        with open(path) as fh:                          # type: ignore[arg-type]
            kept = json.load(fh)
    except (TypeError, OSError, ValueError):
        return None
    return subprocess.CompletedProcess(kept["args"], kept["returncode"], kept["stdout"], kept["stderr"])


def _to_disk(key: str, proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """Written whole under a temporary name, then renamed: a reader in another process sees all or nothing."""
    path = _disk_path(key)
    if path is not None and os.path.isdir(os.path.dirname(path)):
        record = {"args": list(proc.args), "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".partial")
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)
        os.replace(partial, path)
    return proc


def _build_cubin(source: str, arch: str, extra: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w", errors="surrogateescape") as fh:
            fh.write(source)
        return subprocess.run([find_nvcc(), f"-arch={arch}", "-cubin", "-o", os.path.join(tmp, "k.cubin"),
                               "--resource-usage", path, *extra],
                              capture_output=True, text=True, timeout=300)


def resource_usage(source: str, target: Target, include_dirs: list[str] | None = None) -> dict[str, dict] | None:
    """Per kernel: registers, shared bytes, stack and spill bytes, from `nvcc --resource-usage`.
    None when nvcc is not installed or the file does not compile on its own."""
    if not nvcc_available():
        return None
    proc = compile_cubin(source, target.nvcc_arch, [f"-I{d}" for d in include_dirs or []])
    if proc.returncode != 0:
        return None
    return parse_resource_usage(proc.stdout + proc.stderr)


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
    files are copied in their own tree, so that its quoted includes find the edited ones."""
    from gpgpu_opt.cli_output import mirrored

    program = result.program
    main_dir = os.path.dirname(os.path.abspath(program.main_file))
    if not program.is_multi_file:
        return resource_usage(result.output, target, [main_dir, *include_dirs])
    with tempfile.TemporaryDirectory() as tmp:
        destinations = mirrored(tmp, [f.path for f in program.source_files()])
        for path, destination in destinations.items():
            os.makedirs(os.path.dirname(destination), exist_ok=True)
            with open(destination, "w", errors="surrogateescape") as fh:
                fh.write(result.outputs[path])
        main_dir = os.path.dirname(destinations[program.main_file])
        return resource_usage(result.output, target, [main_dir, *include_dirs])
