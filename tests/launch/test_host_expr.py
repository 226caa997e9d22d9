"""Host expressions evaluated as the program computes them: launch configurations of real programs."""
import pytest

from gpgpu_opt.host_expr import HostScope
from gpgpu_opt.launch.host_scopes import declarations_at
from gpgpu_opt.host_expr import evaluate_int

MACROS = {"N": "100", "NI": "37", "NJ": "64", "DIM_THREAD_BLOCK_X": "32", "DIM_THREAD_BLOCK_Y": "8",
          "HALF": "(N / 2)"}

HOST = """
int main(int argc, char **argv) {
    const int M = 64;
    int threads = 256;
    int n = arg_int(argc, argv, 1, 1024);   /* known only at run time */
    int k = 3;
    k = 4;                                  /* assigned twice: unknown */
    float scale = 2.5f;
    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid((size_t)(ceil( ((float)N) / ((float)block.x) )), 1);
    dim3 grid1((size_t)ceil(((float)NJ) / ((float)block.x)), (size_t)(ceil(((float)NI) / ((float)block.y))));
    dim3 threads2 = dim3(16, 16);
    dim3 flat{128};
    // int commented = 5;
    kernel<<<grid, block>>>();
}
"""


def at_end_of_main():
    """What the launch site at the end of main sees."""
    return declarations_at(HOST, HOST.index("kernel<<<"))


@pytest.fixture
def scope():
    return HostScope(MACROS, {"m": 37}, at_end_of_main())


@pytest.mark.parametrize("text, value", [
    ("7 / 2", 3), ("-7 / 2", -3), ("-7 % 3", -1), ("7.0 / 2", 3.5), ("(float)7 / 2", 3.5), ("7 / 2.0f", 3.5),
    ("(int)3.9", 3), ("(unsigned int)(2.5 * 2)", 5), ("(size_t)ceil(7 / 2.0)", 4), ("ceil(7 / 2)", 3.0),
    ("floorf(3.7f)", 3.0), ("ceilf(1.2f)", 2.0), ("min(M, 10)", 10), ("max(m, M)", 64), ("sizeof(float) * M", 256),
    ("sizeof(double)", 8), ("m > 10 ? 1 : 2", 1), ("m < 10 && M > 1", 0), ("1 << 4", 16), ("0x10 + 010", 24),
    ("1024u / 4ul", 256), ("HALF + 1", 51), ("(m + threads - 1) / threads", 1), ("scale * 2", 5.0),
    ("block.x * block.y", 256), ("grid1.y", 5), ("threads2.y", 16), ("flat.y", 1),
])
def test_c_semantics(scope, text, value):
    result = scope.evaluate(text)
    assert result == value and type(result) is type(value)


@pytest.mark.parametrize("text", ["n", "k", "commented", "arg_int(1, 2, 3, 4)", "1 / 0", "block.w", "m.x",
                                  "static_cast<int>(m)", "M % 1.5", "undefined_macro + 1"])
def test_unknowns_are_none(scope, text):
    assert scope.evaluate(text) is None


@pytest.mark.parametrize("text, shape", [
    ("grid", (4, 1, 1)),                # (size_t)(ceil((float)100 / 32.0))
    ("grid1", (2, 5, 1)),               # ceil(64 / 32), ceil(37 / 8)
    ("block", (32, 8, 1)),
    ("threads2", (16, 16, 1)),
    ("flat", (128, 1, 1)),
    ("(m + 255) / 256", (1, 1, 1)),
    ("dim3(m / 16, m / 16)", (2, 2, 1)),
    ("n", (None, 1, 1)),                # an integer the host computes at run time
])
def test_dim3(scope, text, shape):
    assert scope.dim3(text) == shape


def test_given_values_win_over_declarations_and_macros():
    scope = HostScope(MACROS, {"N": 64, "M": 8}, at_end_of_main())
    assert scope.dim3("grid") == (2, 1, 1) and scope.evaluate("M") == 8


def test_a_dim3_declared_in_two_functions_is_each_functions_own():
    host = "void f() { dim3 b(16, 16); k<<<1, b>>>(); } void g() { dim3 b(32, 8); k<<<1, b>>>(); }"
    shapes = [HostScope({}, {}, declarations_at(host, site)).dim3("b") for site in (host.index("k<<<"), host.rindex("k<<<"))]
    assert shapes == [(16, 16, 1), (32, 8, 1)]


def test_evaluate_int_keeps_its_signature():
    assert evaluate_int("(W + 15) / 16", {"W": "40"}) == 3
    assert evaluate_int("global_x", {}) is None
