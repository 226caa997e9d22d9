"""Declarations of requalified kernels: a program that declares its kernels before main, or in a
header, and defines them after must still link once a pass made a read-only pointee `const` (in C++ that
is another overload: the launch would call the undefined prototype). Every declaration gets the
definition's parameter list; where one cannot be edited with certainty the definition keeps the declared
signature. Each program is compiled to a directory, then built and linked with nvcc (no GPU needed)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpgpu_opt.rewriting.prototypes import find_declarations
from tests.cli.test_errors import cli
from tests.frontend.test_multifile import write_tree

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

HOST = """\
int main(void)
{
    int n = 1 << 22;   /* enough threads to fill the GPU widened (launch_dispatch.min_threads_widened) */
    float *d_in, *d_out;
    cudaMalloc((void **)&d_in, n * sizeof(float));
    cudaMalloc((void **)&d_out, n * sizeof(float));
    dim3 block(256);
    dim3 grid((n + 255) / 256);
    scale<<<grid, block>>>(d_out, d_in, 2.0f, n);
    cudaDeviceSynchronize();
    printf("%d\\n", (int)cudaGetLastError());
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
"""

SCALE = """\
__global__ void scale(float *out, float *in, float factor, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = factor * in[i];
}
"""

PREAMBLE = "#include <stdio.h>\n#include <cuda_runtime.h>\n\n"


def program(prototype: str) -> str:
    """The Rodinia layout: includes, the kernel's prototype, main, then the kernel."""
    return PREAMBLE + prototype + "\n\n" + HOST + "\n" + SCALE


def build(tmp_path, files: dict[str, str], main: str = "main.cu") -> dict[str, str]:
    """Compile the program to out/, link it with nvcc; the output files' text by name."""
    write_tree(tmp_path / "src", files)
    code, output = cli("compile", main, "-o", f"{tmp_path}/out/", cwd=tmp_path / "src")
    assert code == 0, output
    proc = subprocess.run(["nvcc", "-arch=sm_90", "-o", str(tmp_path / "app"), main], cwd=tmp_path / "out",
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {name: (tmp_path / "out" / name).read_text() for name in files}


def declared_params(text: str, name: str = "scale") -> str:
    m = re.search(rf"__global__ void {name}\(([^)]*)\);", text)
    assert m, text
    return m.group(1)


@needs_nvcc
def test_a_prototype_before_main_gets_the_definitions_qualifiers(tmp_path):
    out = build(tmp_path, {"main.cu": program("__global__ void scale(float *out, float *in, float factor, int n);")})
    assert "scale(float *__restrict__ out, const float *__restrict__ in, float factor, int n) {" in out["main.cu"]
    assert declared_params(out["main.cu"]) == \
        "float *__restrict__ out, const float *__restrict__ in, float factor, int n"


@needs_nvcc
def test_a_prototype_with_other_parameter_names(tmp_path):
    out = build(tmp_path, {"main.cu": program("__global__ void scale(float *d_out, float *d_in, float f, int len);")})
    assert declared_params(out["main.cu"]) == \
        "float *__restrict__ d_out, const float *__restrict__ d_in, float f, int len"


@needs_nvcc
def test_a_prototype_without_parameter_names(tmp_path):
    out = build(tmp_path, {"main.cu": program("__global__ void scale(float *, float*, float, int);")})
    assert declared_params(out["main.cu"]) == "float *__restrict__, const float*__restrict__, float, int"


KERNELS_H = """\
#ifndef KERNELS_H
#define KERNELS_H
__global__ void scale(float *out, float *in, float factor, int n);
#endif
"""


@needs_nvcc
def test_a_prototype_in_a_header_of_a_kernel_defined_in_an_included_cu(tmp_path):
    main = PREAMBLE + '#include "kernels.h"\n\n' + HOST + '\n#include "kernels.cu"\n'
    kernels_cu = '#include "kernels.h"\n\n' + SCALE
    out = build(tmp_path, {"main.cu": main, "kernels.h": KERNELS_H, "kernels.cu": kernels_cu})
    assert "const float *__restrict__ in" in out["kernels.cu"]
    assert declared_params(out["kernels.h"]) == \
        "float *__restrict__ out, const float *__restrict__ in, float factor, int n"


@needs_nvcc
def test_a_prototype_that_cannot_be_matched_keeps_the_definition_as_declared(tmp_path):
    """`real_t *` against `float *`: the same type, but not proved so token by token. The prototype stays
    as written and the definition keeps its declared pointee types (the __restrict__ it gained links)."""
    prototype = "typedef float real_t;\n__global__ void scale(real_t *out, real_t *in, real_t factor, int n);"
    out = build(tmp_path, {"main.cu": program(prototype)})
    assert declared_params(out["main.cu"]) == "real_t *out, real_t *in, real_t factor, int n"
    assert "scale(float *__restrict__ out, float *__restrict__ in, float factor, int n) {" in out["main.cu"]


@needs_nvcc
def test_a_prototype_written_by_a_macro_keeps_the_definition_as_declared(tmp_path):
    prototype = "#define DECLARE(k) __global__ void k(float *, float *, float, int)\nDECLARE(scale);"
    out = build(tmp_path, {"main.cu": program(prototype)})
    assert "scale(float *__restrict__ out, float *__restrict__ in, float factor, int n) {" in out["main.cu"]


@needs_nvcc
def test_an_overload_with_other_parameters_is_left_alone(tmp_path):
    """A declaration with another number of parameters declares another function: not edited, and no
    reason to keep the definition as declared."""
    prototypes = "__global__ void scale(float *out, int n);\n" \
                 "__global__ void scale(float *out, float *in, float factor, int n);"
    out = build(tmp_path, {"main.cu": program(prototypes)})
    assert "__global__ void scale(float *out, int n);" in out["main.cu"]
    assert "scale(float *__restrict__ out, const float *__restrict__ in, float factor, int n);" in out["main.cu"]


@needs_nvcc
def test_an_overload_with_as_many_parameters_keeps_the_definition_as_declared(tmp_path):
    """`double *` against `float *`: another overload or the same function, the tokens cannot tell which
    declares the kernel: nothing is edited and the definition keeps the declared pointee types."""
    prototypes = "__global__ void scale(double *out, double *in, double factor, int n);\n" \
                 "__global__ void scale(float *out, float *in, float factor, int n);"
    out = build(tmp_path, {"main.cu": program(prototypes)})
    assert prototypes in out["main.cu"]
    assert "scale(float *__restrict__ out, float *__restrict__ in, float factor, int n) {" in out["main.cu"]


@needs_nvcc
def test_a_prototype_among_several_declarators_keeps_the_definition_as_declared(tmp_path):
    prototype = "__global__ void other(int *p), scale(float *out, float *in, float factor, int n);"
    out = build(tmp_path, {"main.cu": program(prototype)})
    assert prototype in out["main.cu"]
    assert "scale(float *__restrict__ out, float *__restrict__ in, float factor, int n) {" in out["main.cu"]


TEMPLATE = """\
template <typename T>
__global__ void axpy(T *y, T *x, T a, int n);

int main(void)
{
    int n = 1 << 16;
    float *d_x, *d_y;
    cudaMalloc((void **)&d_x, n * sizeof(float));
    cudaMalloc((void **)&d_y, n * sizeof(float));
    axpy<float><<<(n + 255) / 256, 256>>>(d_y, d_x, 2.0f, n);
    cudaDeviceSynchronize();
    return 0;
}

template <typename T>
__global__ void axpy(T *y, T *x, T a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
"""


@needs_nvcc
def test_a_template_kernel_declared_before_main(tmp_path):
    out = build(tmp_path, {"main.cu": PREAMBLE + TEMPLATE})
    assert "template <typename T>\n__global__ void axpy(T *y, T *x, T a, int n);" in out["main.cu"]


def test_declarations_are_found_at_any_scope_and_definitions_and_launches_are_not():
    text = """\
__global__ void a(float *x);
extern "C" __global__ void b(float *x) __attribute__((unused));
namespace ns { static __global__ void c(float *); }
template <typename T> __global__ void d(T *x);
__global__ void e(float *x) { }
void host(float *p) { __global__ void f(float *); e<<<1, 1>>>(p); g(p); }
__device__ void h(float *x);
__global__ void i(int *p), j(float *q);
"""
    found = {d.name: d for d in find_declarations(text, "x.cu")}
    assert sorted(found) == ["a", "b", "c", "d", "f", "i", "j"]
    assert found["d"].template and not found["a"].template
    assert found["a"].alone and not found["i"].alone and not found["j"].alone
    start, end = found["c"].params
    assert text[start:end] == "float *"


@pytest.mark.parametrize("declared, defined, same", [
    ("float *d_in", "float *in", True),              # another name
    ("float*", "float *in", True),                   # none
    ("float *__restrict__ p", "float *in", True),    # a top-level __restrict__ is not part of the type
    ("const float *in", "float *in", False),         # another overload
    ("const int n", "int n", False),                 # the same signature, but not proved so
    ("real_t *in", "float *in", False),              # a typedef name against its type: not proved
    ("float *in, int", "float *in", False),
])
def test_parameter_types_are_compared_token_by_token(declared, defined, same):
    from gpgpu_opt.rewriting.prototypes import _same_type
    assert _same_type(declared, defined, "in" if "in" in defined else "n") is same
