"""nvcc: resource usage of generated kernels (registers, shared memory, spills)."""
from __future__ import annotations

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


def compile_cubin(source: str, arch: str, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w", errors="surrogateescape") as fh:
            fh.write(source)
        return subprocess.run([find_nvcc(), f"-arch={arch}", "-cubin", "-o", os.path.join(tmp, "k.cubin"),
                               "--resource-usage", path, *(extra or [])],
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
