"""Access analysis: kinds, coalescing per target, reuse, partition camping; golden `analyze --json`."""
import json
import textwrap

import pytest

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target
from tests.cli_in_process import run_cli
from tests.conftest import GOLDEN, GOLDEN_TARGETS, INPUT_FILES, INPUTS, ROOT


def analyse(tmp_path, source, target, block=None, name="k.cu"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    prog = load_program(str(path))
    return {(a["array"], a["mode"]): a
            for a in analyze_kernel(prog.kernels[0], get_target(target), block).as_dict()["accesses"]}


MATMUL = """
    __global__ void matmul(const float *A, const float *B, float *C, int N) {
        int row = blockIdx.y * blockDim.y + threadIdx.y;
        int col = blockIdx.x * blockDim.x + threadIdx.x;
        float acc = 0.0f;
        for (int k = 0; k < N; ++k)
            acc += A[row*N+k] * B[k*N+col];
        C[row*N+col] = acc;
    }
"""


def test_matmul_a_is_a_loop_access_broadcast_on_sm90_but_uncoalesced_on_g80(tmp_path):
    sm90 = analyse(tmp_path, MATMUL, "sm_90", (16, 16))
    g80 = analyse(tmp_path, MATMUL, "g80", (16, 16))
    a90, a80 = sm90[("A", "read")], g80[("A", "read")]
    assert a90["kind"] == a80["kind"] == "loop"
    assert a90["coalesced"] and a90["broadcast"] and a90["efficiency"] == 1.0
    assert not a80["coalesced"] and a80["sectors_per_request"] == 16
    for result in (sm90, g80):
        b = result[("B", "read")]
        assert b["kind"] == "loop" and b["coalesced"] and b["efficiency"] == 1.0
    assert a80["load_path"] == "G2S" and g80[("B", "read")]["load_path"] == "G2R"
    assert {(r["scope"], r.get("dimension")) for r in a90["reuse"]} >= {("threads", "x"), ("blocks", "x")}
    assert {(r["scope"], r.get("dimension")) for r in sm90[("B", "read")]["reuse"]} >= {("threads", "y"),
                                                                                      ("blocks", "y")}


def test_mv_one_thread_per_row_touches_32_sectors_with_reuse_over_the_loop(tmp_path):
    mv = analyse(tmp_path, """
        __global__ void matvec(const float *M, const float *v, float *out, int rows, int cols) {
            int r = blockIdx.x * blockDim.x + threadIdx.x;
            if (r < rows) {
                float s = 0;
                for (int c = 0; c < cols; c++) s += M[r*cols+c] * v[c];
                out[r] = s;
            }
        }
    """, "sm_90", (128, 1))
    m = mv[("M", "read")]
    assert m["kind"] == "loop" and not m["coalesced"]
    assert m["sectors_per_request"] == 32 and m["efficiency"] == pytest.approx(1 / 8)
    assert any(r["scope"] == "loop" and r["kind"] == "spatial" for r in m["reuse"])
    assert m["load_path"] == "G2S"
    assert mv[("v", "read")]["broadcast"]


def test_kinds_constant_thread_loop_unresolved(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent("""
        __global__ void k(const float *a, const int *perm, float *out, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            float s = a[5] + a[i];
            for (int j = 0; j < n; j += 2) s += a[2*j+1];
            out[i] = s + a[perm[i]];
        }
    """))
    accesses = analyze_kernel(load_program(str(path)).kernels[0], get_target("sm_90"), (256, 1)).as_dict()["accesses"]
    kinds = {(a["array"], a["index"]): a["kind"] for a in accesses}
    assert kinds == {("a", "5"): "constant", ("a", "i"): "thread", ("a", "2 * j + 1"): "loop",
                     ("perm", "i"): "thread", ("a", "perm[i]"): "unresolved", ("out", "i"): "thread"}


def test_outer_loop_iterators_are_loop_indices(tmp_path):
    result = analyse(tmp_path, """
        __global__ void k(const float *a, float *out, int n) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            float s = 0;
            for (int j = 0; j < 4; j++)
                for (int i = 0; i < 4; i++)
                    s += a[j * n + x + i];
            out[x] = s;
        }
    """, "g80", (64, 1))
    a = result[("a", "read")]
    assert a["kind"] == "loop" and a["loops"] == ["j", "i"]
    assert any(r["scope"] == "blocks" and r["kind"] == "overlap" for r in a["reuse"])  # halo in x


def test_stride_two_is_half_efficient_on_sm90(tmp_path):
    a = analyse(tmp_path, """
        __global__ void k(const float *a, float *out) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            out[i] = a[2*i];
        }
    """, "sm_90", (256, 1))[("a", "read")]
    assert a["sectors_per_request"] == 8 and a["efficiency"] == 0.5 and not a["coalesced"]


def test_partition_camping_only_on_targets_that_camp():
    prog = load_program(str(INPUTS / "mv.cu"))
    g80 = analyze_kernel(prog.kernels[0], get_target("gt200")).as_dict()["accesses"]
    sm90 = analyze_kernel(prog.kernels[0], get_target("sm_90")).as_dict()["accesses"]
    assert g80[0]["partition_camping"]["camping"]
    assert all("partition_camping" not in a for a in sm90)


@pytest.mark.parametrize("target", GOLDEN_TARGETS)
@pytest.mark.parametrize("name", INPUT_FILES)
def test_golden_analyze_json(name, target, check_golden):
    proc = run_cli("analyze", f"inputs/{name}", "--target", target, "--json", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["kernels"] and all("accesses" in k for k in data["kernels"])
    check_golden(GOLDEN / target / name.replace(".cu", ".analyze.json"), proc.stdout)


def test_analyze_table_is_readable():
    proc = run_cli("analyze", "inputs/mv.cu", "--target", "g80", cwd=ROOT)
    assert proc.returncode == 0
    assert "kernel mv" in proc.stdout and "A[r * cols + c]" in proc.stdout and "G2S" in proc.stdout
