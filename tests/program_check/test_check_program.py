"""`gpgpu-opt check-program`: a program built twice (as written, and with $NVCC the drop-in), run with the
user's arguments; what it prints, writes and exits with compared, numbers within a tolerance, times. Without
a GPU the logic is checked on programs that need none: a script whose build reads $NVCC, and a CUDA
program whose host code prints and writes what it computes on the CPU."""
from __future__ import annotations

import sys
import textwrap

import pytest

from gpgpu_opt.program_check import check_program
from gpgpu_opt.program_check.compare import text_difference
from tests.cli_in_process import run_cli
from tests.conftest import requires_nvcc

# The "build" writes which compiler it was given; the "program" prints a result that is a little off in
# the optimized build (by `drift`), a time line that differs anyway, and writes a file.
SCRIPT = textwrap.dedent("""\
    import sys
    optimized = "gpgpu_opt" in open("compiler").read()
    drift = float(sys.argv[1]) if optimized else 0.0
    print("Time for kernels: %f ms" % (3.0 if optimized else 7.0))
    print("sum = %.6f" % (1000.0 + drift))
    open("result.txt", "w").write("%.6f\\n" % (2.0 + (drift if len(sys.argv) > 2 else 0.0)))
    sys.exit(0)
""")


@pytest.fixture
def scripted(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "app.py").write_text(SCRIPT)
    return source


def check(source, *args, tolerance=1e-3, work):
    return check_program(str(source), [sys.executable, "app.py", *args], build='echo "$NVCC" > compiler',
                         repeats=2, tolerance=tolerance, nvcc=sys.executable, work=str(work), echo=lambda _: None)


def test_numbers_within_the_tolerance_agree_and_time_lines_are_not_compared(scripted, tmp_path):
    outcome = check(scripted, "0.0001", work=tmp_path / "w1")
    assert outcome.ok and len(outcome.naive.runs) == len(outcome.optimized.runs) == 2
    assert "| ok |" in outcome.table()
    assert not check(scripted, "0.0001", tolerance=1e-9, work=tmp_path / "w2").ok


def test_a_difference_in_what_it_prints_or_writes_fails_naming_it(scripted, tmp_path):
    printed = check(scripted, "5", work=tmp_path / "w1")
    assert not printed.ok and printed.difference == "output: token 2: naive '1000.000000', optimized '1005.000000'"
    written = check(scripted, "0.0", "and the file", work=tmp_path / "w2")
    assert written.ok                                       # 0.0 drifts nothing
    written = check(scripted, "0.5", "and the file", work=tmp_path / "w3")   # the output within 1e-3, the file not
    assert not written.ok and written.difference == "result.txt: token 0: naive '2.000000', optimized '2.500000'"


def test_a_failed_build_is_a_failed_check(scripted, tmp_path):
    outcome = check_program(str(scripted), [sys.executable, "app.py"], build="exit 3", nvcc=sys.executable,
                            work=str(tmp_path / "w"), echo=lambda _: None)
    assert not outcome.ok and outcome.difference.startswith("the naive build failed")


def test_the_comparison_of_texts():
    assert text_difference("a 1.0\nTime: 3 ms\n", "a 1.00001\nTime: 9 ms\n", "out", 1e-3) is None
    assert text_difference("x = nan", "x = nan", "out", 1e-3) is None
    assert text_difference("PASSED", "FAILED", "out", 1e-3) == "out: token 0: naive 'PASSED', optimized 'FAILED'"


PROGRAM = {
    "Makefile": "NVCC ?= nvcc\napp: main.cu\n\t$(NVCC) -arch=sm_90 main.cu -o app\n",
    "main.cu": textwrap.dedent("""\
        #include <cstdio>
        __global__ void scale(float *out, const float *in, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = in[i] * 2.0f;
        }
        int main(int argc, char **argv)
        {
            int n = 1 << 22;
            float *d_in, *d_out;
            cudaMalloc(&d_in, n * sizeof(float));
            cudaMalloc(&d_out, n * sizeof(float));
            scale<<<(n + 255) / 256, 256>>>(d_out, d_in, n);
            double sum = 0.0;
            for (int i = 0; i < 1000; i++) sum += 0.5 * i;
            printf("host sum %f\\n", sum);
            FILE *f = fopen("sum.txt", "w");
            fprintf(f, "%f\\n", sum);
            fclose(f);
            return 0;
        }
    """),
}


@requires_nvcc
def test_a_cuda_program_built_by_make_through_the_drop_in(tmp_path, monkeypatch):
    monkeypatch.setenv("GPGPU_OPT_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "prog"
    source.mkdir()
    for name, text in PROGRAM.items():
        (source / name).write_text(text)
    proc = run_cli("check-program", source, "--runs", "1", "--work", tmp_path / "w", "--", "./app")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| ok |" in proc.stdout and "optimized: built" in proc.stderr
    assert list((tmp_path / "cache" / "nvcc").iterdir()), "the optimized build went through the drop-in"
