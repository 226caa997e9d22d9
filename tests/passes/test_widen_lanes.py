"""Widening through what differs between a thread's V lanes (passes/vectorize/lanes.py): `if`s on x lowered
lane by lane, x-dependent statements before the guard, gathers through read-only index arrays, and a note
for each kernel it still refuses. Every rewrite goes through compile's emulated check (the pipeline's
validation, at sizes no tile divides), is emulated again here at more sizes, and is built with nvcc."""
from __future__ import annotations


import pytest

from gpgpu_opt.codegen import kernel_source
from tests.passes.vectorize_kit import assert_builds, assert_equivalent, compile_source, vectorize_notes

#: An image relaxation in the style of an anisotropic diffusion step: a row and column from the linear index
#: (% and /, patched at the column edge by an `if`), neighbours gathered through index arrays nothing writes,
#: a coefficient clamped to [0, 1], one element per thread under `if (e < total)`.
RELAX = """
#define TILE 16
#define BLOCK 256
__global__ void relax(float lambda, int rows, long total, const int *above, const int *below, const int *left,
                      const float *img, float *gn, float *gs, float *coef)
{
    int bx = blockIdx.x;
    int tx = threadIdx.x;
    int e = bx * BLOCK + tx;
    int r;
    int c;
    int q = e % TILE;
    float centre, n_d, s_d, w_d, k;

    r = (e + 1) % rows - 1;
    c = (e + 1) / rows;
    if ((e + 1) % rows == 0) {
        r = rows - 1;
        c = c - 1;
    }
    if (e < total) {
        centre = img[e];
        n_d = img[above[e]] - centre;
        s_d = img[below[e]] - centre;
        w_d = img[left[q]] - centre;
        k = (n_d * n_d + s_d * s_d + w_d) / (centre * centre + 1.0f) + 0.01f * (r - c);
        if (k < 0) {
            k = 0;
        } else if (k > 1) {
            k = 1;
        }
        gn[e] = n_d;
        gs[e] = s_d;
        coef[e] = k * lambda;
    }
}

void step(int rows, int cols)
{
    long total = (long) rows * cols;
    int *above, *below, *left;
    float *img, *gn, *gs, *coef;
    cudaMalloc(&above, total * sizeof(int));
    cudaMalloc(&below, total * sizeof(int));
    cudaMalloc(&left, TILE * sizeof(int));
    cudaMalloc(&img, total * sizeof(float));
    cudaMalloc(&gn, total * sizeof(float));
    cudaMalloc(&gs, total * sizeof(float));
    cudaMalloc(&coef, total * sizeof(float));
    relax<<<(total + BLOCK - 1) / BLOCK, BLOCK>>>(0.5f, rows, total, above, below, left, img, gn, gs, coef);
}
"""

#: A store along x under a lane's own condition (with a declaration of that lane), next to a store under a
#: condition every lane shares.
SPLIT_SIGNS = """
__global__ void split_signs(const float *a, float *pos, float *neg, float scale, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i];
        if (v > 0.0f) {
            float t = v * 2.0f;
            pos[i] = t;
        } else
            neg[i] = -v;
        if (scale > 1.0f)
            pos[i] = pos[i] * scale;
    }
}

void run(int n, float scale)
{
    float *a, *pos, *neg;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&pos, n * sizeof(float));
    cudaMalloc(&neg, n * sizeof(float));
    split_signs<<<(n + 127) / 128, 128>>>(a, pos, neg, scale, n);
}
"""


@pytest.fixture(scope="module")
def relax(tmp_path_factory):
    """Widened at the width asked for: a gather body is not widened otherwise (measured slower on an H100)."""
    return compile_source(tmp_path_factory, "relax", RELAX, vector_width=4)


@pytest.fixture(scope="module")
def split_signs(tmp_path_factory):
    return compile_source(tmp_path_factory, "split_signs", SPLIT_SIGNS)


# -- what is widened ----------------------------------------------------------------------------------------
def test_a_diffusion_step_with_a_prefix_clamps_and_gathers_is_widened(relax):
    """Before: "more control flow than one guard around straight-line statements". The row and column are
    int4s computed lane by lane, the edge patch and the clamp are one `if` per lane, the gathers read per
    lane, the stores along x are float4s."""
    (k,) = relax.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "int e = 4 * (blockIdx.x * blockDim.x + threadIdx.x);" in text
    assert "int4 r;" in text and "int4 q = make_int4(e % 16, (e + 1) % 16, (e + 2) % 16, (e + 3) % 16);" in text
    assert "r = make_int4((e + 1) % rows - 1, (e + 1 + 1) % rows - 1, " in text
    for lane, c in enumerate("xyzw"):
        shifted = f"e + {lane} + 1" if lane else "e + 1"
        assert f"if (({shifted}) % rows == 0) {{\n                r.{c} = rows - 1;\n                " \
               f"c.{c} = c.{c} - 1;\n            }}" in text
        assert f"if (k.{c} < 0) {{\n                k.{c} = 0;\n            }} else if (k.{c} > 1) {{" in text
    assert "centre = ((const float4 *) img)[e / 4];" in text
    assert "make_float4(img[above[e]], img[above[e + 1]], img[above[e + 2]], img[above[e + 3]])" in text
    assert "img[left[q.w]]" in text
    assert "((float4 *) coef)[e / 4] = make_float4(k.x * lambda, " in text
    # the scalar path runs the statements before the guard as written, per copy, ahead of the copy's guard
    assert "r = (e + k2 + 1) % rows - 1;" in text and "if (e + k2 < total) {" in text
    (applied,) = [n for n in vectorize_notes(k, "applied") if n.startswith("kernel: widened")]
    assert "coef[e], gn[e], gs[e], img[e] as 4-element vectors (float4)" in applied
    assert k.validation.status == "passed"


def test_the_widened_diffusion_step_matches_the_naive_one_at_ragged_sizes(relax):
    (k,) = relax.kernels
    assert "int4 r;" in kernel_source(k.optimized.funcdef)
    for rows, total in ((7, 45), (5, 130), (13, 13), (4, 64)):
        assert_equivalent(k, {"rows": rows, "total": total, "lambda": 0.5}, (total, 1), seed=11)


def test_the_widened_diffusion_step_builds(relax, tmp_path_factory):
    assert "int4 r;" in relax.output
    assert_builds(relax, tmp_path_factory)


def test_a_gather_body_is_widened_only_at_a_width_asked_for(tmp_path_factory):
    """Measured on an H100 (srad_v1's srad and srad2 at 4M and 16M threads), widened gathers ran at 0.92x to
    1.01x of the naive kernels: at no size a gain, so without --vector-width the kernel stays as written."""
    (k,) = compile_source(tmp_path_factory, "relax_unasked", RELAX).kernels
    assert k.optimized.launch is None and not any(d.pass_name == "vectorize" and d.action == "applied"
                                                  for d in k.context.log.decisions)
    (why,) = vectorize_notes(k, "skipped")
    assert why == ("kernel: not widened: a gather body (img[above[e]], img[below[e]], ... read lane by lane): "
                   "widened gathers ran at 0.92x to 1.01x of the naive kernel on an H100, even at 16M threads "
                   "(srad); --vector-width widens it")


def test_a_store_under_a_lanes_condition_is_that_lanes_scalar_store(split_signs, tmp_path_factory):
    """Before: "an 'if' at line 7". Each lane tests its own element and stores its own scalar (a lane's
    declaration stays a scalar of that lane); the `if` on a parameter stays one `if` around a float4 store."""
    (k,) = split_signs.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "if (v.y > 0.0f) {\n                float t = v.y * 2.0f;\n                pos[i + 1] = t;\n" \
           "            } else {\n                neg[i + 1] = -v.y;\n            }" in text
    assert text.count("if (scale > 1.0f) {") == 2            # the vector path's and the scalar copy's
    assert "((float4 *) pos)[i / 4] = make_float4(pos_val.x * scale, " in text
    assert k.validation.status == "passed"
    for n in (37, 6, 64):
        assert_equivalent(k, {"n": n, "scale": 1.5}, (n, 1), seed=11)
    assert_builds(split_signs, tmp_path_factory)


UNROLLED_ROWS = """
#define NV 3
__global__ void scale_rows(int n, const float *a, float *b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        #pragma unroll
        for (int j = 0; j < NV; j++)
            b[i + j * n] = 2.0f * a[i + j * n];
    }
}

void run(int n)
{
    float *a, *b;
    cudaMalloc(&a, NV * n * sizeof(float));
    cudaMalloc(&b, NV * n * sizeof(float));
    scale_rows<<<(n + 127) / 128, 128>>>(n, a, b);
}
"""


def test_a_pragma_stays_with_its_loop_in_both_paths(tmp_path_factory):
    """Before: "a Pragma statement at line 6" (Rodinia cfd's flux loop starts with `#pragma unroll`)."""
    result = compile_source(tmp_path_factory, "unrolled_rows", UNROLLED_ROWS)
    (k,) = result.kernels
    text = kernel_source(k.optimized.funcdef)
    assert "if (i + 3 < n && n % 4 == 0) {\n            #pragma unroll\n" \
           "            for (int j = 0; j < 3; j++) {" in text
    assert "#pragma unroll\n                    for (int j = 0; j < 3; j++) {" in text     # the scalar copy's
    assert k.validation.status == "passed"
    assert_builds(result, tmp_path_factory)


PAIR_GATHER = """
__global__ void pair_gather(int n, int w, const int *col, const float *a, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        /* the pair at 2i and one neighbour past the outputs, through the column table */
        out[i] = a[2 * i] + a[2 * i + 1] + out[n + col[i] + w * 2];
    }
}

void run(int n, int w)
{
    int *col;
    float *a, *out;
    cudaMalloc(&col, n * sizeof(int));
    cudaMalloc(&a, 2 * n * sizeof(float));
    cudaMalloc(&out, 4 * n * sizeof(float));
    pair_gather<<<(n + 127) / 128, 128>>>(n, w, col, a, out);
}
"""


def test_a_kernel_whose_check_rolls_every_pass_back_keeps_the_users_text(tmp_path_factory):
    """The emulator cannot size `out` (a subscript of a loaded index plus a term, in an array the kernel also
    writes, so that what it reads is no run's to measure), so the check cannot run and every pass after
    restrict is dropped. Before, the pairs' applied decision still
    counted as a transformation, and the kernel was printed from the syntax tree (its comment lost); as with
    no pass applied, it keeps the user's text, only its parameters requalified."""
    result = compile_source(tmp_path_factory, "pair_gather", PAIR_GATHER, passes=None)
    (k,) = result.kernels
    assert k.validation.status == "rolled back" and "the check could not run" in k.validation.detail
    assert "/* the pair at 2i and one neighbour past the outputs, through the column table */" in result.output
    assert "const float *__restrict__ a, float *__restrict__ out)\n{" in result.output


# -- every refusal is a note --------------------------------------------------------------------------------
NOT_WIDENED = {
    "gather_from_written": ("""
__global__ void permute_add(const int *perm, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = out[i] + out[perm[i]];
}
""", "not widened: out[perm[i]] is not affine, and the kernel writes out: its lanes could not be read in any "
     "order"),
    "return_in_a_lane": ("""
__global__ void stop_at_negative(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i];
        if (v < 0.0f)
            return;
        b[i] = v;
    }
}
""", "not widened: a 'return' at line 8 (only declarations, assignments, 'if's and 'for' "
     "loops are widened)"),
    "prefix_reads_memory": ("""
__global__ void weigh(const float *w, const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = w[i];
    if (i < n)
        b[i] = a[i] * s;
}
""", "not widened: the statement at line 5 before the guard depends on x and is not local arithmetic (it reads "
     "w[i])"),
    "loop_in_a_lane": ("""
__global__ void repeat_positive(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[i];
        if (v > 0.0f) {
            for (int j = 0; j < 3; j++)
                v = v * 0.5f;
        }
        b[i] = v;
    }
}
""", "not widened: a 'for' loop at line 8 in a branch on x"),
    "guard_on_a_lane_local": ("""
__global__ void shifted(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = i + 1;
    if (j < n)
        b[i] = a[i];
}
""", "not widened: the guard 'j < n' depends on x through 'j', a local computed before it"),
    "local_array": ("""
__global__ void pairs_sum(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float buf[2];
    if (i < n) {
        buf[0] = a[i];
        buf[1] = 2.0f * a[i];
        b[i] = buf[0] + buf[1];
    }
}
""", "not widened: 'buf[0]' depends on x and is an element of a local array, one for the V lanes, which is not "
     "widened"),
    "helper_writes_a_local": ("""
__device__ float split(float x, float *hi)
{
    *hi = x * 2.0f;
    return x - 1.0f;
}

__global__ void halves(const float *a, float *lo, float *up, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float h;
    if (i < n) {
        float l = split(a[i], &h);
        lo[i] = l;
        up[i] = h;
    }
}
""", "not widened: the call to split at line 13 is not pure (it may write through its arguments)"),
    "neighbours_apart": ("""
__global__ void pair_sum(const float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        b[i] = a[i] + a[i + 1];
}
""", "not widened: a[i] and a[i + 1] are 1 element apart: their 4-element vectors are never both aligned"),
}


@pytest.mark.parametrize("name", sorted(NOT_WIDENED))
def test_a_kernel_not_widened_says_why(name, tmp_path_factory):
    """Each note names what stops the kernel now that `if`s, statements before the guard and gathers are
    widened. Before, the local array and the helper's `h` were widened wrong (every lane wrote the one `buf`,
    the one `h`; the emulated check caught the first, could not run on the second, and dropped the whole
    rewrite) and the neighbours got a vector path no address could take."""
    source, why = NOT_WIDENED[name]
    (k,) = compile_source(tmp_path_factory, name, source, validate=False).kernels
    assert "4 *" not in kernel_source(k.optimized.funcdef)
    assert f"kernel: {why}" in vectorize_notes(k, "skipped")
