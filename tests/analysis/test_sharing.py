"""Sharing between thread blocks (paper §3.4): per global read, G2S/G2R and whether the neighbouring block
in x / y reads the same data (yes), part of it (overlap: halos), or not (no, with a stride when blocks
farther away do)."""
import textwrap

import pytest

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target
from tests.conftest import INPUT_FILES, INPUTS


def reads(path, kernel=None, target="g80", block=None):
    prog = load_program(str(path))
    k = prog.kernel(kernel) if kernel else prog.kernels[0]
    return {f"{a['array']}[{a['index']}]": a["sharing"]
            for a in analyze_kernel(k, get_target(target), block).as_dict()["accesses"] if a["mode"] == "read"}


def shared(s, axis):
    return s[axis]["shared"]


@pytest.mark.parametrize("name", INPUT_FILES)
def test_every_read_of_every_input_has_a_sharing(name):
    prog = load_program(str(INPUTS / name))
    for k in prog.kernels:
        for a in analyze_kernel(k, get_target("g80")).as_dict()["accesses"]:
            if a["mode"] == "read" and a["kind"] != "unresolved":
                s = a["sharing"]
                assert s["kind"] == a["load_path"] in ("G2S", "G2R")
                assert all(s[axis]["shared"] in ("yes", "overlap", "no") for axis in ("x", "y") if axis in s)


def test_mm_shares_the_row_of_A_in_x_and_the_column_of_B_in_y():
    s = reads(INPUTS / "mm.cu", "mm")
    assert s["A[row * n + k]"] == {"kind": "G2S", "x": {"shared": "yes"}, "y": {"shared": "no"}}
    assert s["B[k * n + col]"] == {"kind": "G2R", "x": {"shared": "no"}, "y": {"shared": "yes"}}


def test_mv_and_tmv_share_the_vector_between_all_blocks():
    mv = reads(INPUTS / "mv.cu")
    assert mv["x[c]"]["all_blocks"] and mv["x[c]"]["kind"] == "G2S"
    assert shared(mv["A[r * cols + c]"], "x") == "no"
    tmv = reads(INPUTS / "tmv.cu")
    assert tmv["B[i]"]["all_blocks"]
    assert shared(tmv["A[i * 4096 + idx]"], "x") == "no"


def test_transpose_shares_nothing():
    s = reads(INPUTS / "transpose.cu")
    assert all(v["shared"] == "no" for sh in s.values() for k, v in sh.items() if k in ("x", "y"))


def test_conv_input_overlaps_its_neighbours_by_the_halo_and_the_filter_is_shared_by_all():
    s = reads(INPUTS / "conv.cu")
    halo = s["in[(y + j) * (width + 16 - 1) + (x + i)]"]
    # a 16x16 block reads 31x31 pixels; its neighbour in x shares 15 columns of them (15 rows in y)
    assert halo["x"] == {"shared": "overlap", "elements": 15 * 31, "of": 31 * 31}
    assert halo["y"] == {"shared": "overlap", "elements": 15 * 31, "of": 31 * 31}
    assert s["filt[j * 16 + i]"]["all_blocks"]


def test_vv_shares_A_in_x_and_B_in_y():
    s = reads(INPUTS / "vv.cu")
    assert (shared(s["A[idy]"], "x"), shared(s["A[idy]"], "y")) == ("yes", "no")
    assert (shared(s["B[idx]"], "x"), shared(s["B[idx]"], "y")) == ("no", "yes")


def test_affine_reads_get_no_stride_from_assumed_sizes():
    # rows of B[i * m + col] would wrap onto farther blocks only for a small assumed m
    s = reads(INPUTS / "strsm.cu", "strsm")
    assert s["B[i * m + col]"]["x"] == {"shared": "no"}
    assert s["L[i * n + k]"]["all_blocks"]


def kernel(tmp_path, source):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    return path


def test_a_halo_between_two_reads_of_the_array_is_an_overlap(tmp_path):
    s = reads(kernel(tmp_path, """
        __global__ void blur(const float *in, float *out, int n) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            if (x > 0 && x < n - 1)
                out[x] = in[x - 1] + in[x + 1];
        }"""))
    # block b's in[x + 1] reaches the first element of block b+1's in[x - 1]: 2 elements in common
    assert s["in[x - 1]"]["x"] == {"shared": "overlap", "elements": 2, "of": 256}
    assert s["in[x + 1]"]["x"]["shared"] == "overlap"


def test_blocks_reading_the_same_data_every_few_blocks_have_a_stride(tmp_path):
    s = reads(kernel(tmp_path, """
        __global__ void wrap(const float *in, float *out, int n) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            if (x < n)
                out[x] = in[(blockIdx.x % 4) * blockDim.x + threadIdx.x];
        }"""))
    assert s["in[blockIdx.x % 4 * blockDim.x + threadIdx.x]"]["x"] == {"shared": "no", "stride": 4}


def test_outer_loop_indices_are_not_thread_ids(tmp_path):
    s = reads(kernel(tmp_path, """
        __global__ void rows(const float *A, const float *v, float *out, int n) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            float s = 0.0f;
            for (int t = 0; t < 4; t++)
                for (int k = 0; k < n; k++)
                    s += A[(t * n + y) * n + k] * v[t * n + k];
            out[y * n + x] = s;
        }"""))
    a = s["A[(t * n + y) * n + k]"]
    assert (a["x"]["shared"], a["y"]["shared"]) == ("yes", "no")
    assert s["v[t * n + k]"]["all_blocks"]


def test_analyze_prints_the_sharing_column():
    from tests.cli_in_process import run_cli
    proc = run_cli("analyze", "inputs/mm.cu", "--target", "g80")
    assert "shared by blocks" in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if "A[row * n + k]" in ln)
    assert "x:yes y:no" in line
