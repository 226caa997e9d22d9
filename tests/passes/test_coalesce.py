"""The coalesce pass: the shapes it produces (paper Fig. 3a/3b, transpose), what it leaves alone and why,
that every output compiles, and that the optimized kernels compute what the naive ones do (emulator)."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.targets import get_target
from tests.nvcc_batch import build_device_only

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "inputs"
PASSES = ["normalize", "coalesce"]


# -- helpers --------------------------------------------------------------------------------------------
class Compiled:
    def __init__(self, path: Path, target: str, bindings=None, block=None):
        self.path = path
        self.diagnostics = Diagnostics(quiet=True)
        self.program = load_program(str(path), diagnostics=self.diagnostics)
        self.result = compile_with(self.program, get_target(target), PASSES, self.diagnostics,
                                      bindings or {}, block_override=block)

    def kernel(self, name: str):
        return next(k for k in self.result.kernels if k.naive.name == name)

    def text(self, name: str) -> str:
        return kernel_source(self.kernel(name).optimized.funcdef)

    def decisions(self, name: str, action: str | None = None) -> list:
        return [d for d in self.kernel(name).context.log.decisions
                if d.pass_name == "coalesce" and (action is None or d.action == action)]

    def applied_subjects(self, name: str) -> set[str]:
        return {d.subject for d in self.decisions(name, "applied")}


def compile_input(name: str, target: str, **kw) -> Compiled:
    return Compiled(INPUTS / name, target, **kw)


def compile_source(tmp_path: Path, source: str, target: str, **kw) -> Compiled:
    path = tmp_path / "kernel.cu"
    path.write_text(textwrap.dedent(source))
    return Compiled(path, target, **kw)


def assert_compiles(c: Compiled, tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        return
    out = tmp_path / f"out_{abs(hash(c.result.output)) % 10**8}.cu"
    out.write_text(c.result.output)
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", "/dev/null", f"-I{c.path.parent}", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


_DTYPES = {"float": np.float32, "double": np.float64, "int": np.int32}


def emulate(c: Compiled, name: str, sizes: dict, extents: dict, global_space: tuple[int, int],
            values: dict | None = None, seed: int = 0) -> None:
    """Naive (naive block) and optimized (its LaunchConfig) kernels on the same random inputs (never
    zero), written arrays poisoned with NaN; arrays sized exactly to what the naive kernel reads, so any
    extra read is an out-of-bounds error in the emulator; outputs compared with rtol 1e-4."""
    emulator = pytest.importorskip("gpgpu_opt.emulator")
    kr = c.kernel(name)
    naive, opt = kr.naive, kr.optimized
    nb = kr.context.facts.naive_block
    rng = np.random.default_rng(seed)
    written = {a for a in _written(naive)}
    base = {}
    for p in naive.params:
        if p.is_pointer:
            dtype = _DTYPES[p.base_type]
            n = extents[p.name]
            if values and p.name in values:
                base[p.name] = np.asarray(values[p.name], dtype=dtype)
            elif p.name in written and p.name not in _read(naive):
                base[p.name] = np.full(n, np.nan, dtype)
            else:
                base[p.name] = (rng.uniform(0.5, 1.5, n) * rng.choice([-1, 1], n)).astype(dtype)
        else:
            base[p.name] = sizes[p.name]
    gx, gy = global_space
    runs = []
    for kernel, block, per in ((naive, nb, nb),
                               (opt, *((opt.launch.block, opt.launch.outputs_per_block) if opt.launch
                                       else (nb, nb)))):
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in base.items()}
        emulator.run_kernel(kernel, (math.ceil(gx / per[0]), math.ceil(gy / per[1])), block, args)
        runs.append(args)
    for out in written:
        np.testing.assert_allclose(runs[1][out], runs[0][out], rtol=1e-4, equal_nan=True, err_msg=out)
        assert not np.isnan(runs[0][out]).all(), "the naive kernel wrote nothing"


def _written(kernel):
    from gpgpu_opt.analysis.accesses import collect_accesses
    return {a.array for a in collect_accesses(kernel) if a.mode == "write"}


def _read(kernel):
    from gpgpu_opt.analysis.accesses import collect_accesses
    return {a.array for a in collect_accesses(kernel) if a.mode == "read"}


def launch(c: Compiled, name: str):
    cfg = c.kernel(name).optimized.launch
    return None if cfg is None else (cfg.block, cfg.outputs_per_block)


# -- the paper's shapes -------------------------------------------------------------------------------
def test_mm_g80_is_figure_3a(tmp_path):
    c = compile_input("mm.cu", "g80")
    out = c.text("mm")
    assert "__shared__ float tile_A[16];" in out
    assert re.search(r"for \(int k0 = 0; k0 < n; k0 \+= 16\)", out)
    assert "tile_A[threadIdx.x] = " in out and "A[row * n + k0 + threadIdx.x]" in out
    assert re.search(r"for \(int k = k0; k < k0 \+ 16 && k < n; k\+\+\)", out)
    assert "tile_A[k - k0]" in out
    assert "B[k * n + col]" in out and "tile_B" not in out          # B is coalesced: read directly
    assert out.count("__syncthreads();") == 2
    assert launch(c, "mm") == ((16, 1), (16, 1))                      # 16x1 rows of the 2-D space
    assert c.applied_subjects("mm") == {"A[row * n + k]", "launch"}
    assert launch(c, "scale_matrix") is None
    assert_compiles(c, tmp_path)


def test_mv_g80_is_figure_3b(tmp_path):
    c = compile_input("mv.cu", "g80")
    out = c.text("mv")
    assert "__shared__ float tile_A[16][17];" in out
    assert "__shared__ float tile_x[16];" in out
    assert re.search(r"for \(int rr = 0; rr < 16; rr\+\+\)\s+tile_A\[rr\]\[threadIdx.x\] = ", out)
    assert "A[(blockIdx.x * 16 + rr) * cols + c0 + threadIdx.x]" in out
    assert "tile_A[threadIdx.x][c - c0]" in out                     # read back transposed
    assert "tile_x[threadIdx.x] = " in out and "tile_x[c - c0]" in out
    assert out.count("__syncthreads();") == 2
    assert launch(c, "mv") == ((16, 1), (16, 1))
    assert_compiles(c, tmp_path)


def test_mv_sm90_tile_is_conflict_free(tmp_path):
    c = compile_input("mv.cu", "sm_90")
    out = c.text("mv")
    m = re.search(r"__shared__ float tile_A\[(\d+)\]\[(\d+)\];", out)
    assert m, out
    rows, stride = int(m.group(1)), int(m.group(2))
    block, _ = launch(c, "mv")
    assert rows == block[0] and stride == 33                          # 32 columns + 1: odd stride
    assert "tile_x" not in out                                       # x[c] is a broadcast on sm_90
    assert re.search(r"c0 \+= 32", out)
    reason = next(d.reason for d in c.decisions("mv", "applied") if d.subject.startswith("A["))
    assert "conflict-free on 32 banks" in reason
    assert_compiles(c, tmp_path)


@pytest.mark.parametrize("target,w", [("g80", 16), ("gt200", 16)])
def test_transpose_swaps_x_and_y(tmp_path, target, w):
    """Half-warp requests (the paper's GPUs): a W x W block, one thread per output."""
    c = compile_input("transpose.cu", target)
    out = c.text("transpose")
    assert f"__shared__ float tile_in[{w}][{w + 1}];" in out
    assert "tile_in[threadIdx.y][threadIdx.x] = " in out
    assert f"in[(blockIdx.x * {w} + threadIdx.y) * cols + blockIdx.y * {w} + threadIdx.x]" in out
    assert "out[y * rows + x] = tile_in[threadIdx.x][threadIdx.y];" in out
    assert out.count("__syncthreads();") == 1
    assert launch(c, "transpose") == ((w, w), (w, w))
    assert_compiles(c, tmp_path)


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "fermi"])
def test_transpose_eight_rows_per_thread_on_warp_wide_targets(tmp_path, target):
    """A tiled transpose with twice NVIDIA's tile: 64x8 threads per 64x64 outputs, then 8 rows of outputs per
    thread, 8 apart, each with the naive guard. These targets prefer 16-byte accesses: blocks whose tile is
    inside the matrix, with rows that start 16-byte aligned (tested at run time), load it with one float4
    per thread and row (16 threads per row, 2 passes of 32 rows); the others in 8 passes of 8 rows."""
    c = compile_input("transpose.cu", target)
    out = c.text("transpose")
    assert "__shared__ float tile_in[64][65];" in out
    assert re.search(r"if \(cols % 4 == 0 && \(\(\(size_t\) in\) & 15\) == 0 && blockIdx.x \* 64 \+ 63 < rows "
                     r"&& blockIdx.y \* 64 \+ 63 < cols\) \{\s+const int tid = threadIdx.y \* 64 \+ threadIdx.x;\s+"
                     r"const int vrow = tid / 16;\s+const int vcol = tid % 16 \* 4;\s+#pragma unroll\s+"
                     r"for \(int rr = 0; rr < 64; rr \+= 32\) \{\s+const float4 v = \*\(\(const float4 \*\) "
                     r"\(&in\[\(blockIdx.x \* 64 \+ rr \+ vrow\) \* cols \+ blockIdx.y \* 64 \+ vcol\]\)\);\s+"
                     r"tile_in\[rr \+ vrow\]\[vcol\] = v.x;\s+tile_in\[rr \+ vrow\]\[vcol \+ 1\] = v.y;\s+"
                     r"tile_in\[rr \+ vrow\]\[vcol \+ 2\] = v.z;\s+tile_in\[rr \+ vrow\]\[vcol \+ 3\] = v.w;\s+\}\s+"
                     r"\} else \{\s+#pragma unroll\s+for \(int rr = 0; rr < 64; rr \+= 8\)\s+"
                     r"tile_in\[rr \+ threadIdx.y\]\[threadIdx.x\] = ", out), out
    assert "in[(blockIdx.x * 64 + rr + threadIdx.y) * cols + blockIdx.y * 64 + threadIdx.x]" in out
    assert "int y0 = blockIdx.y * 64 + threadIdx.y;" in out
    assert re.search(r"__syncthreads\(\);\s+// coalesce: each thread computes 8 rows[^\n]*\s+#pragma unroll\s+"
                     r"for \(int r = 0; r < 64; r \+= 8\) \{\s+int y = y0 \+ r;\s+if \(x < rows && y < cols\)\s+"
                     r"out\[y \* rows \+ x\] = tile_in\[threadIdx.x\]\[threadIdx.y \+ r\];\s+\}\s+\}", out), out
    assert "blockDim.y" not in out
    assert out.count("__syncthreads();") == 1
    assert launch(c, "transpose") == ((64, 8), (64, 64))
    reason = next(d.reason for d in c.decisions("transpose", "applied") if d.subject == "launch")
    assert "8 rows per thread, 8 apart" in reason
    staged = next(d.reason for d in c.decisions("transpose", "applied") if d.subject == "in[x * cols + y]")
    assert "one 16-byte load, tested at run time" in staged
    assert_compiles(c, tmp_path)


def test_mm_sm90_untouched(tmp_path):
    c = compile_input("mm.cu", "sm_90")
    assert launch(c, "mm") is None
    assert "__shared__" not in c.text("mm")
    assert not c.decisions("mm", "applied")


def test_reduction_left_alone():
    c = compile_input("reduction.cu", "g80")
    assert launch(c, "reduction") is None
    assert "__shared__" not in c.text("reduction")


GATHER = """
__global__ void gather(const float *A, const float *src, const int *perm, float *out, int n, int m)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {
        float s = 0.0f;
        for (int i = 0; i < m; i++)
            s += A[r * m + i] * src[perm[i]];
        out[r] = s;
    }
}
"""


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_unanalysable_access_skipped_others_staged(tmp_path, target):
    c = compile_source(tmp_path, GATHER, target)
    skipped = [d for d in c.decisions("gather", "skipped") if d.subject.startswith("src[")]
    assert skipped and "cannot be analysed" in skipped[0].reason
    assert any("note: coalesce: src[" in str(n) for n in c.diagnostics.notes)
    assert "A[r * m + i]" in c.applied_subjects("gather")
    out = c.text("gather")
    assert "src[" in out and "tile_src" not in out
    n, m = 37, 45
    perm = np.random.default_rng(3).integers(0, 50, m)
    emulate(c, "gather", {"n": n, "m": m}, {"A": n * m, "src": 50, "perm": m, "out": n}, (256, 1),
            values={"perm": perm})


# -- loop-index forms: unroll factor W/gcd(m, W), steps, remainders ----------------------------------------
STRIDED = """
__global__ void strided(const float *A, float *out, int n, int len, int pitch)
{{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) {{
        float s = 0.0f;
        for (int i = {start}; i < len; i += {step})
            s += A[{row}{m} * i + {c}];
        out[r] = s;
    }}
}}
"""


def _strided(tmp_path, target, m, c_off, step, start=0, row=True):
    src = STRIDED.format(m=m, c=c_off, step=step, start=start, row="r * pitch + " if row else "")
    return compile_source(tmp_path, src, target)


@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("m,step", [(1, 1), (2, 1), (3, 1), (1, 2), (1, 3), (2, 3)])
def test_loop_index_unroll_factor(tmp_path, target, m, step):
    w = get_target(target).request_threads
    c = _strided(tmp_path, target, m, 1, step)
    out = c.text("strided")
    u = w // math.gcd(m * step, w)
    assert f"i0 += {u * step})" in out, out
    assert re.search(rf"__shared__ float tile_A\[\d+\]\[{m * step * u}\d*\];|__shared__ float tile_A\[\d+\]\[{m * step * u + 1}\];", out) \
        or f"[{m * step * u}]" in out, out
    reason = next(d.reason for d in c.decisions("strided", "applied") if d.subject.startswith("A["))
    assert f"unrolled by {u}" in reason and f"W/gcd({m * step}, W) = {u}" in reason


@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("m,c_off,step,start,length", [(1, 0, 1, 0, 45), (2, 1, 1, 0, 37), (3, 2, 1, 0, 29),
                                                        (1, 0, 2, 1, 45), (2, 0, 3, 2, 50), (1, 3, 1, 0, 64)])
def test_loop_index_equivalent(tmp_path, target, m, c_off, step, start, length):
    c = _strided(tmp_path, target, m, c_off, step, start)
    assert launch(c, "strided") is not None
    n = 37
    pitch = m * length + c_off + 3
    last = max(i for i in range(start, length, step))
    extent = (n - 1) * pitch + m * last + c_off + 1                   # exactly what the naive kernel reads
    emulate(c, "strided", {"n": n, "len": length, "pitch": pitch}, {"A": extent, "out": n}, (256, 1))


@pytest.mark.parametrize("m", [2, 3])
def test_loop_index_without_thread_index_g80(tmp_path, m):
    """`A[m*i + n]` read by every thread (a broadcast, uncoalesced on g80): a 1-D tile of lcm(m, 16)."""
    c = _strided(tmp_path, "g80", m, 1, 1, row=False)
    out = c.text("strided")
    u = 16 // math.gcd(m, 16)
    assert f"__shared__ float tile_A[{m * u}];" in out
    assert f"i0 += {u})" in out
    n, length = 37, 29
    emulate(c, "strided", {"n": n, "len": length, "pitch": 0}, {"A": m * (length - 1) + 2, "out": n}, (256, 1))
    assert launch(_strided(tmp_path, "sm_90", m, 1, 1, row=False), "strided") is None   # broadcast


def test_divisible_trip_count_is_fully_unrolled(tmp_path):
    c = compile_source(tmp_path, STRIDED.format(m=1, c=0, step=1, start=0, row="r * pitch + ")
                       .replace("i < len", "i < 64"), "g80")
    out = c.text("strided")
    assert "#pragma unroll" in out and "i < i0 + 16; i += 1)" in out and "&& i < 64" not in out


# -- guards, early exits, placement -------------------------------------------------------------------------
MV_RETURN = """
__global__ void mvr(const float *A, const float *x, float *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    float sum = 0;
    for (int c = 0; c < cols; c++)
        sum += A[r * cols + c] * x[c];
    y[r] = sum;
}
"""

MM_INNER_GUARD = """
__global__ void mmg(const float *A, const float *B, float *C, int n)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    for (int k = 0; k <= n - 1; k++)
        if (row < n && col < n)
            sum += A[row * n + k] * B[k * n + col];
    if (row < n && col < n)
        C[row * n + col] = sum;
}
"""

TRANSPOSE_SUM = """
__global__ void tsum(const float *in, const float *w, float *out, int rows, int cols, int m)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < rows && y < cols) {
        float s = 0.0f;
        for (int j = 0; j < m; j++)
            s += in[x * cols + y] * w[j];
        out[y * rows + x] = s;
    }
}
"""


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_early_return_guard(tmp_path, target):
    c = compile_source(tmp_path, MV_RETURN, target)
    out = c.text("mvr")
    assert "return" not in out and "tile_A" in out
    emulate(c, "mvr", {"rows": 40, "cols": 45}, {"A": 40 * 45, "x": 45, "y": 40}, (256, 1))


@pytest.mark.parametrize("target", ["g80"])
def test_guard_inside_loop_and_le_bound(tmp_path, target):
    c = compile_source(tmp_path, MM_INNER_GUARD, target)
    assert "tile_A" in c.text("mmg")
    for n in (48, 37):
        emulate(c, "mmg", {"n": n}, {"A": n * n, "B": n * n, "C": n * n}, (48, 48))


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_thread_index_tile_hoisted_out_of_loop(tmp_path, target):
    c = compile_source(tmp_path, TRANSPOSE_SUM, target)
    out = c.text("tsum")
    assert ("tile_in[rr + threadIdx.y][threadIdx.x] = " if target == "sm_90"
            else "tile_in[threadIdx.y][threadIdx.x] = ") in out
    assert "0 < m" in out                                   # loaded only if the naive loop runs
    emulate(c, "tsum", {"rows": 50, "cols": 70, "m": 5}, {"in": 50 * 70, "w": 5, "out": 50 * 70}, (64, 80))
    emulate(c, "tsum", {"rows": 50, "cols": 70, "m": 0}, {"in": 1, "w": 1, "out": 50 * 70}, (64, 80))


def test_hoisted_tile_with_thread_dependent_inner_loop_start(tmp_path):
    """The predicate evaluates `for (j = x; j < x + m; ...)` for the thread that reads the element."""
    src = TRANSPOSE_SUM.replace("for (int j = 0; j < m; j++)", "for (int j = x; j < x + m; j++)") \
        .replace("w[j]", "w[j - x]")
    c = compile_source(tmp_path, src, "sm_90")
    assert "in[x * cols + y]" in c.applied_subjects("tsum")
    emulate(c, "tsum", {"rows": 50, "cols": 70, "m": 1}, {"in": 50 * 70, "w": 1, "out": 50 * 70}, (64, 80))


def test_no_doubled_or_divergent_barriers(tmp_path):
    from gpgpu_opt.check.sanity import check_kernel
    for src, name in ((MV_RETURN, "mvr"), (MM_INNER_GUARD, "mmg"), (TRANSPOSE_SUM, "tsum")):
        for target in ("g80", "sm_90"):
            c = compile_source(tmp_path, src, target)
            check_kernel(c.kernel(name).optimized.funcdef)
            assert "__syncthreads();\n    __syncthreads();" not in c.text(name)


# -- several rows of outputs per thread ------------------------------------------------------------------------
TRANSPOSE_DIRECT = """
__global__ void td(const float *in, float *out, int rows, int cols)
{
    if ((blockIdx.x * blockDim.x + threadIdx.x) < rows && (blockIdx.y * blockDim.y + threadIdx.y) < cols)
        out[(blockIdx.y * blockDim.y + threadIdx.y) * rows + blockIdx.x * blockDim.x + threadIdx.x] =
            in[(blockIdx.x * blockDim.x + threadIdx.x) * cols + blockIdx.y * blockDim.y + threadIdx.y];
}
"""

TRANSPOSE_RETURN = """
__global__ void tr(const float *a, const float *b, float *out, float *out2, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = threadIdx.y + blockDim.y * blockIdx.y;
    int k = rows * 2;
    int yy = 2 * y;
    float s = 2.0f;
    if (x >= rows || y >= cols)
        return;
    int o = y * rows + x;
    s *= a[x * cols + y] + b[x * cols + y];
    out[o] = s;
    out2[y * k + x] = (float)yy;
}
"""

TRANSPOSE_STORE_FIRST = """
__global__ void tb(const float *in, float *out, float *flag, int rows, int cols)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < rows && y < cols)
        flag[y * rows + x] = 1.0f;
    if (x < rows && y < cols)
        out[y * rows + x] = in[x * cols + y];
}
"""


@pytest.mark.parametrize("rows,cols", [(50, 70), (33, 97), (64, 32), (5, 3)])
def test_rows_per_thread_equivalent(tmp_path, rows, cols):
    """Direct builtins (blockDim.y becomes the outputs' height, in the loads too), an early return, two
    tiles, per-row state (`s`, `o`, `yy`) and row-independent declarations (`k`)."""
    space = (-(-rows // 16) * 16, -(-cols // 16) * 16)
    c = compile_source(tmp_path, TRANSPOSE_DIRECT, "sm_90")
    assert launch(c, "td") == ((64, 8), (64, 64))
    assert "blockDim.y" not in re.sub(r"//.*", "", c.text("td"))
    emulate(c, "td", {"rows": rows, "cols": cols}, {"in": rows * cols, "out": rows * cols}, space)
    c = compile_source(tmp_path, TRANSPOSE_RETURN, "sm_90")
    assert launch(c, "tr") == ((64, 8), (64, 64))
    out = c.text("tr")
    assert "int k = rows * 2;" in out.split("__syncthreads")[0]             # the same in every row
    loop = out.split("__syncthreads")[1]
    assert "int y = y0 + r;" in loop and "int yy = 2 * y;" in loop and "float s = 2.0f;" in loop
    n = rows * cols
    emulate(c, "tr", {"rows": rows, "cols": cols}, {"a": n, "b": n, "out": n, "out2": (cols - 1) * 2 * rows + rows},
            space)


def test_rows_per_thread_not_used_when_statements_precede_the_load(tmp_path):
    c = compile_source(tmp_path, TRANSPOSE_STORE_FIRST, "sm_90")
    assert launch(c, "tb") == ((32, 32), (32, 32))
    reason = next(d.reason for d in c.decisions("tb", "applied") if d.subject == "launch")
    assert "not 8 rows per thread" in reason and "would move after the tile load" in reason
    emulate(c, "tb", {"rows": 50, "cols": 70}, {"in": 3500, "out": 3500, "flag": 3500}, (64, 80))


def test_rows_per_thread_barriers(tmp_path):
    from gpgpu_opt.check.sanity import check_kernel
    for src, name in ((TRANSPOSE_DIRECT, "td"), (TRANSPOSE_RETURN, "tr"), (TRANSPOSE_SUM, "tsum")):
        c = compile_source(tmp_path, src, "sm_90")
        check_kernel(c.kernel(name).optimized.funcdef)
        loop = c.text(name).split("for (int r = 0;")[1]
        assert "__syncthreads" not in loop
        assert c.text(name).count("__syncthreads();") == 1


# -- what is not staged, and why --------------------------------------------------------------------------------
def _reasons(c, name):
    return " | ".join(d.reason for d in c.decisions(name, "skipped"))


def test_lower_bound_guard_on_unindexed_axis_is_skipped(tmp_path):
    src = MM_INNER_GUARD.replace("if (row < n && col < n)\n            sum", "if (row < n && col < n && col > 2)\n            sum")
    c = compile_source(tmp_path, src, "g80")
    assert "upper bound" in _reasons(c, "mmg")
    assert "tile_A" not in c.text("mmg")


def test_thread_dependent_inner_loop_is_not_assumed_to_run(tmp_path):
    """`v[y]` is hoisted out of `for (j < x)`: the block's first thread along x runs no iteration, so it
    cannot stand for the others; the read stays global (never a tile element that reads 0)."""
    src = """
    __global__ void tri(const float *v, float *out, int n, int m)
    {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        int y = blockIdx.y * blockDim.y + threadIdx.y;
        if (x < n && y < m) {
            float s = 0.0f;
            for (int j = 0; j < x; j++)
                s += v[y] * (float)j;
            out[y * n + x] = s;
        }
    }
    """
    c = compile_source(tmp_path, src, "g80")
    assert "upper bound" in _reasons(c, "tri")
    emulate(c, "tri", {"n": 20, "m": 7}, {"v": 7, "out": 140}, (32, 16))


def test_written_array_is_not_staged(tmp_path):
    src = """
    __global__ void upd(float *A, int n, int m)
    {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < n) {
            float s = 0.0f;
            for (int i = 0; i < m; i++)
                s += A[r * m + i];
            A[r * m] = s;
        }
    }
    """
    c = compile_source(tmp_path, src, "g80")
    assert "also written" in _reasons(c, "upd")
    assert launch(c, "upd") is None


@pytest.mark.parametrize("restrict", ["", "__restrict__ "])
def test_stores_in_the_loop_need_restrict(tmp_path, restrict):
    src = f"""
    __global__ void scale(const float *{restrict}A, float *{restrict}B, int n, int m)
    {{
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < n)
            for (int i = 0; i < m; i++)
                B[r * m + i] = 2.0f * A[r * m + i];
    }}
    """
    c = compile_source(tmp_path, src, "g80")
    if restrict:
        assert "A[r * m + i]" in c.applied_subjects("scale")
        emulate(c, "scale", {"n": 37, "m": 45}, {"A": 37 * 45, "B": 37 * 45}, (256, 1))
    else:
        assert "may alias" in _reasons(c, "scale")


def test_block_dependent_kernel_left_alone(tmp_path):
    src = """
    __global__ void flag(const float *A, float *out, int *seen, int n, int m)
    {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < n) {
            float s = 0.0f;
            for (int i = 0; i < m; i++)
                s += A[r * m + i];
            out[r] = s;
        }
        if (threadIdx.x == 0)
            seen[blockIdx.x] = 1;
    }
    """
    c = compile_source(tmp_path, src, "g80")
    assert launch(c, "flag") is None
    assert "block shape" in _reasons(c, "flag")


def test_no_reuse_is_skipped(tmp_path):
    src = """
    __global__ void strided_copy(const float *in, float *out, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
            out[i] = in[3 * i];
    }
    """
    c = compile_source(tmp_path, src, "sm_90")
    assert "no other thread or iteration" in _reasons(c, "strided_copy")
    assert launch(c, "strided_copy") is None


def test_unguarded_kernel_keeps_exact_thread_space(tmp_path):
    """vv/tmv have no guard: the new block must tile the naive one (16 | 256), never overshoot."""
    c = compile_input("tmv.cu", "g80")
    block, per = launch(c, "tmv")
    assert c.kernel("tmv").context.facts.naive_block[0] % block[0] == 0
    src = TRANSPOSE_SUM.replace("if (x < rows && y < cols) {", "{")
    c = compile_source(tmp_path, src, "sm_90", block=(16, 16))
    cfg = launch(c, "tsum")
    assert cfg is None or all(n % b == 0 for n, b in zip((16, 16), cfg[0]))


# -- whole inputs: compile and compute what the naive kernels do ----------------------------------------------
@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("n", [48, 37])
def test_mm_equivalent(target, n):
    c = compile_input("mm.cu", target)
    g = -(-n // 16) * 16
    emulate(c, "mm", {"n": n}, {"A": n * n, "B": n * n, "C": n * n}, (g, g))


@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("rows,cols", [(40, 45), (64, 64)])
def test_mv_equivalent(target, rows, cols):
    c = compile_input("mv.cu", target)
    emulate(c, "mv", {"rows": rows, "cols": cols}, {"A": rows * cols, "x": cols, "y": rows}, (256, 1))


@pytest.mark.parametrize("target", ["g80", "sm_90"])
@pytest.mark.parametrize("rows,cols", [(50, 70), (64, 32), (33, 97)])
def test_transpose_equivalent(target, rows, cols):
    c = compile_input("transpose.cu", target)
    emulate(c, "transpose", {"rows": rows, "cols": cols}, {"in": rows * cols, "out": rows * cols},
            (-(-rows // 16) * 16, -(-cols // 16) * 16))


@pytest.mark.parametrize("target", ["g80", "sm_90"])
def test_strsm_equivalent(tmp_path, target):
    c = compile_input("strsm.cu", target)
    n, m = 37, 45
    emulate(c, "strsm", {"n": n, "m": m}, {"L": n * n, "B": n * m, "X": n * m}, (256, 1))


def _all_outputs(tmp_path):
    """Every input and every test kernel, compiled for both targets."""
    sources = [GATHER, MV_RETURN, MM_INNER_GUARD, TRANSPOSE_SUM, TRANSPOSE_DIRECT, TRANSPOSE_RETURN,
               TRANSPOSE_STORE_FIRST,
               STRIDED.format(m=1, c=0, step=1, start=0, row="r * pitch + ").replace("i < len", "i < 64")]
    sources += [STRIDED.format(m=m, c=1, step=step, start=0, row=row)
                for m, step, row in ((2, 1, ""), (3, 1, "r * pitch + "), (2, 3, "r * pitch + "))]
    sources.append("""
    __global__ void scale(const float *__restrict__ A, float *__restrict__ B, int n, int m)
    {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < n)
            for (int i = 0; i < m; i++)
                B[r * m + i] = 2.0f * A[r * m + i];
    }
    """)
    for target in ("g80", "sm_90"):
        for p in sorted(INPUTS.glob("*.cu")):
            yield compile_input(p.name, target)
        for k, src in enumerate(sources):
            d = tmp_path / f"{target}_{k}"
            d.mkdir()
            yield compile_source(d, src, target)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_every_output_compiles(tmp_path):
    files, compiled = {}, {}
    for k, c in enumerate(_all_outputs(tmp_path)):
        if not any(r.optimized.launch for r in c.result.kernels):
            continue                      # nothing staged: the output is the naive code after normalize
        out = tmp_path / f"out{k}.cu"
        out.write_text(c.result.output)
        files[out], compiled[out] = [f"-I{c.path.parent}"], c
    staged = 0
    for out, error in build_device_only(files, tmp_path).items():
        assert error is None, f"{compiled[out].path}: {error}"
        staged += "__shared__" in compiled[out].result.output
    assert staged >= 16
