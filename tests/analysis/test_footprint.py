"""Footprints across statements: reads of one array at constant offsets around the thread's
element, written statement by statement or with loops of constant bounds, are one footprint per block."""
import textwrap

import pytest

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.footprint import footprints
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target
from tests.conftest import INPUTS, ROOT

PROGRAMS = ROOT / "tests" / "programs"


def footprints_of(path, kernel=None, bindings=None):
    prog = load_program(str(path))
    k = prog.kernel(kernel) if kernel else prog.kernels[0]
    return footprints(collect_accesses(k), bindings)


def source(tmp_path, text):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(text))
    return path


def test_demosaic_nine_statements_are_one_footprint_of_a_3x3_reach():
    (fp,) = footprints_of(INPUTS / "demosaic.cu")
    assert fp.array == "raw" and len(fp.reads) == 9 and len(fp.offsets) == 9
    assert fp.reach == (0, 2, 0, 2)
    assert fp.extent((16, 16)) == (18, 18) and fp.elements((16, 16)) == 324
    assert fp.reads_per_thread() == 9


def test_conv_filter_loops_of_literal_bounds_make_a_31x31_tile_for_16x16_outputs():
    (fp,) = footprints_of(INPUTS / "conv.cu")
    assert fp.array == "in" and len(fp.reads) == 1 and len(fp.offsets) == 256
    assert fp.extent((16, 16)) == (31, 31) and fp.reads_per_thread() == 256


def test_imregionmax_loop_and_centre_read_share_the_footprint():
    (fp,) = footprints_of(INPUTS / "imregionmax.cu")
    assert len(fp.reads) == 2 and len(fp.offsets) == 9 and fp.reads_per_thread() == 10


def test_jacobi_five_point_plus_has_no_corners():
    (fp,) = footprints_of(PROGRAMS / "jacobi2d.cu", "runJacobiCUDA_kernel1")
    assert fp.offsets == {(0, 0), (0, -1), (0, 1), (1, 0), (-1, 0)}
    assert fp.reach == (1, 1, 1, 1)
    assert fp.elements((16, 16)) == 18 * 18 - 4        # the tile's corners are read by no thread


PARAMETER_CONV = """
    __global__ void conv(const float *in, const float *f, float *out, int w, int h, int k) {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x < w && y < h) {
            float s = 0.0f;
            for (int j = 0; j < k; j++)
                for (int i = 0; i < k; i++)
                    s += in[(y + j) * (w + k - 1) + x + i] * f[j * k + i];
            out[y * w + x] = s;
        }
    }"""


def test_a_parameter_sized_filter_needs_a_bound(tmp_path):
    assert footprints_of(source(tmp_path, PARAMETER_CONV)) == []
    (fp,) = footprints_of(source(tmp_path, PARAMETER_CONV), bindings={"k": 5})
    assert fp.extent((32, 8)) == (12, 36)


def test_a_written_array_or_a_single_read_is_no_footprint(tmp_path):
    text = """
    __global__ void k(float *a, float *b, int n) {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x > 0 && y > 0 && x < n - 1 && y < n - 1) {
            a[y * n + x] = a[y * n + x - 1] + a[y * n + x + 1];
            b[y * n + x] = b[y * n + x] * 2.0f;
        }
    }"""
    assert footprints_of(source(tmp_path, text)) == []


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_reuse_counts_the_footprint_instead_of_no_reuse(target):
    k = load_program(str(INPUTS / "demosaic.cu")).kernels[0]
    reports = analyze_kernel(k, get_target(target), (16, 16)).as_dict()["accesses"]
    raw = [r for r in reports if r["array"] == "raw"]
    assert len(raw) == 9
    for r in raw:
        (fp,) = [e for e in r["reuse"] if e["kind"] == "footprint"]
        assert fp["tile"] == [18, 18] and fp["elements"] == 324 and fp["block_reads"] == 2304
        assert "7.1 reads per element" in fp["description"]
