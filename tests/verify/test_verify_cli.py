"""`gpgpu-opt verify`: every input verifies; hand-written kernels with planted bugs are caught (--against)."""
import textwrap

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import ROOT

pytest.importorskip("gpgpu_opt.emulator")

GOOD_MM = """
#pragma gpgpu_opt launch block(16, 16) grid((global_x + 15) / 16, (global_y + 15) / 16)
__global__ void mm(const float *A, const float *B, float *C, int n)
{
    __shared__ float tile_A[16][17];
    __shared__ float tile_B[16][17];
    int row = blockIdx.y * 16 + threadIdx.y;
    int col = blockIdx.x * 16 + threadIdx.x;
    float sum = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 16) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        tile_A[threadIdx.y][threadIdx.x] = (row < n && ka < n) ? A[row * n + ka] : 0.0f;
        tile_B[threadIdx.y][threadIdx.x] = (col < n && kb < n) ? B[kb * n + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; k++)
            sum += tile_A[threadIdx.y][k] * tile_B[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n)
        C[row * n + col] = sum;
}
"""

PLANTED = {
    "missing barrier": (GOOD_MM.replace("            sum += tile_A[threadIdx.y][k] * tile_B[k][threadIdx.x];\n"
                                        "        __syncthreads();",
                                        "            sum += tile_A[threadIdx.y][k] * tile_B[k][threadIdx.x];"),
                        "race"),
    "off-by-one staging index": (GOOD_MM.replace("A[row * n + ka]", "A[row * n + ka + 1]"), None),
    "dropped remainder": (GOOD_MM.replace("k0 < n;", "k0 + 16 <= n;"), "differ"),
    "out-of-bounds write": (GOOD_MM.replace("    if (row < n && col < n)\n        C[row * n + col] = sum;",
                                            "    C[row * n + col] = sum;"), "out-of-bounds"),
}


def verify(args, cwd=ROOT):
    return run_cli("verify", *args, cwd=cwd)


def test_hand_written_tiled_mm_passes(tmp_path):
    hand = tmp_path / "mm_tiled.cu"
    hand.write_text(GOOD_MM)
    proc = verify(["inputs/mm.cu", "--against", str(hand)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "n=37" in proc.stdout  # a size that does not divide the tile


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bug_is_caught(tmp_path, bug):
    source, expected = PLANTED[bug]
    hand = tmp_path / "mm_bug.cu"
    hand.write_text(source)
    proc = verify(["inputs/mm.cu", "--against", str(hand)])
    assert proc.returncode != 0, f"{bug} not caught:\n{proc.stdout}"
    assert "FAIL" in proc.stdout
    if expected:
        words = (expected,) if isinstance(expected, str) else expected
        assert any(w in proc.stdout.lower() for w in words), proc.stdout


def test_swapped_vector_components_are_caught(tmp_path):
    naive = tmp_path / "pairs.cu"
    naive.write_text(textwrap.dedent("""
        __global__ void pairs(const float *in, float *out, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = 2.0f * in[2 * i] + in[2 * i + 1];
        }
    """))
    hand = tmp_path / "pairs_opt.cu"
    hand.write_text(textwrap.dedent("""
        #pragma gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, 1)
        __global__ void pairs(const float *in, float *out, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { float2 v = ((const float2 *) in)[i]; out[i] = 2.0f * v.y + v.x; }
        }
    """))
    proc = verify([str(naive), "--against", str(hand)])
    assert proc.returncode != 0 and "differ" in proc.stdout
    hand.write_text(hand.read_text().replace("2.0f * v.y + v.x", "2.0f * v.x + v.y"))
    assert verify([str(naive), "--against", str(hand)]).returncode == 0


VERIFIABLE = ["mm.cu", "mv.cu", "transpose.cu", "conv.cu", "demosaic.cu", "reduction.cu", "strsm.cu"]


PASS_PREFIXES = ["normalize", "normalize,coalesce"]  # every prefix of the pipeline as passes land


@pytest.mark.parametrize("passes", PASS_PREFIXES)
@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("name", VERIFIABLE)
def test_every_input_verifies(name, target, passes):
    extra = ["--global", "1024"] if name == "reduction.cu" else []  # its thread space is not in the kernel
    proc = verify([f"inputs/{name}", "--target", target, "--passes", passes, *extra])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout


@pytest.mark.parametrize("passes", PASS_PREFIXES)
@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("name, width", [("tmv.cu", "WIDTH_A"), ("vv.cu", "WIDTH_C"), ("imregionmax.cu", "WIDTH_C")])
def test_dialect_inputs_verify_at_a_small_size(tmp_path, name, width, target, passes):
    """The dialect files fix their sizes with #define (4096): verify a copy at 48 (a multiple of 16)."""
    text = (ROOT / "inputs" / name).read_text()
    small = tmp_path / name
    text = text.replace(f"#define {width} 4096", f"#define {width} 48").replace("#define HEIGHT_A 4096",
                                                                               "#define HEIGHT_A 40")
    text = text.replace("#define HEIGHT_C 4096", "#define HEIGHT_C 48")
    small.write_text(text)
    space = "48" if name == "tmv.cu" else "48,48"
    proc = verify([str(small), "--target", target, "--global", space, "--passes", passes])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_says_how_to_give_the_thread_space(tmp_path):
    k = tmp_path / "k.cu"
    k.write_text("__global__ void k(float *a) { a[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }\n")
    proc = verify([str(k)])
    assert proc.returncode != 0 and "--global" in proc.stderr


@pytest.mark.parametrize("program, passes", [("tests/programs/2mm.cu", []),
                                             ("tests/programs/stream_triad.cu", ["--passes", "none"])])
def test_an_output_of_compile_verifies_against_its_input(tmp_path, program, passes):
    """Whole programs, their kernels staged with cp.async (2mm: the pipeline builtins the output calls), and an
    output left as written (no launch line: launched as the naive kernel). Both used to be refused: "no
    '#pragma gpgpu_opt launch ...' line", and cp.async was an undeclared name."""
    out = tmp_path / "out.cu"
    compiled = run_cli("compile", program, "-o", out, "--no-validate", *passes, cwd=ROOT)
    assert compiled.returncode == 0, compiled.stderr
    assert ("// gpgpu_opt launch block(" in out.read_text()) == (not passes)
    proc = verify([program, "--against", str(out), "-I", "tests/programs"])   # the output includes common/
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("PASS"), proc.stdout + proc.stderr
