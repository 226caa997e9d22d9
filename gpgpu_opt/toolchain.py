"""Finding nvcc (CUDA_HOME, PATH, or the nvidia-cuda-nvcc wheel) and cuBLAS, and building a run harness."""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class ToolchainError(Exception):
    """nvcc (or what a build needs) is missing; the message says where it was looked for."""


def find_nvcc() -> str:
    """The nvcc to use: $CUDA_HOME/bin/nvcc, else nvcc on the PATH, else the nvidia-cuda-nvcc wheel's."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
        return os.path.join(home, "bin", "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    wheel = _wheel_nvcc()
    if wheel:
        return wheel
    raise ToolchainError("nvcc not found: set CUDA_HOME to a CUDA toolkit, put nvcc on the PATH, or "
                         "`pip install nvidia-cuda-nvcc` (looked in "
                         f"{'$CUDA_HOME/bin, ' if home else ''}the PATH and the nvidia-cuda-nvcc wheel)")


def _wheel_nvcc() -> str | None:
    """nvidia-cuda-nvcc installs nvcc under site-packages/nvidia/cuda_nvcc/bin (cu13: nvidia/cu13/bin)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in glob.glob(os.path.join(root, "*", "bin", "nvcc")):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def toolkit_root(nvcc: str) -> Path:
    return Path(os.path.realpath(nvcc)).parent.parent


def cublas_flags(nvcc: str) -> list[str] | None:
    """Flags that link cuBLAS: nothing extra where the toolkit has it, -I/-L/rpath where a wheel does, None
    when there is no cuBLAS (the harness then builds with -DHARNESS_NO_REFERENCE)."""
    root = toolkit_root(nvcc)
    if glob.glob(str(root / "include" / "cublas_v2.h")) and (
            glob.glob(str(root / "lib64" / "libcublas.so*")) or glob.glob(str(root / "lib" / "libcublas.so*"))):
        return ["-lcublas"]
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        headers = glob.glob(os.path.join(base, "*", "include", "cublas_v2.h"))
        libs = sorted(glob.glob(os.path.join(base, "*", "lib", "libcublas.so*")))
        if headers and libs:
            lib_dir = os.path.dirname(libs[0])
            return [f"-I{os.path.dirname(headers[0])}", libs[0], "-Xlinker", f"-rpath={lib_dir}"]
    return None


@dataclass
class Build:
    source: str
    binary: str
    command: list[str]
    returncode: int
    log: str
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def build_harness(source: str, binary: str, arch: str, needs_cublas: bool, nvcc: str | None = None,
                  timeout: int = 600) -> Build:
    """`nvcc -O3 -arch=ARCH SOURCE -o BINARY` (cuBLAS linked when the harness has a cuBLAS reference and the
    machine has cuBLAS; without it the reference is compiled out, with a note)."""
    nvcc = nvcc or find_nvcc()
    extra, notes = [], []
    if needs_cublas:
        flags = cublas_flags(nvcc)
        if flags is None:
            extra = ["-DHARNESS_NO_REFERENCE"]
            notes.append("no cuBLAS next to nvcc: built without the cuBLAS reference (-DHARNESS_NO_REFERENCE)")
        else:
            extra = flags
    command = [nvcc, "-O3", f"-arch={arch}", source, "-o", binary, *extra]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Build(source, binary, command, 124, f"nvcc timed out after {timeout} s", notes)
    return Build(source, binary, command, proc.returncode, proc.stdout + proc.stderr, notes)
