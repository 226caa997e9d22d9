"""`compile`: golden outputs for every input x {g80, sm_90}, whole programs that still build, launch sites
that carry the new configuration, and unseen mv/tmv/transpose shapes that come out coalesced."""
import json
import re
import subprocess
import textwrap

import pytest

from tests.cli_in_process import run_cli
from tests.conftest import GOLDEN, GOLDEN_TARGETS, INPUT_FILES, ROOT, requires_nvcc
from tests.passes.test_block_merge import WEIGHTS



def unwrapped(text: str) -> str:
    """The text with its whitespace runs as one space: the output's long lines are wrapped (line_wrap.py), and
    the shape a check looks for may span lines."""
    return " ".join(text.split())

def compile_file(path, out, *args, cwd=ROOT):
    return run_cli("compile", path, "-o", out, *args, cwd=cwd)


PTXAS_SAID = re.compile(r"ptxas at \d+ blocks per SM: [^;]*|nvcc not found, so the model's register count stands")


@pytest.mark.parametrize("target", GOLDEN_TARGETS)
@pytest.mark.parametrize("name", INPUT_FILES)
def test_golden_compile(name, target, tmp_path, check_golden):
    out, report = tmp_path / name, tmp_path / "report.json"
    # nvcc's registers are not frozen here (tests/cli/test_report_resources.py checks they are reported)
    proc = compile_file(f"inputs/{name}", out, "--target", target, "--report", str(report), "--no-resource-usage")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    for kernel in data["kernels"]:
        for decision in kernel.get("decisions", []):   # nor are ptxas's, where a pass asks it
            decision["reason"] = PTXAS_SAID.sub("<ptxas's registers and spills>", decision["reason"])
    data.pop("notes", None)
    check_golden(GOLDEN / target / name, out.read_text())
    check_golden(GOLDEN / target / name.replace(".cu", ".report.json"), json.dumps(data, indent=2) + "\n")


@requires_nvcc
@pytest.mark.parametrize("target", GOLDEN_TARGETS)
def test_every_golden_output_compiles_with_nvcc(target, tmp_path):
    """One nvcc run per golden output of the target, device-only (-cubin: nvcc's front end checks the whole
    file, the launch helpers' host code included, and ptxas builds every kernel). The helpers are the launch
    helper template's, which the whole programs below and tests/programs/ build and link with the host compiler."""
    failures = []
    for name in INPUT_FILES:
        build = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", str(GOLDEN / target / name), "-o",
                                str(tmp_path / "o.cubin"), f"-I{ROOT / 'inputs'}"], capture_output=True, text=True)
        if build.returncode != 0:
            failures.append(f"{name}: {build.stderr}")
    assert not failures, "\n".join(failures)


@requires_nvcc
@pytest.mark.parametrize("name", ["mm.cu", "vv.cu", "conv.cu"])
def test_an_output_builds_silently_with_every_warning_an_error(name, tmp_path):
    """Host and device code, under the host compiler's -Wall -Wextra and nvcc's own warnings, each an error:
    the launch line is a comment (the `#pragma` failed -Wunknown-pragmas) and the helpers of a kernel the file
    does not launch are marked unused (nvcc's warning #177-D). mm launches its kernels; vv's helpers check the
    launch; conv's are unused."""
    build = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(GOLDEN / "sm_90" / name), "-o", str(tmp_path / "o.o"),
                            f"-I{ROOT / 'inputs'}", "-Xcompiler", "-Wall,-Wextra,-Werror", "-Werror", "all-warnings"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr


def test_g80_mm_has_the_shape_of_the_papers_figures_3a_5_and_7():
    """Fig. 3a's staged row of A, then 16 blocks merged in x (§3.5, Fig. 5): the merged block loads A's rows
    once; then 16 rows per thread (Fig. 7): B[k * n + col] read once into a register for them."""
    text = (GOLDEN / "g80" / "mm.cu").read_text()
    assert "__shared__ float tile_A[16][256];" in text                # A's rows, 16 steps of 16
    assert "k0 += 256" in text                                         # the k loop unrolled by 256
    assert text.count("tile_A[r][threadIdx.x] = ") == 1 and "A[(row + r) * n + k0 + threadIdx.x]" in text
    assert text.count("= B[k * n + col];") == 1                        # B is already coalesced, read once
    assert "float sum[16];" in text and "sum[r] += A_val[r] * B_val;" in text
    assert "// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, (global_y + 15) / 16)" in text
    assert "// merge: 16 blocks of 16x1 threads merged in x: they share tile_A" in text
    assert "// merge: each thread computes 16 outputs in y" in text
    assert text.count("__syncthreads();") == 2


def test_g80_mv_has_the_shape_of_the_papers_figure_3b_merged_in_x():
    text = (GOLDEN / "g80" / "mv.cu").read_text()
    assert "__shared__ float tile_A[32][17];" in text                 # padded tile, rows of 2 blocks
    assert re.search(r"for \(int rr = 0; rr < 32; rr \+= 2\)", text)   # 16 passes of 2 rows
    assert "tile_A[threadIdx.x][c - c0]" in text                       # read back transposed
    assert "__shared__ float tile_x[16];" in text                      # x's segment, loaded once
    assert "// gpgpu_opt launch block(32, 1)" in text
    assert text.count("__syncthreads();") == 2
    # prefetch (paper Fig. 8): the next step's loads in registers, none past the last step (of the loop
    # partition rotated: the next step is the rotated one)
    assert "float A_next[16];" in text and "float x_next;" in text and "if (c0_step_next < c0_steps) {" in text


def test_sm90_mm_golden_double_buffers_its_register_tile():
    text = (GOLDEN / "sm_90" / "mm.cu").read_text()
    assert "#include <cuda_pipeline.h>" in text
    assert "float tile_A[2][16][132];" in text and "float tile_B[2][16][128];" in text
    assert text.count("__syncthreads();") == 1 and text.count("__pipeline_wait_prior(0);") == 1
    assert "if (k0_next < n) {" in text and "A_staged" not in text


def test_g80_transpose_takes_its_tiles_in_diagonal_order_and_keeps_the_padded_tile():
    """Paper §3.8: the 2-D grid's blocks are remapped (a bijection on any grid), every blockIdx follows."""
    text = (GOLDEN / "g80" / "transpose.cu").read_text()
    assert "// partition: blocks take their tiles in diagonal order" in text
    assert "const unsigned int block_id = blockIdx.x + gridDim.x * blockIdx.y;" in text
    assert "const unsigned int block_y = block_id % gridDim.y;" in text
    assert "const unsigned int block_x = (block_id / gridDim.y + block_y) % gridDim.x;" in text
    assert text.count("blockIdx") == 2                                 # only in the prologue
    assert "int x = block_x * blockDim.x + threadIdx.x;" in text
    assert "in[(block_x * 16 + threadIdx.y) * cols + block_y * 16 + threadIdx.x]" in text
    assert "__shared__ float tile_in[16][17];" in text                 # the padded tile stays
    assert text.count("__syncthreads();") == 1


def test_sm90_transpose_loads_its_tile_rows_as_float4_where_a_block_test_allows():
    """Blocks whose tile is inside the matrix, with rows that start 16-byte aligned (tested
    at run time: nothing in the file proves it), load 4 elements of a tile row per thread as one float4;
    the others take the scalar loads. The tile stays padded, one barrier."""
    text = unwrapped((GOLDEN / "sm_90" / "transpose.cu").read_text())
    assert "// 16-byte loads, 4 elements of a row per thread" in text
    assert "if (cols % 4 == 0 && (((size_t) in) & 15) == 0 && blockIdx.x * 64 + 63 < rows " \
           "&& blockIdx.y * 64 + 63 < cols) {" in text
    assert "const float4 v = *((const float4 *) (&in[(blockIdx.x * 64 + rr + vrow) * cols + blockIdx.y * 64 " \
           "+ vcol]));" in text
    assert "tile_in[rr + vrow][vcol + 3] = v.w;" in text
    assert "for (int rr = 0; rr < 64; rr += 32) {" in text and "for (int rr = 0; rr < 64; rr += 8)" in text
    assert "__shared__ float tile_in[64][65];" in text
    assert text.count("__syncthreads();") == 1
    report = json.loads((GOLDEN / "sm_90" / "transpose.report.json").read_text())
    staged = next(d["reason"] for d in report["kernels"][0]["decisions"] if d["subject"] == "in[x * cols + y]")
    assert "one 16-byte load, tested at run time, per block" in staged


def test_g80_mv_starts_its_loop_at_a_step_of_its_own_in_each_block():
    """Paper §3.8 (Fig. 9): the staged walk over the columns of A starts at step blockIdx.x, modulo the
    number of steps (exact at ragged sizes)."""
    text = (GOLDEN / "g80" / "mv.cu").read_text()
    assert "// partition: block b starts the 'c0' loop at step b" in text
    assert "const int c0_steps = (cols + 15) / 16;" in text
    assert "for (int c0_step = 0; c0_step < c0_steps; c0_step++) {" in text
    assert "const int c0 = (c0_step + blockIdx.x) % c0_steps * 16;" in text
    assert "for (int c0 = 0; c0 < cols; c0 += 16)" not in text
    assert text.count("__syncthreads();") == 2
    # ... and the prefetch stays: the first step's loads at the block's own first step, the next step's at
    # the rotated next step
    assert "if (0 < c0_steps) {\n        const int c0 = blockIdx.x % c0_steps * 16;" in text
    assert "const int c0_next = (c0_step_next + blockIdx.x) % c0_steps * 16;" in text


@requires_nvcc
@pytest.mark.parametrize("name", ["mm.cu", "strsm.cu"])
def test_whole_programs_build_unchanged_and_launch_with_the_new_configuration(name, tmp_path):
    out = tmp_path / name
    proc = compile_file(f"inputs/{name}", out, "--target", "g80")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    original = (ROOT / "inputs" / name).read_text()
    main_start = original.index("int main")
    host = original[main_start:]
    launched = re.findall(r"(\w+)<<<", host)
    rewritten = re.findall(r"// gpgpu_opt launch .*\n__global__ void (\w+)", text)
    for kernel in rewritten:
        assert f"{kernel}<<<{kernel}_grid(" in text and f"static dim3 {kernel}_grid(" in text
    # host code is unchanged apart from the rewritten launch sites
    assert re.sub(r"<<<.*?>>>", "<<<>>>", text[text.index("int main"):]) == re.sub(r"<<<.*?>>>", "<<<>>>", host)
    assert launched
    build = subprocess.run(["nvcc", "-arch=sm_90", str(out), "-o", str(tmp_path / "prog"), f"-I{ROOT / 'inputs'}"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr


UNSEEN = {
    "rowsum_mv": """
        __global__ void rowdot(const float *__restrict__ M, const float *__restrict__ v, float *out, int h, int w) {
            int row = threadIdx.x + blockIdx.x * blockDim.x;
            if (row >= h) return;
            float acc = 0.0f;
            for (int j = 0; j < w; j += 1)
                acc += v[j] * M[row * w + j];
            out[row] = acc;
        }
    """,
    "colsum_tmv": """
        __global__ void coldot(const float *M, const float *v, float *out, int h, int w) {
            int col = blockIdx.x * blockDim.x + threadIdx.x;
            if (col < w) {
                float acc = 0.0f;
                for (int i = 0; i < h; i++)
                    acc = acc + M[i * w + col] * v[i];
                out[col] = acc;
            }
        }
    """,
    "flip_transpose": """
        __global__ void flip(const float *src, float *dst, int width, int height) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            int j = blockIdx.y * blockDim.y + threadIdx.y;
            if (i < height && j < width)
                dst[j * height + i] = src[i * width + j];
        }
    """,
}


@pytest.mark.parametrize("name", sorted(UNSEEN))
def test_unseen_shapes_come_out_coalesced_on_sm90(name, tmp_path):
    src = tmp_path / f"{name}.cu"
    src.write_text(textwrap.dedent(UNSEEN[name]))
    out = tmp_path / "out.cu"
    proc = compile_file(src, out, "--target", "sm_90")
    assert proc.returncode == 0, proc.stderr
    analysis = run_cli("analyze", out, "--json", cwd=ROOT)
    assert analysis.returncode == 0, analysis.stderr
    accesses = json.loads(analysis.stdout)["kernels"][0]["accesses"]
    assert accesses and all(a["coalesced"] for a in accesses), json.dumps(accesses, indent=1)
    verify = run_cli("verify", src, cwd=ROOT)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_unanalysable_access_leaves_the_rest_optimized(tmp_path):
    src = tmp_path / "gather.cu"
    src.write_text(textwrap.dedent("""
        __global__ void gather_mv(const float *A, const int *perm, const float *x, float *y, int rows, int cols) {
            int r = blockIdx.x * blockDim.x + threadIdx.x;
            if (r < rows) {
                float s = 0.0f;
                for (int c = 0; c < cols; c++)
                    s += A[r * cols + c] * x[perm[c]];
                y[r] = s;
            }
        }
    """))
    out = tmp_path / "out.cu"
    proc = compile_file(src, out, "--target", "sm_90", "-v")
    assert proc.returncode == 0
    assert "note:" in proc.stderr and "x[perm[c]]" in proc.stderr
    assert "tile_A" in out.read_text()


def test_a_loop_of_exactly_one_staged_step_has_no_step_loop(tmp_path):
    """A 16-iteration filter row, unrolled by 16 on g80, is staged once per row: no `i0` loop."""
    src = tmp_path / "weights.cu"
    src.write_text(WEIGHTS)
    out = tmp_path / "out.cu"
    assert compile_file(src, out, "--target", "g80").returncode == 0
    text = out.read_text()
    assert "__shared__ float tile_filt[16];" in text and "filt[j_next * 16 + threadIdx.x]" in text  # prefetched
    assert "i0" not in text and "for (int i = 0; i < 16; i++)" in text
    assert text.count("__syncthreads();") == 2


@pytest.mark.parametrize("target, tile, origin", [("g80", "tile_in[31][31]", "row0 + elem / 31")])
def test_conv_stages_its_halo_tile_of_outputs_plus_the_filter_reach(target, tile, origin):
    """16x16 outputs + 15 on the right and below: one cooperative load, one barrier (on sm_90 conv's register
    tile brings its own halo tile: test_sm90_conv_is_register_blocked_with_a_halo_tile)."""
    text = unwrapped((GOLDEN / target / "conv.cu").read_text())
    assert f"__shared__ float {tile};" in text and origin in text
    assert "const int row0 = blockIdx.y * 16;" in text
    assert "(row < height + 15 && col < width + 15) ? in[row * (width + 15) + col] : 0.0f" in text
    assert "tile_in[threadIdx.y + j][threadIdx.x + i]" in text and "in[(y + j)" not in text
    assert text.count("__syncthreads();") == 1
    assert "__shared__ float tile_filt[256];" in text


@pytest.mark.parametrize("name, array", [("demosaic", "raw"), ("imregionmax", "A")])
def test_3x3_stencils_stage_18x18_halos_on_g80_and_keep_l1_reads_on_sm90(name, array):
    g80 = (GOLDEN / "g80" / f"{name}.cu").read_text()
    assert f"__shared__ float tile_{array}[18][18];" in g80 and g80.count("__syncthreads();") == 1
    assert f"tile_{array}[threadIdx.y + 2][threadIdx.x + 2]" in g80 or name == "imregionmax"
    assert "// gpgpu_opt launch block(16, 16)" in g80
    sm90 = (GOLDEN / "sm_90" / f"{name}.cu").read_text()
    assert "__shared__" not in sm90
    report = json.loads((GOLDEN / "sm_90" / f"{name}.report.json").read_text())
    reasons = [d["reason"] for k in report["kernels"] for d in k["decisions"]]
    assert any("no halo tile: the L1 already absorbs" in r for r in reasons)


def test_merge_option_is_parsed_and_bad_values_are_errors(tmp_path):
    from gpgpu_opt.pass_api.context import MergeRequest

    assert MergeRequest.parse("x=2,y=8") == MergeRequest(2, 8)
    assert MergeRequest.parse("y=4") == MergeRequest(1, 4)
    out = tmp_path / "out.cu"
    for bad in ("z=2", "x=0", "x=two", "x"):
        proc = compile_file(ROOT / "inputs" / "mm.cu", out, "--merge", bad)
        assert proc.returncode != 0 and "--merge" in proc.stderr and not out.exists()


@pytest.mark.parametrize("target", GOLDEN_TARGETS)
def test_complex_mul_is_vectorized_into_float2_pairs(target):
    """The paper's §3.1 rule: re/im pairs loaded and stored as one float2, .x the lower (real) element; the
    buffers come from cudaMalloc in the file, so they are 8-byte aligned."""
    text = (GOLDEN / target / "complex_mul.cu").read_text()
    assert "const float2 a2 = ((const float2 *) a)[i];" in text and "const float2 b2 = ((const float2 *) b)[i];" in text
    assert "((float2 *) c)[i] = make_float2(c_x, a2.x * b2.y + a2.y * b2.x);" in text
    assert "a[2 * i]" not in text.split("__global__")[1].split("/* c = a * b")[0]


def test_sm90_conv_is_register_blocked_with_a_halo_tile():
    """conv on sm_90: 8x8 outputs per thread; the halo tile is the block's 64x128 outputs plus the
    16x16 filter's reach (79x143, rows padded to 144 floats), the filter in shared memory, one barrier."""
    text = (GOLDEN / "sm_90" / "conv.cu").read_text()
    assert "__shared__ __align__(16) float tile_in[79][144];" in text
    assert "__shared__ __align__(16) float tile_filt[16][16];" in text
    assert "float sum[8][8];" in text and "float in_row[23];" in text
    assert "sum[r][c] += in_row[c + i] * tile_filt[j][i];" in text
    assert "in[(first_row + tile_row) * (width + 15) + first_col + tile_col]" in text
    assert "// gpgpu_opt launch block(16, 8) grid((global_x + 127) / 128, (global_y + 63) / 64)" in text
    assert "__launch_bounds__(128, 4)" in text
    assert text.count("__syncthreads();") == 1


def test_sm90_demosaic_golden_is_a_register_stencil_window():
    """4 x 4 outputs per thread, each row of raw loaded once (two float2 where the row's address is
    8-byte aligned: the pitch width + 2 is even at best, no launch proves the base), the columns past a
    lane's four from the next lane by shuffles, no shared memory; the interior (every copy's guard holds)
    runs the copies unguarded and stores each row of r, g, b as one float4; the edges keep the guarded
    copies with the parity branches. imregionmax (its thread space stated, no guard) only widens C's stores."""
    text = unwrapped((GOLDEN / "sm_90" / "demosaic.cu").read_text())
    assert "const int x0 = (blockIdx.x * 32 + threadIdx.x) * 4;" in text           # vector width 4
    assert "const int y0 = (blockIdx.y * 8 + threadIdx.y) * 4;" in text            # 4 rows per thread
    assert "float raw_win[6][6];" in text                                          # rows 4+2, columns 4+2
    assert "(((size_t) (raw + row * (width + 2) + x0)) & 7) == 0" in text
    assert text.count("*((const float2 *) (&raw[row * (width + 2) + x0") == 2
    assert text.count("__shfl_down_sync(0xffffffffu, raw_win[i]") == 2
    # every row's loads come before the first shuffle
    assert text.rindex("raw[row * (width + 2)") < text.index("__shfl_down_sync")
    assert "__shfl_up_sync" not in text and "__shared__" not in text and "__syncthreads" not in text
    assert "if (x0 + 3 < width && y0 + 3 < height) {" in text
    assert "if ((((size_t) r) & 15) == 0" in text
    for plane in "rgb":
        assert (f"*((float4 *) (&{plane}[(y0 + r2) * width + x0])) = make_float4({plane}_row[0], {plane}_row[1], "
                f"{plane}_row[2], {plane}_row[3]);") in text
    assert text.count("if (y % 2 == 0)") == 2 and "raw_win[r2 + 1][v + 1]" in text  # r is the red plane
    imregionmax = (GOLDEN / "sm_90" / "imregionmax.cu").read_text()
    assert "float A_win[6][6];" in imregionmax and "const float2 pair0" in imregionmax
    assert "*((float4 *) (&C[(y0 + r) * 4096 + x0])) = make_float4(" in imregionmax
    assert "__shared__" not in imregionmax
