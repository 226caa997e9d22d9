"""`verify` on whole programs: the naive launch as the program makes it, every written array compared
(atomics and dereferences too), float sizes, gathers, down-counting loops."""
import textwrap

import pytest

from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.command import run_verify
from tests.cli_in_process import run_cli
from tests.conftest import ROOT

pytest.importorskip("gpgpu_opt.emulator")

MVT = textwrap.dedent("""
    #include <math.h>
    #define N 48
    #define DIM_THREAD_BLOCK_X 32
    #define DIM_THREAD_BLOCK_Y 8

    __global__ void mvt_kernel1(float *a, float *x1, float *y_1)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < N) {
            int j;
            for (j = 0; j < N; j++)
                x1[i] += a[i * N + j] * y_1[j];
        }
    }

    void mvtCuda(float *a_gpu, float *x1_gpu, float *y_1_gpu)
    {
        dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
        dim3 grid((size_t)(ceil( ((float)N) / ((float)block.x) )), 1);
        mvt_kernel1<<<grid, block>>>(a_gpu, x1_gpu, y_1_gpu);
    }
""")


def cli(*args):
    return run_cli("verify", *args, cwd=ROOT)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def api(path, capsys, against=None, sizes=None, extents=None, passes=None, block=None, grid=None):
    """run_verify as the CLI calls it; returns (ok, printed report)."""
    program = load_program(str(path))
    ok = run_verify(program, get_target("sm_90"), passes, sizes or {}, None, 1,
                    str(against) if against else None, Diagnostics(), {}, {}, [], block, grid, extents)
    return ok, capsys.readouterr().out


def test_a_1d_kernel_launched_with_2d_blocks_races_in_the_input(tmp_path):
    path = write(tmp_path, "mvt.cu", MVT)
    proc = cli(path)
    line = MVT.splitlines().index(next(l for l in MVT.splitlines() if "<<<" in l)) + 1
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the naive kernel races" in proc.stdout and f"launch at line {line}:" in proc.stdout
    assert "block 32x8x1, grid 2x1x1" in proc.stdout and "FAIL" in proc.stdout


def test_the_same_program_with_1d_blocks_passes(tmp_path):
    path = write(tmp_path, "mvt.cu", MVT.replace("#define DIM_THREAD_BLOCK_Y 8", "#define DIM_THREAD_BLOCK_Y 1"))
    proc = cli(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout and "threads 48x1" in proc.stdout


def test_block_option_overrides_the_programs_launch(tmp_path):
    path = write(tmp_path, "mvt.cu", MVT)
    proc = cli(path, "--block", "16", "--grid", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_launch_evaluates_with_the_cases_size(tmp_path, capsys):
    """`(n + 127) / 128` with the host's n passed as the kernel's n: the case's n gives the grid."""
    path = write(tmp_path, "scale.cu", """
        __global__ void scale(float *d, int len)
        {
            d[blockIdx.x * blockDim.x + threadIdx.x] *= 2.0f;   /* unguarded: needs an exact launch */
        }
        int main() { float *d; int n = 1024; scale<<<n / 128, 128>>>(d, n); }
    """)
    ok, out = api(path, capsys, sizes={"len": 256}, passes="none")
    assert ok and "threads 256x1" in out, out


DOT = """
    __global__ void dot(const float *a, const float *b, float *result, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
            atomicAdd(result, a[i] * b[i]);
    }
"""


def test_an_atomic_sum_into_a_scalar_is_compared(tmp_path, capsys):
    path = write(tmp_path, "dot.cu", DOT)
    ok, out = api(path, capsys)
    assert ok and "1 elements" in out, out
    wrong = write(tmp_path, "dot_wrong.cu", "#pragma gpgpu_opt launch block(64, 1) grid((global_x + 63) / 64, 1)\n"
                  + DOT.replace("if (i < n)", "if (i < n - 1)"))
    ok, out = api(path, capsys, against=wrong)
    assert not ok and "result: 1 of 1 elements differ" in out, out


def test_a_write_through_a_dereference_is_compared(tmp_path, capsys):
    text = """
        __global__ void first(const float *a, float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i == 0)
                *out = a[n - 1];
        }
    """
    path = write(tmp_path, "first.cu", text)
    wrong = write(tmp_path, "first_wrong.cu", "#pragma gpgpu_opt launch block(32, 1) grid(1, 1)\n"
                  + textwrap.dedent(text).replace("a[n - 1]", "a[n - 2]"))
    ok, out = api(path, capsys, against=wrong, sizes={"n": 20}, block=(32,), grid=(1,))
    assert not ok and "out: 1 of 1 elements differ" in out, out


def test_a_kernel_that_writes_nothing_is_an_error(tmp_path):
    path = write(tmp_path, "nop.cu", """
        __global__ void nop(const float *a, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { float x = a[i]; (void)x; }
        }
    """)
    proc = cli(path)
    assert proc.returncode == 1 and "writes no array: nothing to compare" in proc.stdout, proc.stdout + proc.stderr


AXPY = """
    __global__ void axpy(const float *x, float *y, float alpha, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
            y[i] = alpha * x[i] + y[i];
    }
"""


def test_a_float_size_reaches_the_kernel(tmp_path, capsys):
    path = write(tmp_path, "axpy.cu", AXPY)
    hand = write(tmp_path, "axpy_15.cu", "#pragma gpgpu_opt launch block(64, 1) grid((global_x + 63) / 64, 1)\n"
                 + AXPY.replace("alpha * x[i]", "1.5f * x[i]"))
    ok, out = api(path, capsys, against=hand, sizes={"alpha": 1.5})
    assert ok and "alpha=1.5" in out, out
    assert not api(path, capsys, against=hand, sizes={"alpha": 2.5})[0]


def test_a_float_size_on_the_command_line(tmp_path):
    path = write(tmp_path, "axpy.cu", AXPY)
    proc = cli(path, "--size", "alpha=1.5", "--size", "n=40")
    assert proc.returncode == 0 and "alpha=1.5" in proc.stdout, proc.stdout + proc.stderr
    proc = cli(path, "--size", "n=2.5")
    assert proc.returncode == 1 and "integer parameter" in proc.stderr


GATHER = """
    __global__ void gather(const float *src, const int *perm, float *out, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
            out[i] = src[perm[i]];
    }
"""


def test_a_gather_with_an_extent(tmp_path, capsys):
    path = write(tmp_path, "gather.cu", GATHER)
    ok, out = api(path, capsys, extents={"src": 7})
    assert ok, out
    hand = write(tmp_path, "gather_wrong.cu", "#pragma gpgpu_opt launch block(64, 1) grid((global_x + 63) / 64, 1)\n"
                 + GATHER.replace("src[perm[i]]", "src[perm[i] % 3]"))
    ok, out = api(path, capsys, against=hand, extents={"src": 7})
    assert not ok and "differ" in out, out


def test_a_gather_on_the_command_line(tmp_path):
    path = write(tmp_path, "gather.cu", GATHER)
    proc = cli(path, "--extent", "src=5")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_unresolved_subscript_of_a_written_array_says_how_to_size_it(tmp_path, capsys):
    path = write(tmp_path, "scatter.cu", GATHER.replace("out[i] = src[perm[i]]", "out[perm[i] * 2] = src[i]"))
    with pytest.raises(CompileError, match="--extent out=N"):
        api(path, capsys)


def test_an_unresolved_subscript_of_an_array_only_read_is_sized_by_the_naive_run(tmp_path, capsys):
    path = write(tmp_path, "gather2.cu", GATHER.replace("src[perm[i]]", "src[perm[i] * 2]"))
    ok, out = api(path, capsys)
    assert ok, out


def test_a_down_counting_loop_verifies(tmp_path, capsys):
    path = write(tmp_path, "back.cu", """
        __global__ void back(const float *a, float *out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                float s = 0.0f;
                for (int k = n - 1; k >= 0; k--)
                    s = s * 0.5f + a[i * n + k];
                out[i] = s;
            }
        }
    """)
    ok, out = api(path, capsys)
    assert ok and "PASS" in out, out
