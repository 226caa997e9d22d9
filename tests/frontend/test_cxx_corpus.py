"""Our own C++ corpus (tests/programs/cxx): small complete programs written in the styles of Rodinia and NVIDIA's
cuda-samples (templates launched as k<float, 256><<<...>>>, kernels in an included header, grid-stride loops, a
3-D stencil with edge clamps, bool / M_PI / FLT_MAX, __constant__ coefficients, structs of arrays and arrays of
structs, arrays of arrays, __half, an unsupported construct beside a good kernel, static_cast / auto / nullptr). Each program
checks its own result and prints a checksum, so it can also run on a GPU (bench/corpus_gpu.py).

What is asserted: nvcc accepts every program; `gpgpu-opt compile -o OUTDIR/` (strict) never ends in a traceback
or an internal error, and its output tree builds; and each kernel ends up as OUTCOMES says, transformed or
left as written with the note that says why. GAPS marks the kernels of the corpus's naive style that the
merged compiler does not transform yet: their entry asserts what happens now (so the day one is fixed, the
test turns red and the entry moves to "transformed")."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import requires_nvcc

ROOT = Path(__file__).resolve().parents[2]
CXX = ROOT / "tests" / "programs" / "cxx"
sys.path.insert(0, str(ROOT / "bench"))

from corpus_kit.runner import kernel_transformed  # noqa: E402
from corpus_kit.sources import program_kernels  # noqa: E402

#: The main file of each program (kernels_header's kernels live in kernels.cuh).
PROGRAMS = ["template_affine.cu", "kernels_header/main.cu", "saxpy_gridstride.cu", "stencil3d.cu",
            "bool_consts.cu", "constant_coeffs.cu", "particles.cu", "half_scale.cu", "mixed_good_bad.cu",
            "cxx_casts.cu", "ref_helpers.cu", "fixed_rows.cu"]

#: What the merged compiler makes of each kernel: "transformed" (a pass beyond restrict is kept,
#: corpus_kit.runner.kernel_transformed) or a regular expression that one of the notes naming the kernel's file
#: matches (the kernel is left as written, or only requalified, and the note says why).
OUTCOMES = {
    # widened where the launch fills the GPU: each launch chooses, the naive instances from a copy of the template
    "template_affine.cu": {"affine<float, 256>": "transformed", "affine<double, 128>": "transformed"},
    "kernels_header/main.cu": {"matvec": "transformed",
                               "vec_add": "transformed"},   # launched from main.cu, which chooses by size
    "saxpy_gridstride.cu": {"saxpy": "transformed"},          # grid-stride loop canonicalized, launch re-sized
    "stencil3d.cu": {"stencil7": "transformed"},            # 3-D blocks: each thread marches 4 z (merge's z_march)
    "bool_consts.cu": {"wave": "transformed",        # its bool flag an int lane (vectorize's bool_lanes), widened
                       "row_min": "transformed"},
    "constant_coeffs.cu": {"filter1d": r"coalesce: in\[j\]: not staged: .*halo"},
    "particles.cu": {"drift_aos": "transformed",   # each 24-byte Particle moved as 3 float2 (vectorize's whole_structs)
                     "drift_soa": "transformed"},   # its struct's fields bound to locals, widened
    "half_scale.cu": {"haxpy": "transformed", "saxpy_ref": "transformed"},   # widened by __half2 (and float2)
    "mixed_good_bad.cu": {"lane_ids": r"'lane_ids' uses C\+\+ \(inline asm", "vadd": "transformed"},
    "cxx_casts.cu": {"scale_rows": "transformed"},     # checked with the bias given and null
    "fixed_rows.cu": {"row_sums": "transformed",          # float a[][COLS] read flat: a warp per row
                      "scale_rows": "transformed"},       # widened where the launch fills the GPU (dispatched)
    "ref_helpers.cu": {"energy_fluxes": "transformed",            # float& / float3& helpers inlined, widened
                       "step_factor": "transformed"},   # widened where the launch fills the GPU (dispatched)
}

#: Kernels of the naive style that the compiler leaves as written (OUTCOMES asserts how):
#: the gaps left, with what is missing.
GAPS: dict[tuple[str, str], str] = {}   # none left: each kernel of OUTCOMES is transformed or says why not


def report_name(kernel: str) -> str:
    """The name the report gives a kernel of OUTCOMES: an instance affine<float, 256> is affine__float_256."""
    if "<" not in kernel:
        return kernel
    name, args = kernel.rstrip(">").split("<", 1)
    return name + "__" + "_".join(a.strip() for a in args.split(","))


class CompiledPrograms(dict):
    """`compile MAIN -o OUTDIR/ --report R` of each program, once, on first use: (process, the main file's copy
    in the output tree that mirrors the program's files, the report's path) by program. Both tests that look
    at a program's compilation share it (the file is one unit of work: one worker runs all its tests)."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def __missing__(self, program: str):
        source, where = CXX / program, self.root / program.replace("/", "_")
        out_dir, report = where / "out", where / "report.json"
        where.mkdir()
        proc = run_cli("compile", source, "-o", str(out_dir) + os.sep, "--report", report, "--no-resource-usage",
                       cwd=source.parent, env={"GPGPU_OPT_STRICT": "1"})
        self[program] = (proc, out_dir / source.name, report)
        return self[program]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return CompiledPrograms(tmp_path_factory.mktemp("cxx"))


def _nvcc(source: Path, include_dir: Path, *mode: str) -> subprocess.CompletedProcess:
    """Build the whole program (linked: a kernel whose definition no longer matches its prototype fails), or
    with `mode` (`-cubin`: nvcc's front end over the whole file, host code included, and the device build)."""
    return subprocess.run(["nvcc", "-arch=sm_90", str(source), *mode, "-o", os.devnull, "-I", str(include_dir)],
                          capture_output=True, text=True)


def test_every_program_is_listed_with_its_kernels():
    """The table covers every program of the corpus, and names exactly the kernels each defines."""
    mains = {str(p.relative_to(CXX)) for p in CXX.rglob("*.cu")}
    assert set(PROGRAMS) == mains == set(OUTCOMES)
    for program in PROGRAMS:
        defined = {k.name for k in program_kernels(str(CXX / program), [])}
        expected = {name.split("<")[0] for name in OUTCOMES[program]}
        assert defined == expected, program


@requires_nvcc
@pytest.mark.parametrize("program", PROGRAMS)
def test_program_builds_with_nvcc(program):
    """nvcc accepts the input: its front end checks the whole file, host code too (the output's build below
    adds the host compiler and the link)."""
    proc = _nvcc(CXX / program, (CXX / program).parent, "-cubin")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("program", PROGRAMS)
def test_compile_gives_no_traceback_and_each_kernel_its_outcome(program, compiled):
    proc, out, report = compiled[program]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr and proc.returncode != 3, proc.stderr
    assert proc.returncode == 0 and out.exists(), proc.stderr
    rep = json.loads(report.read_text())
    kernels = {k["name"]: k for k in rep["kernels"]}
    for kernel, expected in OUTCOMES[program].items():
        name = report_name(kernel)
        transformed = name in kernels and kernel_transformed(kernels[name])
        if expected == "transformed":
            assert transformed, (kernel, kernels.get(name), rep["notes"])
            continue
        assert not transformed, f"{kernel} is transformed now: mark it so in OUTCOMES and drop it from GAPS"
        if expected == "restrict only":         # read, requalified, no other pass and no note naming it
            applied = {d["pass"] for d in kernels[name]["decisions"] if d["action"] == "applied"}
            assert applied == {"restrict"}, kernels[name]["decisions"]
            continue
        assert any(re.search(expected, note) for note in rep["notes"]), (kernel, rep["notes"])


def test_every_gap_is_a_kernel_not_transformed():
    """GAPS lists kernels of OUTCOMES, each one not transformed there (a gap closed leaves this table)."""
    for program, kernel in GAPS:
        assert OUTCOMES[program][kernel] != "transformed", (program, kernel)


@requires_nvcc
@pytest.mark.parametrize("program", PROGRAMS)
def test_output_builds_with_nvcc(program, compiled):
    """The output tree compile writes builds and links as its input does (its own copies of the headers)."""
    proc, out, _ = compiled[program]
    assert proc.returncode == 0, proc.stderr
    built = _nvcc(out, out.parent)
    assert built.returncode == 0, built.stderr
