"""Property: random small kernels compile and compute what the naive kernel computes (no crash, no internal
error, no miscompile, no race), both after the raw passes (no emulated check to catch a bug) and after
`compile` (the whole pipeline, its check included).

Each feature family is a parameter, so one can be run alone (`-k quasi_affine`):
- affine: affine subscripts, loops of several steps, local accumulators (`float s = 1.0f; s += A[..]`);
- quasi_affine: subscripts with `/`, `%`, `>>` by constants (non-negative, so in bounds);
- volatile: volatile pointer parameters (never widened, staged or merged: the qualifier must survive);
- launch: a launch in the file with blocks that divide nothing (32, 96, 8x8, 16x4), thread spaces that
  divide no tile;
- no_launch: no launch in the file, emulated under such blocks (any launch the naive kernel is valid for).

CI runs a few examples per family and mode; the large run is
    FUZZ_EXAMPLES=5000 python -m pytest tests/fuzz -q -o addopts="" -k "affine and not quasi"
"""
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("gpgpu_opt.emulator")
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st  # noqa: E402
from pycparser import c_ast  # noqa: E402

from gpgpu_opt.ast_util import walk  # noqa: E402
from gpgpu_opt.codegen import kernel_source  # noqa: E402
from gpgpu_opt.diagnostics import CompileError, Diagnostics  # noqa: E402
from gpgpu_opt.frontend import load_program  # noqa: E402
from gpgpu_opt.passes import parse_pass_list  # noqa: E402
from gpgpu_opt.pipeline import compile_with, default_block  # noqa: E402
from gpgpu_opt.targets import get_target  # noqa: E402
from gpgpu_opt.launch.contract import launch_assumptions  # noqa: E402
from gpgpu_opt.check.cases import Case, run_case  # noqa: E402
from gpgpu_opt.check.launches import check_launch  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
#: A seed of one's own (a shard of a long run: FUZZ_SEED=1, 2, ... run other examples); else derandomized.
SEED = os.environ.get("FUZZ_SEED")

FAMILIES = ["affine", "quasi_affine", "volatile", "launch", "no_launch"]
#: Families expected to fail, with the reason (none now: fixes are in).
PENDING: dict[str, str] = {}
#: Naive blocks that divide no tile and no power-of-two thread space.
BLOCKS_1D = [(32, 1), (96, 1)]
BLOCKS_2D = [(32, 1), (96, 1), (8, 8), (16, 4)]


@st.composite
def a_subscript(draw, family: str, loop: bool) -> str:
    """An A subscript: affine in y, x (and the loop's i), or for quasi_affine that wrapped in `/`, `%`, `>>` by
    a constant (its operand is never negative, so C's truncation and the floor agree, and it stays in bounds)."""
    cx, cy, ci = draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(0, 3))
    off = draw(st.integers(0, 17))
    index = f"{cy} * y * m + {cx} * x + {ci} * i + {off}" if loop else f"{cy} * y * m + {cx} * x + {off}"
    if family != "quasi_affine":
        return index
    shape = draw(st.sampled_from(["div", "mod", "shift", "div_part", "mod_part"]))
    d = draw(st.integers(2, 9))
    if shape == "div":
        return f"({index} + {draw(st.integers(0, 6))}) / {d}"
    if shape == "mod":
        return f"({index}) % {d}"
    if shape == "shift":
        return f"({index}) >> {draw(st.integers(1, 3))}"
    part = f"x / {d}" if shape == "div_part" else f"x % {d}"  # only the x term quasi-affine: `A[(x/2)*m + k]`
    return f"{cy} * y * m + ({part}) * {draw(st.integers(1, 3))} + {off}"


@st.composite
def accumulation(draw, family: str, loop: bool) -> str:
    """The statements that compute the local s the kernel stores: an initialisation, `+=` from loads
    (in a loop of several steps, or not), and a few more uses of the local."""
    read = draw(a_subscript(family, loop))
    init = draw(st.sampled_from(["1.0f", "0.0f", "A[{}]".format(draw(a_subscript(family, False)))]))
    term = f"A[{read}] * B[i]" if loop else f"A[{read}]"
    if family == "volatile" and draw(st.booleans()):
        term = f"{term} + A[{read}]"  # two loads of one volatile element stay two loads
    body = f"s += {term};"
    if loop:
        step = draw(st.sampled_from(["i++", "i += 2", "i = i + 3", "i *= 2"]))
        start = 1 if step == "i *= 2" else draw(st.integers(0, 2))
        bound = draw(st.sampled_from(["m", "7", "m + 3"]))
        body = f"for (int i = {start}; i < {bound}; {step}) {body}"
    more = draw(st.sampled_from(["", "s *= 0.5f;", "float t = s * 2.0f; s += t;",
                                 "s += A[{}];".format(draw(a_subscript(family, False)))]))
    return f"float s = {init}; {body} {more}"


@st.composite
def kernels(draw, family: str):
    """(source, sizes, thread space, naive block or None, target) of one generated program."""
    two_d = draw(st.booleans())
    guard = draw(st.booleans())
    loop = draw(st.booleans())
    y = "int y = blockIdx.y * blockDim.y + threadIdx.y;" if two_d else "int y = 0;"
    inner = f"{draw(accumulation(family, loop))} C[y * n + x] = s;"
    cond = "x < n && y < m" if two_d else "x < n"
    qualifiers = {"A": "const float *", "C": "float *"}
    if family == "volatile":
        for name in draw(st.sampled_from([["A"], ["C"], ["A", "C"]])):
            qualifiers[name] = "const volatile float *" if name == "A" else "volatile float *"
    code = f"""
__global__ void fuzz({qualifiers["A"]}A, const float *B, {qualifiers["C"]}C, int n, int m) {{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    {y}
    {"if (" + cond + ") {" if guard else "{"}
        {inner}
    }}
}}
"""
    block = None
    if family in ("launch", "no_launch"):
        block = draw(st.sampled_from(BLOCKS_2D if two_d else BLOCKS_1D))
    if guard:
        n, m = draw(st.integers(1, 40)), draw(st.integers(1, 20))
        space = (n, m if two_d else 1)
    elif block is not None:  # an unguarded kernel is valid for any whole number of its blocks
        space = (block[0] * draw(st.integers(1, 3)), block[1] * draw(st.integers(1, 3)) if two_d else 1)
        n, m = space[0], space[1]
    else:
        space = (draw(st.sampled_from([16, 32, 48])), draw(st.sampled_from([16, 32])) if two_d else 1)
        n, m = space[0], max(space[1], 1)
    if family == "launch":
        bx, by = block
        grid = f"dim3((n + {bx - 1}) / {bx}, (m + {by - 1}) / {by})" if guard else f"dim3(n / {bx}, m / {by})"
        code += f"""
void host(const float *A, const float *B, float *C, int n, int m)
{{
    fuzz<<<{grid}, dim3({bx}, {by})>>>(A, B, C, n, m);
}}
"""
    return code, {"n": n, "m": m}, space, block, draw(st.sampled_from(["g80", "sm_90"]))


def _a_extent(sizes: dict, space: tuple[int, int]) -> int:
    """Elements of A that bound every subscript the generator writes (coefficients <= 3, offsets <= 17 + 6,
    loop iterators below m + 3 or 7): for subscripts the emulator cannot bound by itself."""
    m = sizes["m"]
    return 3 * (space[1] - 1) * m + 3 * (space[0] - 1) + 3 * max(m + 3, 7) + 24


def _volatile_kept(naive, optimized) -> str | None:
    """Why the optimized kernel does not keep each volatile parameter's accesses as they are, or None: the
    qualifier must survive, no cast may reach the array (a vector access casts the volatile away), and it
    names no fewer elements than the naive kernel (`A[x] + A[x]` is two loads, not one kept in a local)."""
    text = kernel_source(optimized.funcdef)
    for param in naive.funcdef.decl.type.args.params:
        quals = getattr(getattr(param.type, "type", None), "quals", [])
        if "volatile" not in quals:
            continue
        kept = [p for p in optimized.funcdef.decl.type.args.params if p.name == param.name]
        if not kept or "volatile" not in getattr(kept[0].type.type, "quals", []):
            return f"'{param.name}' lost its volatile qualifier:\n{text}"
        for node in walk(optimized.funcdef.body):
            if isinstance(node, c_ast.Cast) and any(isinstance(n, c_ast.ID) and n.name == param.name
                                                    for n in walk(node.expr)):
                return f"a cast reaches volatile '{param.name}':\n{text}"
        if _references(optimized, param.name) < _references(naive, param.name):
            return f"fewer accesses to volatile '{param.name}' than the naive kernel makes:\n{text}"
    return None


def _references(kernel, array: str) -> int:
    return sum(1 for n in walk(kernel.funcdef.body)
               if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID) and n.name.name == array)


def _family_params():
    for family in FAMILIES:
        marks = [pytest.mark.xfail(reason=f"pending: {PENDING[family]}", strict=False)] if family in PENDING else []
        for mode in ("raw", "compile"):
            yield pytest.param(family, mode, marks=marks, id=f"{mode}-{family}")


def _phases(family: str):
    """A pending family fails fast in CI (no shrinking); FUZZ_SHRINK=1 shrinks it to a minimal example."""
    if family in PENDING and not os.environ.get("FUZZ_SHRINK"):
        return [Phase.explicit, Phase.reuse, Phase.generate]
    return list(Phase)


@pytest.mark.parametrize("family, mode", list(_family_params()))
def test_generated_kernels_compute_what_the_naive_kernel_does(tmp_path_factory, family, mode):
    """`raw`: the passes without the emulated check (what they write on their own); `compile`: the whole
    pipeline with its check. Either way the kernel written must match the naive one on the generated case."""

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, phases=_phases(family),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(kernels(family))
    def check(sample):
        code, sizes, space, block, target = sample
        path = tmp_path_factory.mktemp("fuzz") / "fuzz.cu"
        path.write_text(code)
        diags = Diagnostics(quiet=True)
        program = load_program(str(path), diagnostics=diags)
        result = compile_with(program, get_target(target), parse_pass_list(None), diags,
                                 validate=mode == "compile", strict=True)
        kr = result.kernels[0]
        where = f"{code}\nsizes {sizes} space {space} naive block {block} target {target} ({mode})"
        if family == "volatile":
            problem = _volatile_kept(kr.naive, kr.optimized)
            assert problem is None, f"{where}\n{problem}"
        try:
            res = _compared(program, kr, Case(sizes, space, block=block))
        except CompileError as err:  # a subscript the emulator cannot bound (`(y * m) >> 1`, m not known >= 0)
            assert "cannot size array 'A'" in err.message, err.message
            res = _compared(program, kr, Case(sizes, space, block=block, extents={"A": _a_extent(sizes, space)}))
        if res is not None:  # None: the launch helpers refuse this naive launch at run time, with a message
            assert res.ok, f"{where}\n{res.error or res.mismatches}"

    (seed(int(SEED))(check) if SEED else check)()


def _compared(program, kr, case):
    """The optimized kernel against the naive one under the case's naive launch; for a kernel the file does
    not launch, through its launch helpers' check (None when they refuse the launch)."""
    fallback = default_block(program, kr.naive)
    contract = launch_assumptions(program, kr.naive, kr.optimized, kr.context.facts.naive_block)
    if contract is None:
        return run_case(kr.naive, kr.optimized, fallback, case, 3, program.device_functions)
    outcome = check_launch(kr.naive, kr.optimized, contract, fallback, case, 3, program.device_functions)
    assert outcome.result is not None or outcome.refusal, outcome.naive_invalid
    return outcome.result
