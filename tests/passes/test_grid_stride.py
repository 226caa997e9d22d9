"""Grid-stride loops (`for (i = gid; i < n; i += blockDim.x * gridDim.x)`) canonicalized to one thread per
element, with every launch of the kernel re-sized to cover n; kept, with a note, when the iterations may
depend on each other or a launch cannot be re-sized, and when no later pass transforms the canonical form
(alone it only adds blocks). Each canonicalization is emulated: the user's kernel under its own (small,
fixed) grid against the canonical kernel under the re-sized launch."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.emulator import run_kernel
from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.sites import naive_launch
from gpgpu_opt.passes import grid_stride, parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

HOST = """
int main()
{
    int n = 1 << 22;   // 4M threads: enough to fill an H100 widened (launch_dispatch.min_threads_widened)
    int numSMs = 132;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    LAUNCH
    cudaDeviceSynchronize();
    return 0;
}
"""

SAXPY = """
__global__ void k(int n, float a, const float *x, float *y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
    }
}
"""
SAXPY_LAUNCH = "k<<<32 * numSMs, 256>>>(n, 2.0f, x, y);"

#: Spellings of the idiom, each with its launch: all canonicalized.
SPELLINGS = {
    "grid_then_block": (SAXPY.replace("blockDim.x * gridDim.x", "gridDim.x * blockDim.x"), SAXPY_LAUNCH),
    "sum_reversed": (SAXPY.replace("blockIdx.x * blockDim.x + threadIdx.x", "threadIdx.x + blockDim.x * blockIdx.x"),
                     SAXPY_LAUNCH),
    "stride_local_size_t": ("""
__global__ void k(float *dst, const float *src, size_t n)
{
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = gridDim.x * blockDim.x;
    for (size_t i = tid; i < n; i += stride)
        dst[i] = 2.0f * src[i] + 1.0f;
}
""", "k<<<1024, 128>>>(y, x, (size_t)n);"),
    "declared_before_unsigned": ("""
__global__ void k(float *dst, const float *src, unsigned int n)
{
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
    for (; idx < n; idx = idx + blockDim.x * gridDim.x) {
        float v = src[idx];
        if (v > 0.5f)
            v = v * v;
        dst[idx] = v;
    }
}
""", "k<<<64, 256>>>(y, x, n);"),
    "dim3_block_and_members": ("""
__global__ void k(float4 *dst, const float4 *src, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const float4 s = src[i];
        dst[i].x = s.y;
        dst[i].y = s.x;
        dst[i].z = s.w;
        dst[i].w = s.z;
    }
}
""", "dim3 threads(128); dim3 blocks(20); k<<<blocks, threads>>>((float4 *)y, (const float4 *)x, n);"),
    "members_named_like_pointers": ("""
__global__ void k(const float a, const float4 *x, const float4 *y, float4 *z, const size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float4 x4 = x[i];
        const float4 y4 = y[i];
        z[i] = make_float4(a * x4.x + y4.x, a * x4.y + y4.y, a * x4.z + y4.z, a * x4.w + y4.w);
    }
}
""", "float *z; cudaMalloc(&z, n * sizeof(float));\n"
     "    k<<<2 * numSMs, 256>>>(2.0f, (const float4 *)x, (const float4 *)y, (float4 *)z, (size_t)n);"),
}

#: Loops whose iterations may depend on each other, or whose launch cannot be re-sized: kept, and why.
KEPT = {
    "reduction_after": ("""
__global__ void k(const float *x, float *y, int n)
{
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        s += x[i];
    y[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
""", "k<<<64, 256>>>(x, y, n);", "not the kernel's last statement"),
    "neighbour_store": (SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i + 1] = a * x[i];"), SAXPY_LAUNCH,
                        "stores to 'y[i + 1]', not element i"),
    "neighbour_read": (SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i - 1];"), SAXPY_LAUNCH,
                       "'y' is written at [i] and also accessed elsewhere"),
    "barrier": (SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i]; __syncthreads();"), SAXPY_LAUNCH,
                "calls '__syncthreads'"),
    "atomic": (SAXPY.replace("y[i] = a * x[i] + y[i];", "atomicAdd(&y[0], x[i]);"), SAXPY_LAUNCH,
               "calls 'atomicAdd'"),
    "thread_index_in_body": (SAXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + threadIdx.x;"),
                             SAXPY_LAUNCH, "reads threadIdx.x outside the grid-stride loop's header"),
    "break": (SAXPY.replace("y[i] = a * x[i] + y[i];", "if (x[i] < 0.0f) break; y[i] = x[i];"), SAXPY_LAUNCH,
              "has a 'break'"),
    "may_alias": (SAXPY, "float *z = y + 1; k<<<64, 256>>>(n, 2.0f, x, z);", "may alias"),
    "bound_is_a_local": (SAXPY.replace("{\n    for", "{\n    int m = n / 2;\n    for").replace("i < n", "i < m"),
                         SAXPY_LAUNCH, "is not known at the launch site"),
    "function_pointer": (SAXPY, "void (*f)(int, float, const float *, float *) = k; " + SAXPY_LAUNCH,
                         "names the kernel outside a launch"),

    "side_effect_in_launch": (SAXPY, "k<<<64, 256>>>(n++, 2.0f, x, y);", "with side effects"),
    "two_d_stride": ("""
__global__ void k(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = blockIdx.y * blockDim.y + threadIdx.y; j < n; j += blockDim.y * gridDim.y)
        if (i < n) y[j * n + i] = a * x[j * n + i];
}
""", SAXPY_LAUNCH, "strides by the grid other than"),
    "while_loop": ("""
__global__ void k(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    while (i < n) {
        y[i] = a * x[i];
        i += blockDim.x * gridDim.x;
    }
}
""", SAXPY_LAUNCH, "a while loop that strides by the grid"),
    "accumulator_outside": (SAXPY.replace("{\n    for", "{\n    float t = 0.0f;\n    for")
                            .replace("y[i] = a * x[i] + y[i];", "t = t + x[i]; y[i] = t;"), SAXPY_LAUNCH,
                            "stores to 't', not element i of an array nor a local of its own"),
}


def program_text(kernel: str, launch: str) -> str:
    return "#include <cuda_runtime.h>\n" + kernel + HOST.replace("LAUNCH", launch)


def compile_text(tmp_path: Path, text: str, passes: str | None = None, validate: bool = True):
    path = tmp_path / "gs.cu"
    path.write_text(text)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(passes), diagnostics, {},
                             validate=validate)
    return program, result, diagnostics


def canonicalize_text(tmp_path: Path, text: str):
    """The grid_stride step alone: (the user's program, the canonical one, the notes)."""
    path = tmp_path / "gs.cu"
    path.write_text(text)
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)

    def reload(new_text: str):
        return load_program(str(path), diagnostics=Diagnostics(quiet=True), text=new_text)
    canonical, _ = grid_stride.canonicalize(program, diagnostics, False, reload)
    return program, canonical, diagnostics


def notes(diagnostics: Diagnostics) -> str:
    return "\n".join(n.message for n in diagnostics.notes)


def _arguments(kernel, n: int, rng) -> dict:
    args = {}
    for p in kernel.params:
        if p.is_pointer:
            width = 4 if p.base_type == "float4" else 1
            args[p.name] = rng.random(n * width + 8).astype(np.float32)
        elif p.base_type == "float":
            args[p.name] = 1.5
        else:
            args[p.name] = n
    return args


def emulate_both(original_program, canonical_program, n: int, grid: int, block: int):
    """The user's kernel under a grid of `grid` blocks (fewer threads than n: each runs several iterations)
    against the canonical kernel under the launch the rewritten site makes at this n. Returns both outputs."""
    naive = original_program.kernels[0]
    canonical = canonical_program.kernels[0]
    launch = naive_launch(canonical_program, canonical, {p.name: n for p in canonical.scalars
                                                       if p.base_type != "float"})
    assert launch is not None and launch.block[0] == block
    assert launch.grid[0] * launch.block[0] >= n > grid * block
    inputs = _arguments(naive, n, np.random.default_rng(1))
    outputs = []
    for kernel, g in ((naive, grid), (canonical, launch.grid[0])):
        args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
        run_kernel(kernel, (g, 1, 1), (block, 1, 1), args, check_races=True)
        outputs.append(args)
    return outputs


def test_saxpy_is_canonicalized_widened_and_its_fixed_grid_resized(tmp_path):
    original, result, diagnostics = compile_text(tmp_path, program_text(SAXPY, SAXPY_LAUNCH))
    k = result.kernels[0]
    text = kernel_source(k.naive.funcdef)
    assert "gridDim" not in text and "for" not in text and "if (i < n)" in text
    assert "k<<<k_grid((n + 256 - 1) / 256, 256), k_block((n + 256 - 1) / 256, 256)>>>(n, 2.0f, x, y);" \
        in result.output
    said = notes(diagnostics)
    assert "launch re-sized so the grid covers the loop's range: line" in said
    assert "<<<32 * numSMs, 256>>> -> <<<(n + 256 - 1) / 256, 256>>>" in said
    decision = next(d for d in k.context.log.decisions if d.pass_name == "grid_stride")
    assert decision.action == "applied" and "re-sized" in decision.reason
    assert any(d.pass_name == "vectorize" and d.action == "applied" for d in k.context.log.decisions)
    assert k.validation is not None and k.validation.status == "passed"
    before, after = emulate_both(original, result.program, n=3000, grid=4, block=256)
    np.testing.assert_array_equal(before["y"], after["y"])


def test_a_canonical_form_no_pass_builds_on_is_not_kept(tmp_path):
    # A body with a `while` loop is not widened (a branch is now, lane by lane): one thread per element alone
    # only adds blocks (1-3 % slower than 32 blocks per SM on an H100), so the loop and the launch stay as the
    # user wrote them.
    kernel, launch = SPELLINGS["declared_before_unsigned"]
    branch = "        if (v > 0.5f)\n            v = v * v;\n"
    assert branch in kernel
    text = program_text(kernel.replace(branch, "        while (v > 1.0f)\n            v = v * 0.5f;\n"), launch)
    _, result, diagnostics = compile_text(tmp_path, text)
    assert "no other pass transformed its one-thread-per-element form" in notes(diagnostics)
    assert "grid-stride loop canonicalized" not in notes(diagnostics)
    assert "k<<<64, 256>>>(y, x, n);" in result.output
    assert "idx = idx + blockDim.x * gridDim.x" in result.output
    assert not any(d.pass_name == "grid_stride" for d in result.kernels[0].context.log.decisions)


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spellings_of_the_idiom_are_canonicalized_and_compute_the_same(tmp_path, name):
    kernel, launch = SPELLINGS[name]
    original, canonical, diagnostics = canonicalize_text(tmp_path, program_text(kernel, launch))
    assert "grid-stride loop canonicalized" in notes(diagnostics), notes(diagnostics)
    text = kernel_source(canonical.kernels[0].funcdef)
    assert "gridDim" not in text and "for" not in text, text
    block = 128 if "128" in launch else 256
    before, after = emulate_both(original, canonical, n=2 * 20 * block + 77, grid=20 if "blocks(20)" in launch else 3,
                                 block=block)
    for name_, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, after[name_])


@pytest.mark.parametrize("name", sorted(KEPT))
def test_loops_that_cannot_be_canonicalized_are_kept_with_a_note(tmp_path, name):
    kernel, launch, why = KEPT[name]
    _, canonical, diagnostics = canonicalize_text(tmp_path, program_text(kernel, launch))
    said = notes(diagnostics)
    assert "grid-stride loop kept" in said and why in said, said
    assert "gridDim." in kernel_source(canonical.kernels[0].funcdef)
    assert launch.split("k<<<")[1].split(">>>")[0] in canonical.text   # the launch as written


def test_a_kernel_the_file_does_not_launch_keeps_its_loop(tmp_path):
    path = tmp_path / "lib.cu"
    path.write_text(SAXPY)
    diagnostics = Diagnostics(quiet=True)
    result = compile_with(load_program(str(path), diagnostics=diagnostics), get_target("sm_90"),
                             parse_pass_list(None), diagnostics, {})
    assert "grid-stride loop kept: the file does not launch it, so its grid cannot be re-sized" in notes(diagnostics)
    assert "blockDim.x * gridDim.x" in result.output


def test_every_launch_site_is_resized(tmp_path):
    launch = "k<<<8, 256>>>(n, 2.0f, x, y);\n    k<<<numSMs, 256>>>(n / 2, 3.0f, y, x);"
    _, canonical, _ = canonicalize_text(tmp_path, program_text(SAXPY, launch))
    assert "k<<<(n + 256 - 1) / 256, 256>>>(n, 2.0f, x, y);" in canonical.text
    assert "k<<<((n / 2) + 256 - 1) / 256, 256>>>(n / 2, 3.0f, y, x);" in canonical.text


OCCUPANCY = ("int bs, gs;\n    cudaOccupancyMaxPotentialBlockSize(&gs, &bs, k);\n"
             "    k<<<gs, bs>>>(n, 2.0f, x, y);")


def test_a_block_the_host_computes_is_read_at_the_launch(tmp_path):
    # An occupancy query names the kernel without launching it; the block it picks is only known at run time.
    kernel = SAXPY.replace("const float *x, float *y", "const float *__restrict__ x, float *__restrict__ y")
    _, canonical, diagnostics = canonicalize_text(tmp_path, program_text(kernel, OCCUPANCY))
    assert "grid-stride loop canonicalized" in notes(diagnostics), notes(diagnostics)
    assert "k<<<(n + dim3(bs).x - 1) / dim3(bs).x, bs>>>(n, 2.0f, x, y);" in canonical.text


def test_a_copy_through_a_thread_index_local_is_canonicalized_and_widened(tmp_path):
    # `int tid = ...; for (int i = tid; ...)`: i starts at the global index itself and tid's declaration goes,
    # so the widening pass sees the one-thread-per-element form it reads.
    kernel = SPELLINGS["stride_local_size_t"][0].replace("size_t", "int")
    _, result, diagnostics = compile_text(tmp_path, program_text(kernel, "k<<<1024, 128>>>(y, x, n);"))
    k = result.kernels[0]
    assert "int i = blockIdx.x * blockDim.x + threadIdx.x;" in result.program.text
    assert "tid" not in result.program.text and "stride" not in result.program.text
    assert any(d.pass_name == "vectorize" and d.action == "applied" for d in k.context.log.decisions), notes(diagnostics)
    assert k.validation is not None and k.validation.status == "passed"


def test_a_64_bit_index_starts_at_a_64_bit_global_index(tmp_path):
    # Past 2^32 elements the 32-bit blockIdx.x * blockDim.x would wrap in the canonical kernel; the loop's
    # `i += stride` in size_t did not.
    kernel, launch = SPELLINGS["stride_local_size_t"]
    _, canonical, _ = canonicalize_text(tmp_path, program_text(kernel, launch))
    text = canonical.text[canonical.text.index("__global__"):canonical.text.index("int main")]
    assert "size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;" in text, text
    assert "stride" not in text and "tid" not in text
    kernel, launch = SPELLINGS["declared_before_unsigned"]
    _, canonical, _ = canonicalize_text(tmp_path, program_text(kernel.replace("unsigned int", "size_t"), launch))
    assert "idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n    if (idx < n)" in canonical.text


def test_a_prototype_a_comment_and_a_cast_in_a_query_are_not_launches(tmp_path):
    kernel = SAXPY.replace("const float *x, float *y", "const float *__restrict__ x, float *__restrict__ y")
    text = program_text(kernel, "// k runs saxpy on x and y\n    int bs, gs;\n    checkCudaErrors("
                                "cudaOccupancyMaxPotentialBlockSize(&gs, &bs, (void *)k));\n    k<<<gs, bs>>>(n, 2.0f, x, y);")
    text = text.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n#define checkCudaErrors(e) (e)\n"
                        "static __global__ void k(int, float, const float *, float *);\n")
    _, canonical, diagnostics = canonicalize_text(tmp_path, text)
    assert "grid-stride loop canonicalized" in notes(diagnostics), notes(diagnostics)


def test_passes_none_leaves_the_loop(tmp_path):
    _, result, diagnostics = compile_text(tmp_path, program_text(SAXPY, SAXPY_LAUNCH), passes="none")
    assert "blockDim.x * gridDim.x" in result.output and "32 * numSMs" in result.output


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on the PATH")
def test_the_canonicalized_program_builds(tmp_path):
    kernels = SAXPY.replace("const float *x, float *y", "const float *__restrict__ x, float *__restrict__ y") + \
        SPELLINGS["stride_local_size_t"][0].replace("void k(", "void k2(") + \
        SPELLINGS["dim3_block_and_members"][0].replace("void k(", "void k3(")
    launch = OCCUPANCY + "\n    k2<<<1024, 128>>>(y, x, (size_t)n);\n    " + \
        SPELLINGS["dim3_block_and_members"][1].replace("k<<<", "k3<<<")
    _, canonical, diagnostics = canonicalize_text(tmp_path, program_text(kernels, launch))
    assert notes(diagnostics).count("grid-stride loop canonicalized") == 3
    _, result, _ = compile_text(tmp_path, program_text(kernels, launch))   # the whole pipeline
    assert "k2<<<k2_grid((((size_t)n) + 128 - 1) / 128, 128)" in result.output
    # k's block is the occupancy query's, known only at run time (the query only asks about k): the launch
    # chooses by size between the widened k and k_naive
    assert "if (k_gains((n + dim3(bs).x - 1) / dim3(bs).x, bs)) k<<<k_grid(" in result.output
    for name, text in (("canonical.cu", canonical.text), ("out.cu", result.output)):
        (tmp_path / name).write_text(text)
        subprocess.run(["nvcc", "-arch=sm_90", "-o", str(tmp_path / "a.out"), str(tmp_path / name)], check=True,
                       capture_output=True)
