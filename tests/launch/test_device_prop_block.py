"""A block of `min(prop.maxThreadsPerBlock, C)` (Rodinia nn's shape) is C: every CUDA GPU allows at least 512
threads a block (1024 since sm_20), so C up to the smallest maximum of every target is what the launch gets.
A whitelist: exactly that call, `prop` a cudaDeviceProp that only cudaGetDeviceProperties fills. Host
variables passed to a function-like macro that only reads them (`print(x)`, `ceilDiv(a, b)`) keep their value."""
from __future__ import annotations

import textwrap

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.host_expr import HostScope
from gpgpu_opt.launch.host_scopes import declarations_at
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

HOST = """
#define DEFAULT_THREADS_PER_BLOCK {threads}
#define print( x )  printf( #x ": %lu\\n", (unsigned long) x )
#define ceilDiv( a, b )  ( a + b - 1 ) / b
typedef struct {{ float lat; float lng; }} LatLong;
__global__ void euclid(const LatLong *d_locations, float *d_distances, int numRecords, float lat, float lng)
{{
    int globalId = blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) + threadIdx.x;
    if (globalId < numRecords) {{
        float dlat = lat - d_locations[globalId].lat, dlng = lng - d_locations[globalId].lng;
        d_distances[globalId] = sqrtf(dlat * dlat + dlng * dlng);
    }}
}}
int main(int argc, char **argv)
{{
    int numRecords = argc > 1 ? atoi(argv[1]) : 42764;
    LatLong *d_locations; float *d_distances;
    cudaDeviceProp deviceProp;
    cudaGetDeviceProperties( &deviceProp, 0 );
    {extra}
    unsigned long threadsPerBlock = {block};
    unsigned long blocks = ceilDiv( numRecords, threadsPerBlock );
    dim3 gridDim( blocks, 1 );
    print( threadsPerBlock );
    cudaMalloc((void **) &d_locations, sizeof(LatLong) * numRecords);
    cudaMalloc((void **) &d_distances, sizeof(float) * numRecords);
    euclid<<< gridDim, threadsPerBlock >>>(d_locations, d_distances, numRecords, 30.0f, 90.0f);
    return 0;
}}
"""
NN_BLOCK = "min( deviceProp.maxThreadsPerBlock, DEFAULT_THREADS_PER_BLOCK )"


def _block(threads: int = 256, block: str = NN_BLOCK, extra: str = "", macros=None) -> tuple:
    text = HOST.format(threads=threads, block=block, extra=extra)
    declarations = declarations_at(text, text.index("euclid<<<"))
    return HostScope(macros or {"DEFAULT_THREADS_PER_BLOCK": str(threads)}, {}, declarations).dim3("threadsPerBlock")


def test_min_of_the_devices_maximum_and_a_small_constant_is_the_constant():
    assert _block() == (256, 1, 1)
    assert _block(block="min( DEFAULT_THREADS_PER_BLOCK, deviceProp.maxThreadsPerBlock )") == (256, 1, 1)
    assert _block(threads=512) == (512, 1, 1)


def test_a_constant_some_gpu_may_not_allow_is_not_known():
    assert _block(threads=1024) == (None, 1, 1)      # cc 1.x GPUs allow 512


def test_only_exactly_that_shape_of_an_unchanged_cudaDeviceProp():
    assert _block(block="max( deviceProp.maxThreadsPerBlock, DEFAULT_THREADS_PER_BLOCK )") == (None, 1, 1)
    assert _block(block="min( deviceProp.maxThreadsPerMultiProcessor, DEFAULT_THREADS_PER_BLOCK )") == (None, 1, 1)
    assert _block(extra="deviceProp.maxThreadsPerBlock = 64;") == (None, 1, 1)
    assert _block(extra="tune(&deviceProp);") == (None, 1, 1)
    assert _block(extra="tune(deviceProp);") == (None, 1, 1)     # a reference parameter could change it


def test_a_macro_that_stores_is_not_a_read():
    text = HOST.format(threads=256, block=NN_BLOCK, extra="").replace(
        "#define print( x )  printf( #x \": %lu\\n\", (unsigned long) x )", "#define print( x )  ( x = 0 )")
    declarations = declarations_at(text, text.index("euclid<<<"))
    assert HostScope({"DEFAULT_THREADS_PER_BLOCK": "256"}, {}, declarations).dim3("threadsPerBlock") == (None, 1, 1)


@pytest.mark.parametrize("use", ["print( threadsPerBlock ) = 0;", "print( threadsPerBlock )++;",
                                 "unsigned long *p = &print( threadsPerBlock );"])
def test_a_reading_macro_used_where_its_expansion_stores_is_not_a_read(use):
    """`#define keep( x ) x` only reads x, unless the call is itself stored to or has its address taken."""
    text = HOST.format(threads=256, block=NN_BLOCK, extra="").replace(
        "#define print( x )  printf( #x \": %lu\\n\", (unsigned long) x )", "#define print( x )  x").replace(
        "    print( threadsPerBlock );\n", f"    {use}\n")
    assert use in text
    declarations = declarations_at(text, text.index("euclid<<<"))
    assert HostScope({"DEFAULT_THREADS_PER_BLOCK": "256"}, {}, declarations).dim3("threadsPerBlock") == (None, 1, 1)


def test_the_nn_style_launch_is_read_with_its_block(tmp_path):
    """Unread, the block was a default of 16x16 (the kernel reads blockIdx.y), whose threads race on one element."""
    path = tmp_path / "nn.cu"
    path.write_text(textwrap.dedent(HOST.format(threads=256, block=NN_BLOCK, extra="")))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True))
    [kernel] = result.kernels
    assert kernel.context.facts.naive_block == (256, 1)
    assert kernel.races == [] and kernel.context.facts.launch_block == (256, 1)
