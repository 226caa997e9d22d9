"""The alias proof through the host code's own functions: a launch inside a helper whose arguments are the
helper's parameters (followed back to every call), a user allocation helper, and runtime calls that name a
kernel without launching it. Programs in the style of Rodinia's (cfd, hotspot3D), written for these tests."""
import textwrap

import pytest

from gpgpu_opt.analysis.aliasing import alias_facts, read_launches
from gpgpu_opt.analysis.alignment import base_alignment
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program

KERNEL = """
__global__ void cuda_time_step(int nelr, float *old_variables, float *variables, float *fluxes)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    variables[i] = old_variables[i] + 0.5f * fluxes[i];
}
"""

# The launch is in a helper, as cfd's time_step; main allocates and passes the buffers.
HELPER = """
void time_step(int nelr, float *old_variables, float *variables, float *fluxes)
{
    dim3 Dg(nelr / 192), Db(192);
    cuda_time_step<<<Dg, Db>>>(nelr, old_variables, variables, fluxes);
}

int main(int argc, char **argv)
{
    int nelr = 192 * 64;
    float *old_variables, *variables, *fluxes;
    cudaMalloc((void **)&old_variables, nelr * sizeof(float));
    cudaMalloc((void **)&variables, nelr * sizeof(float));
    cudaMalloc((void **)&fluxes, nelr * sizeof(float));
    for (int i = 0; i < 3; i++)
        time_step(nelr, old_variables, variables, fluxes);
    cudaFree(old_variables);
    cudaFree(variables);
    cudaFree(fluxes);
    return 0;
}
"""


def _facts(tmp_path, host, kernel=KERNEL):
    path = tmp_path / "euler.cu"
    path.write_text(kernel + textwrap.dedent(host))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    return alias_facts(program.kernels[0], program), program


def test_a_launch_in_a_helper_is_proved_by_the_buffers_every_call_passes(tmp_path):
    facts, _ = _facts(tmp_path, HELPER)
    assert facts.restrict and facts.how == "launch sites" and facts.sites == [11], facts.why_not


def test_a_helper_called_once_with_one_buffer_twice_is_refused(tmp_path):
    facts, _ = _facts(tmp_path, HELPER.replace("time_step(nelr, old_variables, variables, fluxes);",
                                               "time_step(nelr, variables, variables, fluxes);"))
    assert not facts.restrict
    assert "the launch at line 11 (reached from line 22) passes 'variables of main' to both 'variables' and " \
           "'old_variables'" in facts.why_not, facts.why_not


def test_a_helper_called_twice_once_with_the_same_buffer_is_refused(tmp_path):
    host = HELPER.replace("    cudaFree(old_variables);",
                          "    time_step(nelr, fluxes, fluxes, variables);\n    cudaFree(old_variables);")
    facts, _ = _facts(tmp_path, host)
    assert not facts.restrict and "(reached from line 23) passes 'fluxes of main' to both" in facts.why_not, \
        facts.why_not
    distinct = HELPER.replace("    cudaFree(old_variables);",
                              "    time_step(nelr, fluxes, old_variables, variables);\n    cudaFree(old_variables);")
    facts, _ = _facts(tmp_path, distinct)
    assert facts.restrict and facts.sites == [11], facts.why_not


@pytest.mark.parametrize("old, new, why", [
    # the helper's parameter is reassigned, or taken by reference
    ("    dim3 Dg", "    variables = fluxes;\n    dim3 Dg", "is a parameter of the function that launches the kernel "
                                                            "that is assigned at line"),
    ("float *variables, float *fluxes)\n{", "float *&variables, float *fluxes)\n{", "not declared a plain pointer"),
    ("    dim3 Dg", "    cudaMalloc((void **)&variables, 4);\n    dim3 Dg", "allocated again at line"),
    ("    dim3 Dg", "    { float *variables = 0; (void)variables; }\n    dim3 Dg", "declared again at line"),
])
def test_a_helper_parameter_that_may_change_is_refused(tmp_path, old, new, why):
    facts, _ = _facts(tmp_path, HELPER.replace(old, new, 1))
    assert not facts.restrict and why in facts.why_not, facts.why_not


@pytest.mark.parametrize("top, why", [
    ("void (*step_ptr)(int, float *, float *, float *) = time_step;\n", "'time_step' is also named at line"),
    ("#define STEP(a, b, c) time_step(192, a, b, c)\n", "'time_step' is named in a directive at line"),
    ("void time_step(int nelr, double *a, double *b, double *c);\n", "'time_step' is overloaded"),
    ("namespace lib { void time_step(int, float *&, float *, float *); }\nusing namespace lib;\n",
     "has a using declaration"),
    ("struct Solver { void time_step(int nelr, float *a, float *b, float *c); };\n", "'time_step' is also named at"),
])
def test_a_helper_that_may_be_reached_otherwise_is_not_followed(tmp_path, top, why):
    facts, _ = _facts(tmp_path, top + HELPER)
    assert not facts.restrict and why in facts.why_not, facts.why_not


def test_a_helper_that_is_never_called_or_calls_itself_is_not_followed(tmp_path):
    never = HELPER.replace("        time_step(nelr, old_variables, variables, fluxes);", "        ;")
    facts, _ = _facts(tmp_path, never)
    assert not facts.restrict and "'time_step' is never called" in facts.why_not, facts.why_not
    recursive = HELPER.replace("    cuda_time_step<<<", "    if (nelr > 192) time_step(nelr / 2, old_variables, "
                                                        "variables, fluxes);\n    cuda_time_step<<<")
    facts, _ = _facts(tmp_path, recursive)
    assert not facts.restrict and "is called recursively" in facts.why_not, facts.why_not


def test_a_helper_is_followed_through_helpers_that_pass_their_parameters_on(tmp_path):
    host = HELPER.replace("int main(int argc, char **argv)", """void iterate(int nelr, float *old_variables, float *variables, float *fluxes)
{
    for (int j = 0; j < 3; j++)
        time_step(nelr, old_variables, variables, fluxes + 0);
}

int main(int argc, char **argv)""").replace("        time_step(nelr, old_variables, variables, fluxes);",
                                            "        iterate(nelr, old_variables, variables, fluxes);")
    facts, _ = _facts(tmp_path, host)
    assert facts.restrict and facts.sites == [11], facts.why_not
    aliased = host.replace("iterate(nelr, old_variables, variables, fluxes);",
                           "iterate(nelr, old_variables, variables, variables);")
    facts, _ = _facts(tmp_path, aliased)
    assert not facts.restrict and "passes 'variables of main' to both 'variables' and 'fluxes'" in facts.why_not


def test_a_buffer_allocated_in_the_helper_is_distinct_from_its_parameters(tmp_path):
    host = HELPER.replace("    dim3 Dg", "    float *scratch;\n    cudaMalloc((void **)&scratch, nelr * sizeof(float));\n"
                                      "    dim3 Dg").replace("(nelr, old_variables, variables, fluxes);\n}",
                                                            "(nelr, old_variables, scratch, fluxes);\n}", 1)
    facts, program = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not
    # the parameters' buffers are not claimed aligned: the caller may pass an offset into its buffer
    alignment = base_alignment(program.kernels[0], program)
    assert alignment == {"old_variables": 4, "variables": 256, "fluxes": 4}, alignment
    assert read_launches(program.kernels[0], program).sites[0].buffers == {"variables": "scratch"}


# A user allocation helper, as cfd's `alloc<T>`.
ALLOC = """
#define checkCudaErrors(val) check_cuda((val), #val)
static void check_cuda(cudaError_t err, const char *what) { if (err != cudaSuccess) printf("%s\\n", what); }

template <typename T>
T *alloc(int N)
{
    T *t;
    checkCudaErrors(cudaMalloc((void **)&t, sizeof(T) * N));
    return t;
}

template <typename T>
void upload(T *dst, T *src, int N)
{
    checkCudaErrors(cudaMemcpy((void *)dst, (void *)src, N * sizeof(T), cudaMemcpyHostToDevice));
}

int main(int argc, char **argv)
{
    int nelr = 192 * 64;
    float *h_fluxes = (float *)calloc(nelr, sizeof(float));
    float *old_variables = alloc<float>(nelr);
    float *variables = alloc<float>(nelr);
    float *fluxes;
    fluxes = alloc<float>(nelr);
    upload<float>(fluxes, h_fluxes, nelr);
    cuda_time_step<<<nelr / 192, 192>>>(nelr, old_variables, variables, fluxes);
    return 0;
}
"""


def test_a_user_allocation_helper_allocates(tmp_path):
    facts, _ = _facts(tmp_path, ALLOC)
    assert facts.restrict and facts.how == "launch sites", facts.why_not


@pytest.mark.parametrize("old, new, why", [
    ("    return t;", "    return (T *)g_pool;", "is initialised with another pointer than NULL or a new allocation"),
    ("T *alloc(int N)\n{\n    T *t;", "T *alloc(T *t, int N)\n{", "is initialised with another pointer"),
    ("    return t;", "    if (N > 1024) t = (T *)g_pool;\n    return t;", "is initialised with another pointer"),
    ("    float *fluxes;\n    fluxes = alloc<float>(nelr);", "    float *fluxes = old_variables;",
     "is initialised with another pointer"),
    ("    fluxes = alloc<float>(nelr);", "    fluxes = alloc<float>(nelr);\n    fluxes = variables;", "is assigned at line"),
])
def test_a_helper_that_may_return_an_existing_pointer_is_no_allocation(tmp_path, old, new, why):
    facts, _ = _facts(tmp_path, "void *g_pool;\n" + ALLOC.replace(old, new))
    assert not facts.restrict and why in facts.why_not, facts.why_not


def test_a_buffer_passed_to_a_function_taking_it_by_reference_is_refused(tmp_path):
    host = ALLOC.replace("void upload(T *dst,", "void upload(T *&dst,")
    facts, _ = _facts(tmp_path, host)
    assert not facts.restrict and "is passed to upload<float> at line" in facts.why_not, facts.why_not


# As hotspot3D: the kernel is named to set its cache preference before the launches.
@pytest.mark.parametrize("call", [
    "cudaFuncSetCacheConfig(cuda_time_step, cudaFuncCachePreferL1);",
    "cudaFuncSetAttribute((const void *)cuda_time_step, cudaFuncAttributePreferredSharedMemoryCarveout, 50);",
    "cudaFuncAttributes attr; cudaFuncGetAttributes(&attr, cuda_time_step);",
    "int blocks; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, cuda_time_step, 192, 0);",
    "int grid, block; cudaOccupancyMaxPotentialBlockSize(&grid, &block, cuda_time_step, 0, 0);",
])
def test_a_runtime_call_that_sets_a_kernels_attributes_is_no_hidden_launch(tmp_path, call):
    host = HELPER.replace("    dim3 Dg", f"    {call}\n    dim3 Dg")
    facts, _ = _facts(tmp_path, host)
    assert facts.restrict, facts.why_not


@pytest.mark.parametrize("top, call", [
    # a kernel argument elsewhere in the call, a launching runtime call, the file's own function of that name
    ("", "int blocks; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, 192, cuda_time_step, 0);"),
    ("", "cudaLaunchKernel((const void *)cuda_time_step, 1, 1, 0, 0, 0);"),
    # an attribute that constrains the launch: a pass that re-sizes the grid could break it
    ("", "cudaFuncSetAttribute(cuda_time_step, cudaFuncAttributeRequiredClusterWidth, 2);"),
    ("", "cudaFuncSetAttribute(cuda_time_step, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);"),
    ("template <typename K> void cudaFuncSetCacheConfig(K k, int) { k<<<1, 1>>>(0, 0, 0, 0); }\n",
     "cudaFuncSetCacheConfig(cuda_time_step, 0);"),
])
def test_a_kernel_named_where_it_may_be_launched_still_blocks_the_proof(tmp_path, top, call):
    host = top + HELPER.replace("    dim3 Dg", f"    {call}\n    dim3 Dg")
    facts, _ = _facts(tmp_path, host)
    assert not facts.restrict and "'cuda_time_step' is also named at line" in facts.why_not, facts.why_not


# As hotspot3D: the input and output grids change roles after every step.
PING_PONG = """
int main(int argc, char **argv)
{
    int nelr = 192 * 64, steps = 10;
    float *h_in = (float *)calloc(nelr, sizeof(float));
    float *fluxes, *tIn_d, *tOut_d;
    cudaMalloc((void **)&fluxes, nelr * sizeof(float));
    cudaMalloc((void **)&tIn_d, nelr * sizeof(float));
    cudaMalloc((void **)&tOut_d, nelr * sizeof(float));
    cudaMemcpy(tIn_d, h_in, nelr * sizeof(float), cudaMemcpyHostToDevice);
    cudaFuncSetCacheConfig(cuda_time_step, cudaFuncCachePreferL1);
    for (int i = 0; i < steps; ++i) {
        cuda_time_step<<<nelr / 192, 192>>>(nelr, tIn_d, tOut_d, fluxes);
        float *t = tIn_d;
        tIn_d = tOut_d;
        tOut_d = t;
    }
    cudaMemcpy(h_in, tOut_d, nelr * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
"""


def test_buffers_swapped_between_launches_stay_distinct(tmp_path):
    facts, program = _facts(tmp_path, PING_PONG)
    assert facts.restrict and facts.sites == [19], facts.why_not
    assert base_alignment(program.kernels[0], program)["variables"] == 256


@pytest.mark.parametrize("old, new, why", [
    # half a swap, a swap out of order, the temporary used again, swapped with a host pointer or a reference
    ("        tOut_d = t;\n", "", "'tIn_d' for 'old_variables' is assigned at line 21"),
    ("        tIn_d = tOut_d;\n        tOut_d = t;", "        tOut_d = t;\n        tIn_d = tOut_d;", "is assigned at line"),
    ("        tOut_d = t;\n", "        tOut_d = t;\n        t = 0;\n", "is assigned at line"),
    ("        tIn_d = tOut_d;\n        tOut_d = t;", "        tIn_d = h_in;\n        h_in = t;",
     "is swapped with 'h_in', which is initialised with another pointer"),
    ("        float *t = tIn_d;", "        float *&t = tIn_d;", "has a reference bound to it at line"),
])
def test_a_swap_the_proof_cannot_follow_is_refused(tmp_path, old, new, why):
    facts, _ = _facts(tmp_path, PING_PONG.replace(old, new))
    assert not facts.restrict and why in facts.why_not, facts.why_not
