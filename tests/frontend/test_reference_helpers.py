"""`__device__` helpers taking C++ references, inlined where kernels call them (gpgpu_opt/frontend/inline.py),
and what vectorize then does with the straight-line kernels they leave (Rodinia cfd's style)."""
import textwrap
from pathlib import Path

import pytest
from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target
from gpgpu_opt.check.cases import Case, run_case

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "cxx" / "ref_helpers.cu"


@pytest.fixture(scope="module")
def loaded():
    diagnostics = Diagnostics(quiet=True)
    return load_program(str(PROGRAM), diagnostics=diagnostics), diagnostics


@pytest.fixture(scope="module")
def compiled(loaded):
    program, _ = loaded
    return compile_with(program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                           validate=True)


def _calls(func: c_ast.FuncDef) -> set[str]:
    return {n.name.name for n in walk(func) if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)}


def test_reference_helpers_are_inlined_as_a_person_would_write_them(loaded):
    program, diagnostics = loaded
    assert [k.name for k in program.kernels] == ["step_factor", "energy_fluxes"]
    assert program.passed_through == [] and set(program.device_functions) == set()
    step = program.kernel("step_factor")
    assert _calls(step.funcdef) == {"sqrtf"}
    source = kernel_source(step.funcdef)
    for line in ["float momentum_x = variables[i + (1 + 0) * nelr];",
                 "float velocity_x = momentum_x / density;",
                 "float speed_sqd = velocity_x * velocity_x + velocity_y * velocity_y + velocity_z * velocity_z;",
                 "float pressure = (((float) 1.4f) - ((float) 1.0f)) * (density_energy - ((float) 0.5f) * "
                 "density * speed_sqd);"]:
        assert line in source, source
    assert "float3" not in source
    fluxes = kernel_source(program.kernel("energy_fluxes").funcdef)
    assert "float de_p = density_energy + pressure;" in fluxes and "float flux_x = velocity_x * de_p;" in fluxes
    notes = [n.message for n in diagnostics.notes]
    assert "'step_factor': inlined velocity_of, speed_sqd_of, pressure_of (__device__ helpers taking C++ " \
           "references)" in notes


def test_the_helpers_text_and_its_host_copy_stay_as_written(compiled):
    text = PROGRAM.read_text()
    head = text.split("__global__")[0]
    assert compiled.output.startswith(head)            # the helpers, `__device__ __host__` one included
    assert "velocity_of(density, momentum, velocity);      // the __host__ copy" in compiled.output


def test_inlined_kernels_are_widened_and_match_the_naive_kernel_on_the_vector_path(loaded, compiled):
    program, _ = loaded
    results = {r.naive.name: r for r in compiled.kernels}
    result = results["energy_fluxes"]
    assert result.rewritten and result.validation.status == "passed", result.validation
    assert "vectorize" in {d.pass_name for d in result.context.log.decisions if d.action == "applied"}
    # the program's launch (blocks of 128) with nelr a multiple of 4: every row of `variables` is 16-byte
    # aligned, so the float4 path runs (the compile's own check, at nelr = 37, runs the scalar path)
    for nelr in (256, 200):
        case = Case({"nelr": nelr}, (256, 1), block=(128, 1), grid=(2, 1))
        outcome = run_case(result.naive, result.optimized, (128, 1), case, 3, program.device_functions)
        assert outcome.ok and outcome.elements > 0, (outcome.error, outcome.mismatches)
    assert "float4 velocity_x = make_float4(momentum_x.x / density.x" in compiled.output
    # step_factor: every element is a chain of divisions and square roots, which widening pays for only where
    # the launch still fills the GPU: nelr is read at run time, so the launch chooses (launch_dispatch.py)
    step_factor = results["step_factor"]
    assert step_factor.optimized.size_dispatch == 4 * 132 * 2048
    assert any("widened where the launch has at least" in d.reason for d in step_factor.context.log.decisions)
    assert "if (step_factor_gains(Dg, Db)) step_factor<<<" in compiled.output


def _compile(tmp_path, text: str, **options):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(text))
    diagnostics = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diagnostics, **options)
    return program, result, [n.message for n in diagnostics.notes]


HELPERS = """\
__device__ inline void scale_into(float& in, float s, float& out) { s = s * 2.0f; out = in * s; }
__device__ inline void swap_add(float& a, float& b) { float t = a; a = b; b = t + b; }
__device__ inline float dot3(float3& u, float3& v) { return u.x*v.x + u.y*v.y + u.z*v.z; }
__device__ inline float early(float& a) { if (a < 0.0f) return 0.0f; return a; }
__device__ inline void counted(float& a) { static int calls; a = a + 1.0f; }
__device__ inline float uses_global(float& a) { return a * bias; }
__device__ inline float add_t(float& a) { float t = a + 1.0f; return t * t; }
"""


@pytest.mark.parametrize("body, note", [
    ("float x = a[i]; swap_add(x, x); a[i] = x;",
     r"'swap_add': its reference parameters 'a' and 'b' are bound to the same variable 'x', and the helper "
     r"writes one of them"),
    ("float x = a[i]; scale_into(a[i], 1.0f, x); a[i] = x;",
     r"its reference parameter 'in' is bound to an expression that is not a variable of the caller"),
    ("float x = a[i]; a[i] = 1.0f + add_t(x);",
     r"the call of 'add_t' at line \d+ is not a statement, a declaration's initializer or an assignment's value"),
    ("float x = a[i]; a[i] = early(x);", r"'early' returns other than at its end \(line 5\)"),
    ("float x = a[i]; counted(x); a[i] = x;", r"'counted' declares the static variable 'calls'"),
    ("float bias = 2.0f; float x = a[i]; float r = uses_global(x); a[i] = r + bias;",
     r"'uses_global' uses 'bias' from file scope, which the caller declares too"),
    ("int x = 1; float y = 0.0f; scale_into(x, 1.0f, y); a[i] = y;",
     r"its reference parameter 'in' is bound to 'x' of another type"),
])
def test_a_call_outside_the_whitelist_passes_the_kernel_through_naming_the_helper(tmp_path, body, note):
    program, _, notes = _compile(tmp_path, "__device__ float bias;\n" + HELPERS +
                                 f"__global__ void k(float *a) {{ int i = threadIdx.x; {body} }}\n")
    assert program.kernels == [] and "k" in program.passed_through
    assert any("'k' passed through unchanged: a helper taking C++ references is not inlined" in n and
               __import__("re").search(note, n) for n in notes), notes


def test_values_get_fresh_locals_and_clashing_names_are_renamed(tmp_path):
    program, _, _ = _compile(tmp_path, "__device__ float bias;\n" + HELPERS + """
        __global__ void k(float *a, float *b) {
            int i = threadIdx.x;
            float t = a[i], y, s = 3.0f;
            scale_into(t, s, y);          // s is written in the helper: a copy
            float3 u; u.x = t; u.y = y; u.z = 1.0f;
            float d = dot3(u, u);         // two references to u, only read: harmless
            float e = add_t(y);
            b[i] = d + e + t;
        }
    """)
    source = kernel_source(program.kernels[0].funcdef)
    assert "float s2 = s;" in source and "s2 = s2 * 2.0f;" in source and "y = t * s2;" in source
    assert "float t2 = y + 1.0f;" in source           # the helper's t, renamed: the kernel has one
    assert "float d = u_x * u_x + u_y * u_y + u_z * u_z;" in source and "float e = t2 * t2;" in source


def test_vectorize_does_not_widen_a_member_of_a_local_written_per_element(tmp_path):
    """`v.x = a[i]` in the vector path would be one member for 4 lanes: refused (it was widened wrongly)."""
    _, result, notes = _compile(tmp_path, """
        __global__ void k(int n, float *a, float *b) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            float3 v;
            v.x = a[i];
            v.y = 2.0f * a[i];
            b[i] = v.x + v.y;
        }
        int main() { float *a, *b; k<<<64, 256>>>(16384, a, b); }
    """)
    assert not result.kernels[0].rewritten
    assert any("not widened: 'v.x' depends on x and is a member of a local" in n for n in notes), notes


def test_vectorize_widens_a_local_declared_before_it_is_assigned_with_its_own_type(tmp_path):
    """`float s; s = ...;` was an internal error (a declaration without an initializer), and an int local
    assigned later became a float4."""
    text = """
        __global__ void k(int n, {T} *a, {T} *b) {{
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            {T} s;
            s = a[i] * 2;
            b[i] = s;
        }}
        int main(int argc, char **argv) {{ {T} *a, *b; int n = argc * 16384; k<<<n / 256, 256>>>(n, a, b); }}
    """
    _, result, _ = _compile(tmp_path, text.format(T="float"), validate=True)
    assert result.kernels[0].rewritten and result.kernels[0].validation.status == "passed"
    assert "float4 s;" in result.output and "s = make_float4(" in result.output
    _, result, _ = _compile(tmp_path, text.format(T="int"), validate=True)   # an int4, not a float4
    # (normalize makes an int declared and then assigned once one definition: `int s = ...;`)
    assert "int4 s = make_int4(" in result.output and "float4" not in result.output


def test_every_declarator_of_a_dim3_declaration_is_read():
    """cfd's `dim3 Dg(nelr / BLOCK_SIZE_2), Db(BLOCK_SIZE_2);` gave Dg the text `nelr / B), Db(B` and no Db."""
    from gpgpu_opt.launch.host_scopes import declarations_at

    text = "void f(int n) { dim3 Dg(n / 2), Db(128), Dz{4, 2}; k<<<Dg, Db>>>(n); }"
    found = declarations_at(text, text.index("k<<<"))
    assert found.dim3 == {"Dg": ["n / 2"], "Db": ["128"], "Dz": ["4", "2"]}


def test_an_unguarded_kernel_is_not_widened_when_its_launch_block_is_unknown(tmp_path):
    """Blocks cut from an assumed 256 would cover 256 naive threads each, past the launch's nelr / 192."""
    _, result, notes = _compile(tmp_path, """
        __global__ void k(int n, float *a, float *b) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            b[i] = 2.0f * a[i];
        }
        int main(int argc, char **argv) {
            float *a, *b; int threads = atoi(argv[1]), n = 192 * 5;
            k<<<n / threads, threads>>>(n, a, b);
        }
    """)
    assert not result.kernels[0].rewritten
    assert any("not widened: the kernel has no guard and the block its launch uses is not known" in n
               for n in notes), notes
