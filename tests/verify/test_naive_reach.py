"""Arrays no subscript bounds (`img[up[r] + rows * c]`, `up[(e + 1) % rows - 1]`), read-only in the kernel,
are sized by what the naive kernel reads (verify.naive_reach): the check then runs where it could not, and stays
as strict, since an optimized kernel reading past what the naive one read is out of bounds."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.check.cases import Case, run_case
from gpgpu_opt.check.extents import array_extents

#: A diffusion-like step: a row and a column from the linear index (% and /), neighbours read through index
#: arrays the kernel never writes, one output per thread.
GATHER_STEP = """
__global__ void step(int rows, long total, const int *up, const int *left, const float *img, float *out)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    int r = (e + 1) % rows - 1;
    int c = (e + 1) / rows;
    if ((e + 1) % rows == 0) {
        r = rows - 1;
        c = c - 1;
    }
    if (e < total)
        out[e] = img[e] + img[up[r] + rows * c] - img[r + rows * left[c]];
}
"""

#: The same, but the last gathered neighbour is one further: it reads what the naive kernel does not.
ONE_FURTHER = GATHER_STEP.replace("img[r + rows * left[c]]", "img[r + rows * left[c] + 1]")

#: A gather from an array the kernel also writes: not sized by a run (its reads would depend on the writes).
WRITTEN_GATHER = """
__global__ void bump(int n, const int *idx, float *img)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n)
        img[e] = img[idx[e] % n] + 1.0f;
}
"""


def _kernel(tmp_path, source: str, name: str):
    path = tmp_path / f"{name}_{abs(hash(source))}.cu"
    path.write_text(textwrap.dedent(source))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    return next(k for k in program.kernels if k.name == name)


CASE = Case(sizes={"rows": 7, "total": 45}, global_space=(45, 1))


def test_read_only_arrays_no_subscript_bounds_are_left_to_the_run(tmp_path):
    naive = _kernel(tmp_path, GATHER_STEP, "step")
    unsized: set[str] = set()
    extents = array_extents(naive, CASE.sizes, (32, 1), CASE.global_space, unsized=unsized)
    assert unsized == {"up", "left", "img"} and extents["out"] == 45
    with pytest.raises(CompileError, match="cannot size array"):   # without the run, as before
        array_extents(naive, CASE.sizes, (32, 1), CASE.global_space)


def test_the_check_runs_on_gathers_sized_by_the_naive_kernel(tmp_path):
    naive = _kernel(tmp_path, GATHER_STEP, "step")
    result = run_case(naive, naive, (32, 1), CASE, seed=3, device_functions={})
    assert result.ok and result.elements == 45, result.error


def test_an_optimized_kernel_reading_past_the_naive_reads_is_out_of_bounds(tmp_path):
    naive, further = _kernel(tmp_path, GATHER_STEP, "step"), _kernel(tmp_path, ONE_FURTHER, "step")
    result = run_case(naive, further, (32, 1), CASE, seed=3, device_functions={})
    assert not result.ok and "out-of-bounds load from" in result.error and "img" in result.error


def test_a_gather_from_an_array_the_kernel_writes_is_still_refused(tmp_path):
    naive = _kernel(tmp_path, WRITTEN_GATHER, "bump")
    with pytest.raises(CompileError, match="cannot size array 'img'"):
        run_case(naive, naive, (32, 1), Case(sizes={"n": 45}, global_space=(45, 1)), seed=3, device_functions={})


def test_run_kernel_measures_the_words_an_array_is_read_at(tmp_path):
    naive = _kernel(tmp_path, """
        __global__ void pick(const int *at, const float *src, float *out)
        {
            int i = threadIdx.x;
            out[i] = src[at[i] * 2 + 1];
        }
    """, "pick")
    at = np.array([3, 0, 5, 1], np.int32)
    args = {"at": at, "src": np.ones(64, np.float32), "out": np.zeros(4, np.float32)}
    stats = run_kernel(naive, (1, 1), (4, 1), args, measure_reach=frozenset({"src", "at"}))
    assert stats.reach == {"src": (1, 12), "at": (0, 4)}
