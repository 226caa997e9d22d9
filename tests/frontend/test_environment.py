"""The C and CUDA environment as data (gpgpu_opt.frontend.environment, .math_api): the prelude is generated
from the tables, header constants are visible where nvcc makes them visible, kernels using the
environment's types parse and print back as written, and the analyses know which library calls touch
memory."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from pycparser import c_ast

from gpgpu_opt import cuda_types
from gpgpu_opt.analysis.c_integer import is_integer_type, is_unsigned_type, is_wide_type
from gpgpu_opt.analysis.calls import PURE_BUILTINS, why_impure
from gpgpu_opt.analysis.loops import assigned_names
from gpgpu_opt.analysis.writes import written_names
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.frontend import environment, load_program
from gpgpu_opt.frontend.cuda_c import PRELUDE_NAMES
from gpgpu_opt.frontend.math_api import BY_NAME, FUNCTIONS
from gpgpu_opt.frontend.preprocess import preprocess
from gpgpu_opt.check.extents import written_arrays

NVCC = shutil.which("nvcc")


def compile_file(path, out) -> int:
    from typer.testing import CliRunner

    from gpgpu_opt.cli import app
    return CliRunner().invoke(app, ["compile", str(path), "-o", str(out)]).exit_code


@pytest.fixture
def cu(tmp_path):
    counter = [0]

    def write(src: str) -> str:
        counter[0] += 1
        path = tmp_path / f"env{counter[0]}.cu"
        path.write_text(src)
        return str(path)

    return write


# ------------------------------------------------------------------------------------------------ the tables
def test_prelude_declares_every_name_of_the_tables():
    names = set(BY_NAME) | {t.name for t in cuda_types.TYPE_ALIASES if t.name != "_Bool"} \
        | {v.name for v in cuda_types.VECTOR_TYPES} | set(cuda_types.VECTOR_ALIASES) \
        | {"bool", "__half", "__nv_bfloat16", "true", "false"}
    assert names <= PRELUDE_NAMES
    for name in ("sincosf", "__fmaf_rz", "__stcs", "__ldlu", "__hadd2", "__popcll", "norm3df", "erfinvf",
                 "__double2float_ru", "__float2bfloat16", "ulonglong4", "char1", "half2", "uint8_t"):
        assert name in PRELUDE_NAMES, name


def test_every_function_has_an_implementation_or_is_a_memory_access():
    for f in FUNCTIONS:
        assert (f.impl is None) == bool(f.memory), f.name
    # the IEEE operations are exact in every rounding mode; the transcendental functions are not
    assert all(f.exact for name in ("__fadd_rz", "__fmul_ru", "__fdiv_rd", "__fsqrt_rz", "__dadd_rd", "fmaf")
               for f in BY_NAME[name])
    assert not any(f.exact for f in BY_NAME["sinf"] + BY_NAME["__expf"])


def test_constants_are_visible_where_nvcc_makes_them_visible(tmp_path):
    path = str(tmp_path / "c.cu")
    uses = "M_PI INT_MAX HUGE_VALF FLT_MAX INT32_MAX CUDART_PI_F"

    def expanded(includes: str) -> list[str]:
        text, macros = preprocess(f"{includes}\nfloat v[] = {{ {uses.replace(' ', ', ')} }};\n", path)
        line = next(ln for ln in text.splitlines() if ln.startswith("float v"))
        assert not set(uses.split()) & set(macros), "the environment's macros are not the program's"
        return [name for name in uses.split() if name not in line]

    # nvcc 13: its implicit cuda_runtime.h brings <cmath> and <climits>, not <cfloat> nor <cstdint>'s limits
    assert expanded("") == ["M_PI", "INT_MAX", "HUGE_VALF"]
    assert "FLT_MAX" in expanded("#include <cfloat>") and "FLT_MAX" in expanded("#include <float.h>")
    assert "INT32_MAX" in expanded("#include <cstdint>")
    assert "CUDART_PI_F" in expanded("#include <math_constants.h>")


def test_the_programs_own_definition_wins(tmp_path):
    path = str(tmp_path / "d.cu")
    text, macros = preprocess("#define M_PI 3.0f\n#include <cfloat>\n#define FLT_MAX 1e30f\nfloat a = M_PI, "
                              "b = FLT_MAX;\n", path)
    assert "float a = 3.0f, b = 1e30f;" in text
    assert macros["M_PI"] == "3.0f" and macros["FLT_MAX"] == "1e30f"


def test_header_constants_have_their_c_values():
    values = {c.name: c.text for c in environment.CONSTANTS}
    assert eval(values["INT_MIN"].replace("(", "").replace(")", "")) == -2 ** 31
    assert int(values["UINT64_MAX"].rstrip("UL")) == 2 ** 64 - 1
    assert float(values["FLT_EPSILON"].rstrip("F")) == 2.0 ** -23
    assert float(values["DBL_MAX"]) == 1.7976931348623157e308
    assert float(values["M_SQRT1_2"]) == 0.5 ** 0.5


# ------------------------------------------------------------------------------------------------ parsing
ENVIRONMENT_KERNEL = """
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void types(float *out, const uint32_t *u, const __half *h, const half2 *h2, const char1 *c,
                      const ulonglong2 *q, const __nv_bfloat16 *b, int64_t n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool ok = true;
    if (i < n && ok != false) {
        uint w = u[i];
        ulong l = q[i].x;
        long long s = (long long)w * 3;
        out[i] = __half2float(h[i]) + __low2float(h2[i]) + c[i].x + (float)(l + s) + __bfloat162float(b[i]);
    }
}
"""


def test_a_kernel_of_the_environments_types_parses_and_prints_back(cu):
    path = cu(ENVIRONMENT_KERNEL)
    program = load_program(path)
    text = kernel_source(program.kernels[0].funcdef)
    for spelling in ("bool ok = true", "uint32_t *u", "const __half *h", "const half2 *h2", "uint w", "ulong l",
                     "long long s", "__nv_bfloat16 *b", "int64_t n", "ok != false"):
        assert spelling in text, spelling
    if NVCC:
        src = path.replace(".cu", "_printed.cu")
        with open(src, "w") as fh:
            fh.write("#include <cstdint>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + text)
        subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-o", src + ".cubin", src], check=True)


BOOL_MV = """
#include <cstdint>
__global__ void mv_flip(const float *A, const float *x, float *y, int rows, int cols, bool negate)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0;
        for (int c = 0; c < cols; c++)
            sum += A[r * cols + c] * x[c];
        bool flip = negate && sum > 0.0f;
        y[r] = (flip ? -sum : sum) * (float)M_PI + (float)(INT_MAX & 1);
    }
}
"""


def test_a_transformed_kernel_prints_bool_and_builds(cu, tmp_path):
    path = cu(BOOL_MV)
    out = tmp_path / "mv_opt.cu"
    assert compile_file(path, out) == 0
    text = out.read_text()
    assert "__shfl_down_sync" in text            # merged: the kernel was transformed, not passed through
    assert "bool flip = negate && sum > 0.0f;" in text
    if NVCC:
        subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-o", str(out) + ".cubin", str(out)], check=True)


def test_an_unknown_function_passes_the_kernel_through_naming_it(cu):
    from gpgpu_opt.diagnostics import Diagnostics

    path = cu("extern __device__ float fancy_libm_call(float);  // defined in another unit (-rdc)\n"
              "__global__ void k(float *o) { o[threadIdx.x] = fancy_libm_call(1.0f); }\n")
    diagnostics = Diagnostics(quiet=True)
    program = load_program(path, diagnostics=diagnostics)
    assert program.kernels == [] and program.passed_through == ["k"]
    assert any("undeclared identifier 'fancy_libm_call'" in n.message for n in diagnostics.notes)


# ------------------------------------------------------------------------------------------------ analyses
HINTS = """
__global__ void hinted(float *o, const float *a, float *s, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __stcs(&o[i], __ldcs(&a[i]) * 2.0f);
        sincosf(a[i], &s[i], &c[i]);
    }
}
"""


def test_store_hints_and_out_parameters_are_writes(cu):
    program = load_program(cu(HINTS))
    kernel = program.kernels[0]
    assert written_names(kernel.funcdef, {}) >= {"o", "s", "c"}
    assert written_arrays(kernel) == {"o", "s", "c"}
    assert "a" not in written_names(kernel.funcdef, {})


def test_a_store_hint_is_never_read_only(cu, tmp_path):
    """Two pointers, one written only through __stcs: not 'read-only', so no __restrict__ without a proof."""
    path = cu(HINTS.replace(", float *s, float *c", "").replace("        sincosf(a[i], &s[i], &c[i]);\n", ""))
    out = tmp_path / "h_opt.cu"
    assert compile_file(path, out) == 0
    assert "__stcs(&o[i], __ldcs(&a[i]) * 2.0f);" in out.read_text()
    assert "__restrict__" not in out.read_text()


def test_purity_of_library_calls():
    assert {"sinf", "__fadd_rz", "__popc", "__hadd2", "min", "true"} <= PURE_BUILTINS
    assert not {"__ldg", "__ldcs", "__stcs", "sincosf", "frexpf", "atomicAdd"} & PURE_BUILTINS
    assert "store" in why_impure("__stwt", {})
    assert "pointer arguments" in why_impure("modff", {})


def test_a_programs_function_named_like_a_library_one_is_its_own():
    from pycparser import c_parser
    helpers = {f.decl.name: f for f in c_parser.CParser().parse(
        "float y0(float *p) { p[0] = 1.0f; return 0.0f; } float j1(float v) { return v * 2.0f; }").ext}
    assert "pointer parameter" in why_impure("y0", helpers)
    assert why_impure("j1", helpers) is None and why_impure("y0", {}) is None
    from gpgpu_opt.analysis.calls import pure_calls
    assert "y0" not in pure_calls(helpers) and "j1" in pure_calls(helpers)


def test_an_address_taken_local_counts_as_assigned():
    from pycparser import c_parser
    body = c_parser.CParser().parse("void f(float x) { int e = 0; float m = frexpf(x, &e); }").ext[0].body
    assert "e" in assigned_names(body) and "m" not in assigned_names(body)
    assert not any(isinstance(n, c_ast.Assignment) for n in body.block_items)


def test_integer_aliases_in_the_subscript_analysis():
    assert is_unsigned_type("uint32_t") and is_unsigned_type("ulong") and not is_unsigned_type("int64_t")
    assert is_wide_type("size_t") and is_wide_type("ulong") and not is_wide_type("uint")
    assert is_integer_type("ushort") and not is_integer_type("__half")


@pytest.mark.skipif(NVCC is None, reason="nvcc not on the PATH")
def test_every_constants_definition_compiles_in_device_code(tmp_path):
    """A transformed kernel prints the macros' expansions: each must be device code nvcc accepts."""
    body = "\n".join(f"    out[{k}] = (double)({c.text});" for k, c in enumerate(environment.CONSTANTS))
    src = tmp_path / "constants.cu"
    src.write_text(f"__global__ void constants(double *out) {{\n{body}\n}}\n")
    subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-o", str(src) + ".cubin", str(src)], check=True)


_SCALARS = {"int", "float", "double", "unsigned int", "long", "long long", "unsigned long long", "short",
            "unsigned short", "bool"}


def _call_every_function() -> str:
    """Device code calling every entry of the Math API table with arguments of its parameter types."""
    lines, k = [], 0
    for name, entries in BY_NAME.items():
        for f in (f for f in entries if f.memory not in ("load", "store")):
            args = []
            for p in ("int" if p == "T" else p for p in f.params):
                if p.endswith("*"):
                    lines.append(f"    {p[:-1].strip()} o{k};")
                    args.append(f"&o{k}")
                else:
                    lines.append(f"    {p} a{k} = ({p})in[{k % 7}];" if p in _SCALARS else f"    {p} a{k} = {p}();")
                    args.append(f"a{k}")
                k += 1
            call = f"{name}({', '.join(args)})"
            result = "int" if f.returns == "T" else f.returns
            use = f"    {call};" if f.returns == "void" else f"    {{ {result} r = {call}; out[0] += sizeof(r); }}"
            lines.append(use)
    return "\n".join(lines)


@pytest.mark.skipif(NVCC is None, reason="nvcc not on the PATH")
def test_every_function_of_the_table_is_cudas(tmp_path):
    src = tmp_path / "functions.cu"
    src.write_text("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <cuComplex.h>\n"
                   f"__global__ void functions(const int *in, int *out) {{\n{_call_every_function()}\n}}\n")
    subprocess.run([NVCC, "-arch=sm_90", "-cubin", "-o", str(src) + ".cubin", str(src)], check=True)
