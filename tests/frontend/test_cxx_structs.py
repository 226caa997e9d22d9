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
    ("*(a + n * (i + 1) + i) = *(a + n * i + i);", "a[n * (i + 1) + i] = a[n * i + i];"),  # a parameter
    ("*(a + (n - 1)) = 0;", "a[n - 1] = 0;"),
    ("*(a + i - 1) = 0;", "a[i - 1] = 0;"),
    ("b[0] = *(a + idx[i]);", "b[0] = a[idx[i]];"),
])
def test_a_dereference_of_a_pointer_is_its_subscript(body, expected):
    assert _kernel_text(body, "float *a, float *b, int n, int i, const int *idx") == expected


def test_a_member_through_a_pointer_is_a_member_of_its_element():
    got = _kernel_text("LatLong *p = g + i; b[i] = p->lat * p->lng;", "const LatLong *g, float *b, int i")
    assert got.splitlines()[-1].strip() == "b[i] = p[0].lat * p[0].lng;"


@pytest.mark.parametrize("body", [
    "float *q = a + i; *(q + n - 1) = 0;",           # a local may point into a buffer: only exact forms
    "*(a - i) = 0;",                                  # -i of an unsigned i is no negative offset
    "*((float4 *) (a + i)) = *((float4 *) b);",      # a reinterpretation
    "*(a + (b - a)) = 0;",                            # a pointer difference in the offset
    "*a++ = 0;",
])
def test_other_dereferences_stay_as_written(body):
    assert "[" not in _kernel_text(body)


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
    int main()
    {
        float *a, *b, *c;
        cudaMalloc(&a, 4096 * sizeof(float)); cudaMalloc(&b, 4096 * sizeof(float)); cudaMalloc(&c, 4096 * sizeof(float));
        scale<<<16, 256>>>(a, b, c, 4096);
        return 0;
    }
"""


@pytest.fixture(scope="module")
def deref_program(tmp_path_factory):
    return load_program(write(tmp_path_factory.mktemp("deref"), DEREF_WRITE), diagnostics=Diagnostics(quiet=True))


def test_a_store_through_a_dereference_is_a_write_access(deref_program):
    from gpgpu_opt.analysis import collect_accesses
    from gpgpu_opt.verify import written_arrays

    kernel = deref_program.kernel("scale")
    modes = {(a.array, a.index_text, a.mode) for a in collect_accesses(kernel)}
    assert ("b", "i", "write") in modes and ("c", "i", "read") in modes
    assert written_arrays(kernel) == {"a", "b"}


def test_restrict_and_vectorize_see_the_dereferences_and_the_check_passes(deref_program):
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_program
    from gpgpu_opt.targets import get_target

    result = compile_program(deref_program, get_target("sm_90"), parse_pass_list(None), Diagnostics(quiet=True),
                             validate=True)
    (kernel,) = result.kernels
    assert kernel.validation.status == "passed"
    head = result.output.split("int main")[0]
    # c, read through a dereference only, is read-only; b, stored through one, is not
    assert "const float *__restrict__ c" in head and "const float *__restrict__ b" not in head
    assert "((float4 *) b)[i / 4] = make_float4(" in head  # the store is widened like any other
