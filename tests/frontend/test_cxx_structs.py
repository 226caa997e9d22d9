"""Structs as C++ programs write them: the tag is a type name (`Node *p`), arrays of POD structs read field
by field, and accesses written as pointer dereferences (`*(p + i)`)."""
import textwrap

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.frontend.scanner import find_typedefs


def write(tmp_path, text, name="k.cu"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def notes_of(diagnostics: Diagnostics) -> str:
    return "\n".join(str(d) for d in diagnostics.notes)


BFS_STYLE = """
    struct Node { int starting; int no_of_edges; };
    struct List { List *next; Node node; };
    __global__ void visit(Node *g_graph_nodes, List *l, int *cost, int n)
    {
        int tid = blockIdx.x * blockDim.x + threadIdx.x;
        if (tid < n)
            cost[tid] = g_graph_nodes[tid].starting + l[tid].node.no_of_edges;
    }
"""


def test_a_struct_tag_is_a_type_name_as_in_cxx(tmp_path):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(write(tmp_path, BFS_STYLE), diagnostics=diagnostics)
    kernel = program.kernel("visit")  # parsed: not passed through on "expected ... before '*'"
    assert [p.base_type for p in kernel.params[:2]] == ["Node", "List"]
    assert program.passed_through == []


@pytest.mark.parametrize("text", [
    "struct B : A { int x; };",                       # a base class
    "struct S { int x; } s;",                         # a definition with a declarator
    "struct S *p;",                                   # a declaration of a pointer
    "template <typename T> struct S { T x; };",       # a template
    "namespace ns { struct S { int x; }; }",          # not at file scope
])
def test_only_a_plain_definition_at_file_scope_is_given_the_implicit_typedef(text):
    assert not any("typedef struct S S" in t or "typedef struct B B" in t for t in find_typedefs(text))


def test_the_implicit_typedef_comes_before_the_definition_and_after_earlier_ones():
    found = find_typedefs("typedef float real; struct P { P *next; real v; }; union U { int i; float f; };")
    assert found == ["typedef float real;", "typedef struct P P; struct P { P *next; real v; };",
                     "typedef union U U; union U { int i; float f; };"]


def test_a_struct_with_methods_is_no_c_type_and_its_kernel_passes_through(tmp_path):
    diagnostics = Diagnostics(quiet=True)
    program = load_program(write(tmp_path, """
        struct V { float x; __device__ float twice() const { return 2 * x; } };
        __global__ void k(V *v, float *out) { out[threadIdx.x] = v[threadIdx.x].x; }
        __global__ void ok(float *out) { out[threadIdx.x] = 1.0f; }
    """), diagnostics=diagnostics)
    assert [k.name for k in program.kernels] == ["ok"]
    assert "'k' passed through unchanged" in notes_of(diagnostics)


# --- dereferences as subscripts (gpgpu_opt/frontend/dereferences.py) ---

def _kernel_text(body: str, params: str = "float *a, float *b, int n, int i") -> str:
    from pycparser import c_parser

    from gpgpu_opt.codegen import CudaGenerator
    from gpgpu_opt.frontend.dereferences import subscript_dereferences

    ast = c_parser.CParser().parse(
        "typedef struct { float lat, lng; } LatLong;"
        f"typedef struct {{ float x, y, z, w; }} float4; void k({params}) {{ {body} }}")
    func = ast.ext[-1]
    subscript_dereferences(func)
    return CudaGenerator().visit(func.body).strip().strip("{}").strip()


@pytest.mark.parametrize("body, expected", [
    ("*(b + i) = *(a + i);", "b[i] = a[i];"),
    ("*(i + b) = *a;", "b[i] = a[0];"),
    ("*b = 1.0f;", "b[0] = 1.0f;"),
    ("*(a + n * (i + 1) + i) = *(a + n * i + i);", "a[n * (i + 1) + i] = a[n * i + i];"),  # all int
    ("*(a + (n - 1)) = 0;", "a[n - 1] = 0;"),
    ("*(a + i - 1) = 0;", "a[i - 1] = 0;"),
    ("float *q = a + i; *(q + n - 1) = 0;", "float *q = a + i;\n  q[n - 1] = 0;"),
    ("*(a + blockIdx.x * blockDim.x + threadIdx.x) = 0;", "a[blockIdx.x * blockDim.x + threadIdx.x] = 0;"),
    ("b[0] = *(a + idx[i]);", "b[0] = a[idx[i]];"),
])
def test_a_dereference_of_a_pointer_is_its_subscript(body, expected):
    assert _kernel_text(body, "float *a, float *b, int n, int i, const int *idx") == expected


def test_a_member_through_a_pointer_is_a_member_of_its_element():
    got = _kernel_text("LatLong *p = g + i; b[i] = p->lat * p->lng;", "const LatLong *g, float *b, int i")
    assert got.splitlines()[-1].strip() == "b[i] = p[0].lat * p[0].lng;"


@pytest.mark.parametrize("body", [
    "*(a + threadIdx.x - 1) = 0;",                   # element -1 at thread 0; threadIdx.x - 1 wraps
    "*(a + threadIdx.x + n) = 0;",                   # n < 0 would wrap the unsigned sum likewise
    "*(a + u + 1) = 0;",                             # (1 is an int: a mix)
    "*(a + l + i) = 0;",                             # a long: not in the whitelist
    "*(a - i) = 0;",                                  # one term subtracted: nothing to gain
    "*((float4 *) (a + i)) = *((float4 *) b);",      # a reinterpretation
    "*(a + (b - a)) = 0;",                            # a pointer difference in the offset
    "*a++ = 0;",
])
def test_other_dereferences_stay_as_written(body):
    assert "[" not in _kernel_text(body, "float *a, float *b, int n, int i, unsigned int u, long l")


DEREF_WRITE = """
    __global__ void scale(float *a, float *b, const float *c, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            float s = b[i] * *(c + i);
            *(b + i) = s + 1.0f;
            a[i] = b[i] + s;
        }
    }
    int main(int argc, char **argv)
    {
        int n = 4096 * argc;   /* known at run time: the widened kernel is chosen by size there */
        float *a, *b, *c;
        cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float)); cudaMalloc(&c, n * sizeof(float));
        scale<<<(n + 255) / 256, 256>>>(a, b, c, n);
        return 0;
    }
"""


@pytest.fixture(scope="module")
def deref_program(tmp_path_factory):
    return load_program(write(tmp_path_factory.mktemp("deref"), DEREF_WRITE), diagnostics=Diagnostics(quiet=True))


def test_a_store_through_a_dereference_is_a_write_access(deref_program):
    from gpgpu_opt.analysis import collect_accesses
    from gpgpu_opt.check.extents import written_arrays

    kernel = deref_program.kernel("scale")
    modes = {(a.array, a.index_text, a.mode) for a in collect_accesses(kernel)}
    assert ("b", "i", "write") in modes and ("c", "i", "read") in modes
    assert written_arrays(kernel) == {"a", "b"}


def test_restrict_and_vectorize_see_the_dereferences_and_the_check_passes(deref_program):
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with
    from gpgpu_opt.targets import get_target

    result = compile_with(deref_program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                             validate=True)
    (kernel,) = result.kernels
    assert kernel.validation.status == "passed"
    head = result.output.split("int main")[0]
    # c, read through a dereference only, is read-only; b, stored through one, is not
    assert "const float *__restrict__ c" in head and "const float *__restrict__ b" not in head
    assert "((float4 *) b)[i / 4] = make_float4(" in head  # the store is widened like any other


# --- arrays of structs whose layout is certain (gpgpu_opt/frontend/struct_layouts.py) ---

def _layouts(text: str) -> dict:
    from gpgpu_opt.frontend.struct_layouts import uniform_layouts
    from gpgpu_opt.frontend.cuda_c import parse_c

    ast = parse_c(f'#line 1 "<typedefs>"\n{text}', "<t>")
    return {name: (l.field_type, l.fields) for name, l in uniform_layouts(ast).items()}


@pytest.mark.parametrize("text, expected", [
    ("typedef struct latLong { float lat; float lng; } LatLong;", {"LatLong": ("float", ("lat", "lng"))}),
    ("typedef struct P P; struct P { double x, y, z; };",
     {"P": ("double", ("x", "y", "z")), "struct P": ("double", ("x", "y", "z"))}),
    ("struct Node { int starting; int no_of_edges; };", {"struct Node": ("int", ("starting", "no_of_edges"))}),
    ("typedef struct { float x; int n; } Mixed;", {}),             # two field types: padding is possible
    ("typedef struct { float x; float v[3]; } WithArray;", {}),
    ("typedef struct { int a : 3; int b : 5; } Bits;", {}),
    ("typedef struct { float2 p; float2 v; } Vectors;", {}),          # vector fields: not in the whitelist
    ("typedef struct { char c; char d; } Chars;", {}),
    ("typedef union { float f; int i; } U;", {}),
])
def test_only_structs_of_one_scalar_field_type_have_a_certain_layout(text, expected):
    assert _layouts(text) == expected


AOS = """
    struct Particle { float x, y, z; };
    __global__ void drift(Particle *p, float *out, float dt, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        Particle *q = p + i;
        if (i < n) {
            p[i].x += dt * q->z;
            out[i] = p[i].y;
        }
    }
    int main() { Particle *p; float *o; cudaMalloc(&p, 1024 * sizeof(Particle)); cudaMalloc(&o, 4096);
                 drift<<<4, 256>>>(p, o, 0.1f, 1024); return 0; }
"""


@pytest.fixture(scope="module")
def aos_program(tmp_path_factory):
    return load_program(write(tmp_path_factory.mktemp("aos"), AOS), diagnostics=Diagnostics(quiet=True))


def test_a_field_of_an_array_of_structs_is_an_access_of_stride_the_field_count(aos_program):
    import sympy

    from gpgpu_opt.analysis import collect_accesses
    from gpgpu_opt.analysis.symbolic import BDIM, BID, TID

    kernel = aos_program.kernel("drift")
    i = BID["x"] * BDIM["x"] + TID["x"]
    got = {(a.mode, a.extra.get("field"), sympy.expand(a.analysis_index - 3 * i), a.element_bytes, a.kind)
           for a in collect_accesses(kernel) if a.array == "p"}
    assert got == {("read", "x", 0, 4, "struct-field"), ("write", "x", 0, 4, "struct-field"),
                   ("read", "z", 2, 4, "struct-field"),   # through `q = p + i`, `q->z`
                   ("read", "y", 1, 4, "struct-field")}
    assert all(a.index is None for a in collect_accesses(kernel) if a.array == "p")  # no pass rewrites them


def test_an_array_of_structs_is_analysed_and_goes_through_the_passes(aos_program):
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with
    from gpgpu_opt.targets import get_target

    diagnostics = Diagnostics(quiet=True)
    result = compile_with(aos_program, get_target("sm_90"), parse_pass_list(None), diagnostics)
    assert not result.kernels[0].transformed
    assert "'drift' left as written" not in notes_of(diagnostics)  # the emulator models its fields (emulator/structs.py)
    assert "races" not in notes_of(diagnostics)


def test_a_call_through_a_function_pointer_stays_a_call():
    assert _kernel_text("float (*f)(float) = 0; b[i] = (*f)(a[i]);").endswith("b[i] = (*f)(a[i]);")


def test_a_pointer_that_moves_gives_accesses_of_its_array_at_an_unknown_offset(tmp_path):
    from gpgpu_opt.analysis import collect_accesses

    program = load_program(write(tmp_path, """
        __global__ void walk(float *a, const float *b, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            float *p = a + i;
            for (int k = 0; k < 4; k++) {
                *p = b[i] + k;   // a[i + k * n], not a[i] four times
                p += n;
            }
        }
    """), diagnostics=Diagnostics(quiet=True))
    (store,) = [a for a in collect_accesses(program.kernel("walk")) if a.array == "a"]
    assert store.mode == "write" and store.kind == "unresolved" and store.index is None
