"""The project's benchmark: each entry a kernel of an input (or of a whole program of the tests) at a size that
fills the GPU, its work in flops and the library reference it is timed against.

Other issues add entries with `register(Benchmark(...))` (or a line in BENCHMARKS below); `gpgpu-opt bench`
runs them all, or those named, or those of a suite ('project': the paper's inputs and programs of the tests;
'generalization': generalization.py's kernels written fresh).
"""
from __future__ import annotations

import re
from importlib import resources
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.gpu import generalization
from gpgpu_opt.harness import generate_harness
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import CompileOptions, compile_program
from gpgpu_opt.targets import get_target

ROOT = Path(__file__).resolve().parents[2]


def _source_dirs() -> dict[str, Path]:
    """Where the benchmarked sources are: inside an installed package (pyproject.toml maps inputs/,
    tests/programs/ and bench/generalization/ there), else the checkout's own directories."""
    packaged = Path(str(resources.files("gpgpu_opt")))
    if (packaged / "bench_inputs").is_dir():
        return {"inputs": packaged / "bench_inputs", "tests/programs": packaged / "bench_programs",
                generalization.FOLDER: packaged / "bench_generalization"}
    return {"inputs": ROOT / "inputs", "tests/programs": ROOT / "tests" / "programs",
            generalization.FOLDER: ROOT / generalization.FOLDER}


@dataclass(frozen=True)
class Benchmark:
    name: str
    #: An input's file name (inputs/NAME), or a path from the repository root (tests/programs/gemm.cu).
    file: str
    kernel: str
    #: Scalar parameters of the kernel.
    sizes: dict = field(default_factory=dict)
    #: The naive launch's thread space (x, y).
    space: tuple[int, int] = (1, 1)
    #: Floating-point operations of one launch (0: a copy-like kernel, judged by bandwidth).
    flops: float = 0.0
    #: The harness's reference (harness.REFERENCE_ALIASES: 'sgemm', 'copy', 'copy_bytes', 'cub_sum'...) or None.
    reference: str | None = None
    #: `#define NAME value` lines of the file given other values (the file defines them, so -D cannot).
    defines: dict = field(default_factory=dict)
    note: str = ""
    #: The set it belongs to, a name `bench` selects it by.
    suite: str = "project"

    @property
    def path(self) -> Path:
        folder, _, name = self.file.rpartition("/")
        return _source_dirs()[folder or "inputs"] / name


N = 4096
BENCHMARKS: dict[str, Benchmark] = {}


def register(bench: Benchmark) -> Benchmark:
    if bench.name in BENCHMARKS:
        raise ValueError(f"benchmark '{bench.name}' is registered already")
    BENCHMARKS[bench.name] = bench
    return bench


for _bench in [
    Benchmark("mm", "mm.cu", "mm", {"n": N}, (N, N), 2.0 * N ** 3, "sgemm"),
    # The benchmark-suite gemm (C = alpha A B + beta C in place, plain pointers; PolyBench), at mm's size.
    Benchmark("gemm", "tests/programs/gemm.cu", "gemm_kernel", {}, (N, N), 2.0 * N ** 3, None,
              {"NI": N, "NJ": N, "NK": N}),
    Benchmark("mv", "mv.cu", "mv", {"rows": 16384, "cols": 16384}, (16384, 1), 2.0 * 16384 ** 2, "sgemv_t"),
    Benchmark("tmv", "tmv.cu", "tmv", {}, (16384, 1), 2.0 * 16384 ** 2, "sgemv_n",
              {"WIDTH_A": 16384, "HEIGHT_A": 16384}),
    Benchmark("vv", "vv.cu", "vv", {}, (N, N), 2.0 * N * N, "sger", {"WIDTH_C": N, "HEIGHT_C": N}),
    Benchmark("transpose", "transpose.cu", "transpose", {"rows": 8192, "cols": 8192}, (8192, 8192), 0.0, "copy"),
    # The paper's form as a user launches it: 1024 blocks of 256 threads, each thread a segment of 2^26 / 2^18.
    Benchmark("reduction", "reduction.cu", "reduction", {"n": 1 << 26, "segSize": 256}, (1 << 18, 1),
              float(1 << 26), "cub_sum"),
    # The atomicAdd form, a whole program launching (n + 255) / 256 blocks of 256.
    Benchmark("sum_atomic", "tests/programs/sum_atomic.cu", "sum_kernel", {"n": 1 << 26}, (1 << 26, 1),
              float(1 << 26), "cub_sum"),
    Benchmark("conv", "conv.cu", "conv", {"width": N, "height": N}, (N, N), 2.0 * 16 * 16 * N * N, None,
              note="16x16 filter; no library reference (FMA peak is the ceiling)"),
    Benchmark("demosaic", "demosaic.cu", "demosaic", {"width": 8192, "height": 8192}, (8192, 8192), 0.0, None),
    Benchmark("imregionmax", "imregionmax.cu", "imregionmax", {}, (8192, 8192), 0.0, None,
              {"WIDTH_C": 8192, "HEIGHT_C": 8192}),
    # Stencils as benchmark suites write them: judged against a D2D copy of the same array.
    Benchmark("jacobi2d", "tests/programs/jacobi2d.cu", "runJacobiCUDA_kernel1", {"n": 8192}, (8192, 8192), 0.0,
              "copy", note="PolyBench 5-point sweep"),
    Benchmark("blur3x3", "tests/programs/blur3x3.cu", "blur3x3", {"w": 8192, "h": 8192}, (8192, 8192), 0.0, "copy"),
    # Interleaved complex numbers (float2 pairs), 2^26 of them.
    Benchmark("complex_mul", "complex_mul.cu", "complex_mul", {"n": 1 << 26}, (1 << 26, 1), 6.0 * (1 << 26), "copy"),
    # One thread per column solves down the rows (about n^2 flops per column). The harness's random L is not
    # diagonally dominant, so X grows like 2^n: a short triangle (n = 32) keeps it finite, many columns fill the GPU.
    Benchmark("strsm", "strsm.cu", "strsm", {"n": 32, "m": 1 << 20}, (1 << 20, 1), 32.0 * 32 * (1 << 20), None),
]:
    register(_bench)
for _entry in generalization.ENTRIES:
    register(Benchmark(**{**_entry, "file": f"{generalization.FOLDER}/{_entry['file']}"}, suite=generalization.SUITE))


def with_defines(text: str, overrides: dict) -> str:
    """The file's text with its `#define NAME value` lines given new values."""
    for name, value in overrides.items():
        text, count = re.subn(rf"^(\s*#\s*define\s+{name}\s+)\S+", rf"\g<1>{value}", text, flags=re.MULTILINE)
        if count != 1:
            raise CompileError(f"expected one '#define {name}' line, found {count}")
    return text


def load(bench: Benchmark):
    path = bench.path
    if not bench.defines:
        program = load_program(str(path), include_dirs=[str(path.parent)])
        program.path = _relative(path)
        return program
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(with_defines(path.read_text(), bench.defines))
        program = load_program(str(copy), include_dirs=[str(path.parent)])
    program.path = f"{_relative(path)} with " + ", ".join(f"{k}={v}" for k, v in bench.defines.items())
    return program


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def lookup(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise CompileError(f"unknown benchmark '{name}' (known: {', '.join(BENCHMARKS)})") from None


def generate(name: str, target: str = "sm_90", passes: str | None = None, runs: int = 30) -> tuple[str, list[str]]:
    """The harness text of a benchmark, and notes: the passes run and the compiler's notes for its kernel."""
    bench = lookup(name)
    program = load(bench)
    diagnostics = Diagnostics(quiet=True)
    result = compile_program(program, CompileOptions.of(get_target(target), parse_pass_list(passes)), diagnostics)
    text = generate_harness(program, result, bench.kernel, bench.sizes, bench.space, flops=bench.flops,
                            reference=bench.reference, runs=runs)
    kr = next(k for k in result.kernels if k.naive.name == bench.kernel)
    notes = [str(n) for n in diagnostics.notes if n.kernel in (None, bench.kernel)]
    return text, [f"passes run: {', '.join(kr.passes_run) or 'none'}; rewritten: {kr.rewritten}"] + notes
