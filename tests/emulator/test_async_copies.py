"""The emulator's cp.async (`__pipeline_memcpy_async`) of several elements: one aligned 16-byte vector, the
bytes past the source's end zero-filled (`16 - valid * sizeof(T)`), landing at the wait; a misaligned
vector is an error."""
from __future__ import annotations

import numpy as np
import pytest

from gpgpu_opt.emulator import EmulationError, run_kernel
from gpgpu_opt.frontend.cuda_c import parse_c
from gpgpu_opt.rewriting.cbuild import parse_statements

BODY = """
__shared__ double tile[64];
const int valid = min(2, n - 2 * threadIdx.x);
__pipeline_memcpy_async(&tile[2 * threadIdx.x + SHIFT], &src[valid > 0 ? 2 * threadIdx.x : 0], 16, 16 - max(0, valid) * sizeof(double));
__pipeline_commit();
__pipeline_wait_prior(0);
__syncthreads();
dst[2 * threadIdx.x] = tile[2 * threadIdx.x + SHIFT];
dst[2 * threadIdx.x + 1] = tile[2 * threadIdx.x + 1 + SHIFT];
"""


def _kernel(shift: int):
    f = parse_c("void k(const double *src, double *dst, int n) { }", "<t>").ext[-1]
    f.body.block_items = parse_statements(BODY.replace("SHIFT", str(shift)))
    return f


def test_a_vector_copy_moves_its_valid_elements_and_zero_fills_the_rest():
    src = np.arange(1.0, 8.0)                   # 7 elements: the 4th thread's vector has one
    dst = np.full(8, np.nan)
    run_kernel(_kernel(0), (1, 1, 1), (4, 1, 1), {"src": src, "dst": dst, "n": 7})
    assert dst.tolist() == [1, 2, 3, 4, 5, 6, 7, 0]


def test_a_misaligned_vector_copy_is_an_error():
    with pytest.raises(EmulationError, match="not 16-byte aligned"):
        run_kernel(_kernel(1), (1, 1, 1), (4, 1, 1), {"src": np.arange(8.0), "dst": np.zeros(10), "n": 8})


HALVES = """
__shared__ __half tile[64];
const int valid = min(8, n - 8 * threadIdx.x);
__pipeline_memcpy_async(&tile[8 * threadIdx.x], &src[valid > 0 ? 8 * threadIdx.x : 0], BYTES, BYTES - max(0, valid) * sizeof(__half));
__pipeline_commit();
__pipeline_wait_prior(0);
__syncthreads();
for (int e = 0; e < 8; e++)
    dst[8 * threadIdx.x + e] = __half2float(tile[8 * threadIdx.x + e]);
"""


def _half_kernel(size: int):
    f = parse_c("void k(const __half *src, float *dst, int n) { }", "<t>").ext[-1]
    f.body.block_items = parse_statements(HALVES.replace("BYTES", str(size)))
    return f


def test_a_copy_of_eight_halves_moves_its_valid_elements():
    src = np.arange(1.0, 21.0).astype(np.float16)   # 20 halves: the third thread's vector has four
    dst = np.full(24, np.nan, np.float32)
    run_kernel(_half_kernel(16), (1, 1, 1), (3, 1, 1), {"src": src, "dst": dst, "n": 20})
    assert dst.tolist() == list(range(1, 21)) + [0] * 4


def test_a_copy_of_fewer_than_4_bytes_is_refused():
    """cp.async moves 4, 8 or 16 bytes: one half cannot be copied so."""
    with pytest.raises(EmulationError, match="__pipeline_memcpy_async of 2 bytes"):
        run_kernel(_half_kernel(2), (1, 1, 1), (1, 1, 1), {"src": np.ones(8, np.float16),
                                                          "dst": np.zeros(8, np.float32), "n": 1})
