"""The compiler's caches are exact: a cached answer equals a fresh computation, keys tell apart what the
answers depend on, and what callers may edit is a copy (what made the suite fast)."""
import copy
import textwrap

import pytest
import sympy

from gpgpu_opt import analysis
from gpgpu_opt.check import sanity
from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.analysis.coalescing import substitutions
from gpgpu_opt.analysis.reuse import _elements_read, _footprint
from gpgpu_opt.analysis.symbolic import TID, _is_affine, is_affine, iterator_symbol
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.frontend import load_program, scanner
from gpgpu_opt.rewriting.cbuild import _parsed_snippet, parse_statements
from gpgpu_opt.targets import get_target

WINDOW = """
    __global__ void k(const float *in, float *out, int n) {
        int x = blockIdx.x * blockDim.x + threadIdx.x;
        float s = 0.0f;
        for (int i = 0; i < BOUND; i++)
            s += in[x + i];
        out[x] = s;
    }
"""


def kernel(tmp_path, text, name="k.cu"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_program(str(path)).kernels[0]


def window_read(tmp_path, bound: int):
    k = kernel(tmp_path, WINDOW.replace("BOUND", str(bound)), f"w{bound}.cu")
    return next(a for a in collect_accesses(k) if a.array == "in")


def fresh_footprint(access, subs, block, block_id=(1, 1)):
    loops = tuple((l.var, l.start, l.bound, l.comparison, l.step, l.multiplicative) for l in access.loops)
    return _elements_read.__wrapped__(access.evaluable_index, loops, frozenset(subs.items()), tuple(block), None,
                                      tuple(block_id))


def test_a_cached_footprint_equals_a_fresh_one_and_the_loop_bound_is_part_of_the_key(tmp_path):
    block = (32, 1)
    three, five = window_read(tmp_path, 3), window_read(tmp_path, 5)
    assert three.index == five.index                       # the same subscript, different loops
    subs = substitutions(three, block, {})[0]
    for _ in range(2):                                     # the second time from the cache
        assert _footprint(three, subs, block) == fresh_footprint(three, subs, block) == set(range(32, 32 + 34))
        assert _footprint(five, subs, block) == fresh_footprint(five, subs, block) == set(range(32, 32 + 36))
    assert _footprint(three, subs, block, block_id=(2, 1)) == set(range(64, 64 + 34))


def test_footprints_are_frozen_so_no_caller_can_edit_the_cached_one(tmp_path):
    read = window_read(tmp_path, 3)
    found = _footprint(read, substitutions(read, (32, 1), {})[0], (32, 1))
    with pytest.raises(AttributeError):
        found.add(-1)


def test_analyze_kernel_twice_gives_the_same_report_and_edits_of_one_do_not_reach_the_next(tmp_path):
    k = kernel(tmp_path, WINDOW.replace("BOUND", "3"))
    target = get_target("g80")
    analysis._FACTS.clear()
    first = analyze_kernel(k, target, (32, 1))
    expected = copy.deepcopy(first.as_dict())           # as_dict shares the reuse list
    for report in first.reports:
        report.reuse.append({"kind": "edited"})
        if report.coalescing is not None:
            report.coalescing.assumptions.append("edited")
    second = analyze_kernel(k, target, (32, 1))                   # from the cache
    assert second.as_dict() == expected
    analysis._FACTS.clear()
    assert analyze_kernel(k, target, (32, 1)).as_dict() == expected   # and computed afresh


def test_the_access_facts_key_tells_apart_the_block_the_target_and_the_loops(tmp_path):
    three, five = window_read(tmp_path, 3), window_read(tmp_path, 5)
    g80, sm90 = get_target("g80"), get_target("sm_90")
    keys = {analysis._facts_key(three, g80, (32, 1), {}, ("x",)), analysis._facts_key(five, g80, (32, 1), {}, ("x",)),
            analysis._facts_key(three, sm90, (32, 1), {}, ("x",)), analysis._facts_key(three, g80, (64, 1), {}, ("x",)),
            analysis._facts_key(three, g80, (32, 1), {"n": 4}, ("x",))}
    assert len(keys) == 5


def test_is_affine_cached_equals_computed():
    x, i, n = TID["x"], iterator_symbol("i"), sympy.Symbol("n", integer=True)
    for expr, expected in ((x + n * i, True), (x * i, False), (sympy.floor(x / 2), False), (n * n + x, True)):
        for _ in range(2):
            assert is_affine(expr, [x, i]) is expected
            assert _is_affine.__wrapped__(expr, (x, i)) is expected


def test_tokenize_hands_out_a_new_list_each_time():
    text = "__global__ void k(float *a) { a[0] = 1; }\n"
    first = scanner.tokenize(text)
    first.clear()
    again = scanner.tokenize(text)
    assert again and [t.text for t in again][:3] == ["__global__", "void", "k"]
    assert again == list(scanner._scanned.__wrapped__(text))


def test_parse_statements_hands_out_new_nodes_equal_to_a_fresh_parse():
    source = "for (int r = threadIdx.y; r < 18; r += 16) { t[r] = in[r * n]; }\n__syncthreads();"
    printer = CudaGenerator()
    first = parse_statements(source)
    first[0].stmt.block_items.clear()                           # a caller edits what it was given
    again = parse_statements(source)
    fresh = _parsed_snippet.__wrapped__(source)
    assert [printer.visit(s) for s in again] == [printer.visit(s) for s in fresh]
    assert again[0] is not first[0] and again[0].stmt.block_items


def test_a_text_that_does_not_parse_fails_every_time_and_a_good_kernel_passes_every_time(tmp_path):
    k = kernel(tmp_path, WINDOW.replace("BOUND", "3"))
    for _ in range(2):                                           # the second time from the cache
        sanity.check_kernel(k.funcdef)
        with pytest.raises(Exception, match="before"):           # failures are never cached
            sanity._parses("int f(void) { int x = ; }")


def test_stencil_offsets_cached_equal_computed():
    from gpgpu_opt.analysis.footprint import _offsets
    j, i = iterator_symbol("j"), iterator_symbol("i")
    args = (j - 1, i - 2, ("j", "i"), ((0, 1, 2), (0, 1, 2, 3, 4)))
    expected = {(dy - 1, dx - 2) for dy in range(3) for dx in range(5)}
    assert _offsets(*args) == _offsets.__wrapped__(*args) == expected
    assert _offsets(*args) == expected                            # from the cache
    assert _offsets(j - 1, i - 2, ("j", "i"), ((0, 1), (0, 1, 2, 3, 4))) != expected   # other loop values


def many_kernels(count: int) -> str:
    kernels = "".join(f"__global__ void scale{k}(float *a, const float *b, int n)\n{{\n"
                      f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) a[i] = b[i] * {k}.0f;\n}}\n"
                      for k in range(count))
    launches = "".join(f"    scale{k}<<<(n + 255) / 256, 256>>>(a, b, n);\n" for k in range(count))
    return kernels + ("int main()\n{\n    float *a, *b;\n    int n = 1 << 20;\n    cudaMalloc(&a, n * sizeof(float));\n"
                      f"    cudaMalloc(&b, n * sizeof(float));\n{launches}    return 0;\n}}\n")


def test_what_holds_for_the_whole_program_is_computed_once_whatever_the_number_of_kernels(tmp_path):
    """Computed per kernel, each of these read the whole program again: a file of 1000 kernels launched from
    one main() took minutes (a buffer passed to every launch was judged at every launch, over all its uses)."""
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.launch.host_view import view_of
    from gpgpu_opt.passes import parse_pass_list
    from gpgpu_opt.pipeline import compile_with

    path = tmp_path / "many.cu"
    path.write_text(many_kernels(6))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list("restrict"), Diagnostics(quiet=True),
                          validate=False)
    assert all(r.optimized.params[0].is_restrict for r in result.kernels)     # every launch was read
    computed = view_of(result.program).computed
    for question in ("definable vectors", "buffers", "launches by name", "sites by kernel", "words",
                     "launch reading refused"):
        assert computed[question] == 1, (question, computed[question])


def test_the_writes_of_a_name_are_the_same_from_the_index_and_the_memo(tmp_path):
    from gpgpu_opt.launch.host_scopes import HostFunction, _writes_of, writes_of

    fn = HostFunction("int main() { int n = 4; dim3 g(n); g.x = n + 1; n++; int *p = &n; k<<<g, 1>>>(p); }")
    whole = (0, len(fn.tokens), -1)
    for name in ("n", "g", "p"):
        first = writes_of(fn, name, *whole)
        first[0].clear() if first[0] else None          # a caller may edit what it is given
        assert writes_of(fn, name, *whole) == _writes_of(fn, name, *whole)
