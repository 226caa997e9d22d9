"""naive_launch: a kernel's block and grid as the whole program's launch sites make them."""
import pytest
import textwrap

from gpgpu_opt.frontend import load_program
from gpgpu_opt.launch.sites import NaiveLaunch, naive_block, naive_launch

PROGRAM = textwrap.dedent("""
    #include <math.h>
    #define N 100
    #define DIM_THREAD_BLOCK_X 32
    #define DIM_THREAD_BLOCK_Y 8

    __global__ void mvt_kernel1(float *a, float *x1, float *y_1)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < N) {
            for (int j = 0; j < N; j++)
                x1[i] += a[i * N + j] * y_1[j];
        }
    }

    __global__ void scale(float *d, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) d[i] *= 2.0f;
    }

    __global__ void twice(float *d, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) d[i] += 1.0f;
    }

    int main(int argc, char **argv)
    {
        float *a_gpu, *x1_gpu, *y_1_gpu;
        int len = atoi(argv[1]);
        dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
        dim3 grid((size_t)(ceil( ((float)N) / ((float)block.x) )), 1);
        mvt_kernel1<<<grid, block>>>(a_gpu, x1_gpu, y_1_gpu);
        scale<<<(len + 255) / 256, 256>>>(x1_gpu, len);
        twice<<<(len + 127) / 128, 128>>>(x1_gpu, len);
        twice<<<(len + 255) / 256, 256>>>(x1_gpu, len);
        return 0;
    }
""")


def load(tmp_path, text=PROGRAM):
    path = tmp_path / "prog.cu"
    path.write_text(text)
    return load_program(str(path))


def test_polybench_dim3_launch(tmp_path):
    prog = load(tmp_path)
    launch = naive_launch(prog, prog.kernel("mvt_kernel1"), {})
    line = next(s.line for s in prog.launch_sites if s.kernel == "mvt_kernel1")
    assert launch == NaiveLaunch(block=(32, 8, 1), grid=(4, 1, 1), lines=(line,))
    assert launch.complete and launch.describe() == f"line {line}"


def test_the_case_size_reaches_the_launch_through_the_argument(tmp_path):
    """`scale<<<(len + 255) / 256, 256>>>(x1_gpu, len)`: the kernel's n is the host's len."""
    prog = load(tmp_path)
    assert naive_launch(prog, prog.kernel("scale"), {"n": 1000}).grid == (4, 1, 1)
    unknown = naive_launch(prog, prog.kernel("scale"), {})
    assert unknown.block == (256, 1, 1) and unknown.grid == (None, 1, 1) and not unknown.complete


def test_sites_that_disagree_give_none(tmp_path):
    prog = load(tmp_path)
    launch = naive_launch(prog, prog.kernel("twice"), {"n": 1000})
    assert launch.block == (None, 1, 1) and launch.grid == (None, 1, 1) and len(launch.lines) == 2


def test_no_launch_site(tmp_path):
    prog = load(tmp_path, PROGRAM.replace("mvt_kernel1<<<grid, block>>>(a_gpu, x1_gpu, y_1_gpu);", ""))
    assert naive_launch(prog, prog.kernel("mvt_kernel1"), {}) is None


def test_launch_site_arguments_are_captured(tmp_path):
    prog = load(tmp_path)
    site = next(s for s in prog.launch_sites if s.kernel == "scale")
    assert site.args == ["x1_gpu", "len"]
    assert prog.text[site.args_start:site.args_end] == "(x1_gpu, len)"


def test_naive_block_plans_with_the_block_the_program_launches(tmp_path):
    """The block the optimizations plan for: from macros, literals and host variables set once."""
    prog = load(tmp_path, PROGRAM.replace("256>>>(x1_gpu, len)", "threads>>>(x1_gpu, len)")
                .replace("int len =", "int threads = 128;\n    int len ="))
    assert naive_block(prog, prog.kernel("mvt_kernel1")) == (32, 8)
    assert naive_block(prog, prog.kernel("scale")) == (128, 1)
    assert naive_launch(prog, prog.kernel("scale"), {}).block == (128, 1, 1)


WRITTEN_THROUGH_A_REFERENCE = """
void {setter}(int &v) {{ v = 1000; }}
__global__ void k(float *a) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; a[i] = a[i] * 2.0f; }}
int main()
{{
    int n = 1024;
    {call};
    float *d;
    cudaMalloc(&d, n * sizeof(float));
    k<<<n / 256, 256>>>(d);
    return 0;
}}
"""


@pytest.mark.parametrize("setter, call", [("set", "set(n)"), ("set", "set((n))"), ("set", "set(((n)))"),
                                          ("cuda_setup", "cuda_setup(n)"), ("cuset", "cuset((n))")])
def test_a_scalar_a_user_function_may_write_has_no_known_value(tmp_path, setter, call):
    """`set((n))` passes n itself, and a function the file defines is not the library's because its name
    starts like one (`cuda_setup(int &n)`): n may be 1000 at the launch, so the grid is unknown, never 4."""
    program = load(tmp_path, WRITTEN_THROUGH_A_REFERENCE.format(setter=setter, call=call))
    assert naive_launch(program, program.kernel("k"), {}).grid[0] is None


def test_a_library_call_with_a_grouped_argument_still_reads_it(tmp_path):
    program = load(tmp_path, WRITTEN_THROUGH_A_REFERENCE.format(setter="set", call="printf(\"%d\\n\", (n))"))
    assert naive_launch(program, program.kernel("k"), {}).grid[0] == 4
