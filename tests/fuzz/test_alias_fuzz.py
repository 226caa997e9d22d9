"""Property: generated host programs that can make two launch arguments point at one buffer are never
proved alias-free, and programs that only read their buffers are.

The generator is the ground truth: it tracks, for each buffer variable, the allocations it may hold after
each statement (an aliasing spelling copies one variable's set into another; a conditional one adds to it),
so it knows whether the launch `k(X, Y)` may pass one allocation twice, whatever the proof says. The buffer
variables are locals of main, or file-scope variables that a function of their own allocates (and that
other functions may then change).

CI runs a few dozen examples; the large run is
    FUZZ_EXAMPLES=5000 python -m pytest tests/fuzz/test_alias_fuzz.py -q
"""
import os
from dataclasses import dataclass, field

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from gpgpu_opt.analysis.aliasing import alias_facts  # noqa: E402
from gpgpu_opt.diagnostics import Diagnostics  # noqa: E402
from gpgpu_opt.frontend import load_program  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))

KERNEL = """__global__ void k(float *a, float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = b[i] + 1.0f;
}
"""


@dataclass
class Host:
    """A main function being generated, and what each buffer variable may hold."""
    names: list[str]
    top: list[str] = field(default_factory=list)           # definitions before main (helpers, macros)
    body: list[str] = field(default_factory=list)
    holds: dict[str, set[int]] = field(default_factory=dict)
    safe: bool = True                                      # only uses the proof should accept
    fresh: int = 0
    file_scope: bool = False                               # the buffers are file-scope variables

    def allocate(self, v: str) -> None:
        self.fresh += 1
        self.holds[v] = {self.fresh}

    def copy(self, into: str, source: str, maybe: bool = False) -> None:
        self.holds[into] = (self.holds[into] | self.holds[source]) if maybe else set(self.holds[source])

    def define(self, text: str) -> None:
        if text not in self.top:
            self.top.append(text)


# Statements that only read buffer variables (or allocate them anew): the proof must accept them.
def _memcpy(h, a, b, k):
    h.body.append(f"cudaMemcpy({a}, host, bytes, cudaMemcpyHostToDevice);")


def _memset(h, a, b, k):
    h.body.append(f"cudaMemset(({a}), 0, bytes);")


def _check(h, a, b, k):
    h.body.append(f"if ({a} == NULL || {a} == {b}) return 1;")


def _print(h, a, b, k):
    h.body.append(f'printf("%p %p\\n", (void *){a}, {b} + 1);')


def _copy_out(h, a, b, k):
    h.body.append(f"float *view{k} = {a} + 2; (void)view{k};")


def _reallocate(h, a, b, k):
    h.body.append(f"{a} = NULL; cudaMalloc((void **)&{a}, bytes);")
    h.allocate(a)


def _read_in_lambda(h, a, b, k):
    h.body.append(f"[&] {{ cudaMemset({a}, 0, bytes); }}();")


def _user_reader(h, a, b, k):
    h.define("void clear(float *p, size_t bytes) { cudaMemset(p, 0, bytes); }")
    h.body.append(f"clear({a}, bytes);")


def _allocation_helper(h, a, b, k):
    h.define("float *fresh_buffer(size_t bytes)\n{\n    float *t;\n    cudaMalloc((void **)&t, bytes);\n    return t;\n}")
    h.body.append(f"{a} = fresh_buffer(bytes);")
    h.allocate(a)


def _exchange(h, a, b, k):
    """The ping-pong swap of iterative stencils (hotspot3D): the two keep distinct buffers (file-scope
    buffers may not be swapped: the proof refuses it, which is no miscompile)."""
    h.body.append(f"{{ float *t{k} = {a}; {a} = {b}; {b} = t{k}; }}")
    h.holds[a], h.holds[b] = h.holds[b], h.holds[a]
    h.safe = h.safe and not h.file_scope


def _shadowing_parameter(h, a, b, k):
    """A function's parameter named like a buffer is another variable: assigning it leaves the buffer."""
    h.define(f"void touch_{b}_{k}(float *{b}) {{ {b} = {a if h.file_scope else 'NULL'}; (void){b}; }}")
    h.body.append(f"touch_{b}_{k}(NULL);")


def _shadowing_local(h, a, b, k):
    h.define(f"void local_{b}_{k}(void) {{ float *{b} = NULL; cudaMalloc((void **)&{b}, 4); {b} = "
             f"{a if h.file_scope else 'NULL'}; (void){b}; }}")
    h.body.append(f"local_{b}_{k}();")


SAFE = [_shadowing_parameter, _shadowing_local, _exchange, _memcpy, _memset, _check, _print, _copy_out, _reallocate, _read_in_lambda, _user_reader, _allocation_helper]


# Statements after which `b` may hold what `a` holds (each an aliasing spelling), or that the proof cannot
# follow. The flag says whether the copy happens on every run (False: `b` may also keep its own buffer).
def _assign(h, a, b, k):
    h.body.append(f"{b} = {a};")
    h.copy(b, a)


def _reference(h, a, b, k):
    h.body.append(f"float *&ref{k} = {b}; ref{k} = {a};")
    h.copy(b, a)


def _auto_reference(h, a, b, k):
    h.body.append(f"auto &ref{k} = {b}; ref{k} = ({a});")
    h.copy(b, a)


def _macro(h, a, b, k):
    h.define(f"#define SHARE_{b}_{a} {b} = {a}")
    h.body.append(f"SHARE_{b}_{a};")
    h.copy(b, a)


def _helper(h, a, b, k):
    h.define("void alias_to(float *&to, float *from) { to = from; }")
    h.body.append(f"alias_to(({b}), ({a}));")
    h.copy(b, a)


def _swap(h, a, b, k):
    h.body.append(f"std::swap({a}, {b});")
    h.holds[a], h.holds[b] = h.holds[b], h.holds[a]


def _pointer_to_pointer(h, a, b, k):
    h.body.append(f"float **pp{k} = &{b}; *pp{k} = {a};")
    h.copy(b, a)


def _comma(h, a, b, k):
    h.body.append(f"n = n + 0, {b} = {a};")
    h.copy(b, a)


def _comma_lvalue(h, a, b, k):
    h.body.append(f"(0, {b}) = {a};")
    h.copy(b, a)


def _lambda(h, a, b, k):
    h.body.append(f"[&] {{ {b} = {a}; }}();")
    h.copy(b, a)


def _ternary_lvalue(h, a, b, k):
    h.body.append(f"(n > 2 ? {b} : {a}) = {a};")
    h.copy(b, a, maybe=True)


def _conditional(h, a, b, k):
    h.body.append(f"if (n > 2) {{ {b} = {a}; }}")
    h.copy(b, a, maybe=True)


def _through_copy(h, a, b, k):
    h.body.append(f"float *c{k} = {a}; {b} = c{k};")
    h.copy(b, a)


def _ifdef(h, a, b, k):
    h.define(f"#define ENABLE_{k}")
    h.body.append(f"#ifdef ENABLE_{k}\n    {b} = {a};\n#endif")
    h.copy(b, a)


def _helper_allocation(h, a, b, k):
    h.define("void twin(float **p, float **q) { cudaMalloc((void **)p, 64); *q = *p; }")
    h.body.append(f"twin(&{a}, &{b});")
    h.allocate(a)
    h.copy(b, a)


def _vexing_reference(h, a, b, k):
    h.body.append(f"float *&r{k}({b}); r{k} = {a};")
    h.copy(b, a)


def _struct(h, a, b, k):
    h.define("struct Slot { float **p; };")
    h.body.append(f"Slot s{k} = {{ &{b} }}; *s{k}.p = {a};")
    h.copy(b, a)


def _host_only(h, a, b, k):
    h.body.append(f"#ifndef __CUDA_ARCH__\n    {b} = {a};\n#endif")
    h.copy(b, a)


def _operator(h, a, b, k):
    h.define("struct Sink {};\nfloat *sink_source;\nvoid operator<<(Sink, float *&p) { p = sink_source; }")
    h.body.append(f"sink_source = {a}; Sink() << {b};")
    h.copy(b, a)


def _returning_helper(h, a, b, k):
    h.define("float *same(float *p) { return p; }")
    h.body.append(f"{b} = same({a});")
    h.copy(b, a)


def _pool_helper(h, a, b, k):
    h.define("float *g_pool;\nfloat *from_pool(size_t bytes)\n{\n    float *t;\n    cudaMalloc((void **)&t, bytes);\n"
             "    return g_pool;\n}")
    h.body.append(f"g_pool = {a}; {b} = from_pool(bytes);")
    h.copy(b, a)


def _half_exchange(h, a, b, k):
    h.body.append(f"float *t{k} = {a}; {a} = {b}; (void)t{k};")
    h.copy(a, b)


def _wrong_exchange(h, a, b, k):
    h.body.append(f"float *t{k} = {a}; {a} = {b}; {b} = {a}; (void)t{k};")
    h.copy(a, b)


def _elsewhere(h, a, b, k):
    """Another function assigns the buffer (a file-scope one: for locals, that function names another
    variable, which the ground truth says too)."""
    h.define(f"void share_{b}_{a}_{k}(float *{a}) {{ {b} = {a}; }}")
    h.body.append(f"share_{b}_{a}_{k}({a});")
    if h.file_scope:
        h.copy(b, a)


def _block_extern(h, a, b, k):
    """`extern` in a block names the file-scope variable itself."""
    h.define(f"void extern_{b}_{k}(float *p) {{ extern float *{b}; {b} = p; }}")
    h.body.append(f"extern_{b}_{k}({a});")
    if h.file_scope:
        h.copy(b, a)


def _shadow_then_global(h, a, b, k):
    """A function declares its own variable of the name in a block, then assigns the file-scope one."""
    h.define(f"void after_{b}_{k}(float *p) {{ {{ float *{b} = NULL; (void){b}; }} {b} = p; }}")
    h.body.append(f"after_{b}_{k}({a});")
    if h.file_scope:
        h.copy(b, a)


ALIASING = [_elsewhere, _block_extern, _shadow_then_global, _half_exchange, _wrong_exchange, _returning_helper, _pool_helper, _assign, _reference, _auto_reference, _macro, _helper, _swap, _pointer_to_pointer, _comma,
            _comma_lvalue, _lambda, _ternary_lvalue, _conditional, _through_copy, _ifdef, _helper_allocation,
            _vexing_reference, _struct, _host_only, _operator]


# How a launch argument names buffer v: (spelling, may it hold something other than v's allocations).
def _spell(draw, h: Host, v: str) -> tuple[str, set[int]]:
    form = draw(st.sampled_from(["plain", "parens", "cast", "offset", "element", "ternary"]))
    if form == "ternary":
        other = draw(st.sampled_from(h.names))
        h.safe = False  # the proof does not follow ?: (both branches would have to be buffers)
        return f"n > 1 ? {v} : {other}", h.holds[v] | h.holds[other]
    text = {"plain": v, "parens": f"({v})", "cast": f"(float *){v}", "offset": f"{v} + 1",
            "element": f"&{v}[0]"}[form]
    return text, h.holds[v]


@st.composite
def hosts(draw):
    names = ["dA", "dB", "dC"][:draw(st.integers(2, 3))]
    h = Host(names, file_scope=draw(st.booleans()))
    for v in names:
        h.allocate(v)
    for k in range(draw(st.integers(0, 5))):
        aliasing = draw(st.booleans())
        make = draw(st.sampled_from(ALIASING if aliasing else SAFE))
        a, b = draw(st.permutations(names))[:2]
        make(h, a, b, k)
        h.safe = h.safe and not aliasing
    x, y = draw(st.permutations(names))[:2]
    if draw(st.integers(0, 5)) == 0:
        y = x  # one buffer for both: the plain case of aliasing
    h.safe = h.safe and x != y
    (x_text, x_holds), (y_text, y_holds) = _spell(draw, h, x), _spell(draw, h, y)
    declarations = "float " + ", ".join(f"*{v} = NULL" for v in names) + ";"
    allocations = "\n    ".join(f"cudaMalloc((void **)&{v}, bytes);" for v in names)
    if h.file_scope:  # kmeans' style: file-scope buffers, allocated by a function of their own
        h.top.insert(0, f"{declarations}\n\nvoid allocate(size_t bytes)\n{{\n    {allocations}\n}}")
        declarations, allocations = "", "allocate(bytes);"
    body = "\n    ".join(h.body)
    launch = f"k<<<1, 64>>>({x_text}, {y_text}, n);"
    how = draw(st.sampled_from(["direct", "helper", "aliasing helper"]))
    if how == "helper":  # launched by a helper that main calls with the arguments
        h.define("void launch(float *p, float *q, int n) { k<<<1, 64>>>(p, q, n); }")
        launch = f"launch({x_text}, {y_text}, n);"
    elif how == "aliasing helper":  # ... that makes its parameters one buffer first
        h.define("void launch_same(float *p, float *q, int n) { p = q; k<<<1, 64>>>(p, q, n); }")
        launch = f"launch_same({x_text}, {y_text}, n);"
        x_holds = y_holds
        h.safe = False
    text = f"""{KERNEL}
{chr(10).join(h.top)}

int main(void)
{{
    int n = 64;
    size_t bytes = n * sizeof(float);
    float host[64] = {{0}};
    {declarations}
    {allocations}
    {body}
    {launch}
    cudaDeviceSynchronize();
    return 0;
}}
"""
    return text, bool(x_holds & y_holds), h.safe


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hosts())
def test_a_program_that_may_alias_its_arguments_is_never_proved_alias_free(tmp_path_factory, generated):
    text, may_alias, safe = generated
    path = tmp_path_factory.mktemp("alias") / "host.cu"
    path.write_text(text)
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    facts = alias_facts(program.kernels[0], program)
    assert facts.written == {"a"}
    if may_alias:
        assert not facts.restrict, text
    if safe:
        assert not may_alias, text   # the generator's own bookkeeping
        assert facts.restrict and facts.how == "launch sites", (facts.why_not, text)
