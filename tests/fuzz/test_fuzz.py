"""Property: random small affine kernels compile and verify (no crash, no miscompile, no race).

CI runs a few dozen examples; the large run is
    FUZZ_EXAMPLES=500 python -m pytest tests/fuzz -q
"""
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("gpgpu_opt.emulator")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from gpgpu_opt.diagnostics import Diagnostics  # noqa: E402
from gpgpu_opt.frontend import load_program  # noqa: E402
from gpgpu_opt.passes import parse_pass_list  # noqa: E402
from gpgpu_opt.pipeline import compile_program, default_block  # noqa: E402
from gpgpu_opt.targets import get_target  # noqa: E402
from gpgpu_opt.verify import Case, run_case  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))


@st.composite
def kernels(draw):
    two_d = draw(st.booleans())
    guard = draw(st.booleans())
    loop = draw(st.booleans())
    cx, cy, ci = draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(0, 3))
    off = draw(st.integers(0, 17))
    step = draw(st.sampled_from(["i++", "i += 2", "i = i + 3", "i *= 2"]))
    start = 1 if step == "i *= 2" else draw(st.integers(0, 2))
    bound = draw(st.sampled_from(["m", "7", "m + 3"]))
    y = "int y = blockIdx.y * blockDim.y + threadIdx.y;" if two_d else "int y = 0;"
    a_index = f"{cy} * y * m + {cx} * x + {ci} * i + {off}" if loop else f"{cy} * y * m + {cx} * x + {off}"
    body = f"s += A[{a_index}] * B[i];" if loop else f"s += A[{a_index}];"
    if loop:
        body = f"for (int i = {start}; i < {bound}; {step}) {body}"
    store = "C[y * n + x] = s;"
    inner = f"float s = 1.0f; {body} {store}"
    cond = "x < n && y < m" if two_d else "x < n"
    code = f"""
__global__ void fuzz(const float *A, const float *B, float *C, int n, int m) {{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    {y}
    {"if (" + cond + ") {" if guard else "{"}
        {inner}
    }}
}}
"""
    n, m = draw(st.integers(1, 40)), draw(st.integers(1, 20))
    space = (n, m if two_d else 1) if guard else (draw(st.sampled_from([16, 32, 48])),
                                                  draw(st.sampled_from([16, 32])) if two_d else 1)
    if not guard:
        n, m = space[0], max(space[1], 1)
    return code, {"n": n, "m": m}, space, draw(st.sampled_from(["g80", "sm_90"]))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels())
def test_generated_kernels_compile_and_verify(tmp_path_factory, sample):
    code, sizes, space, target = sample
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.cu"
    path.write_text(code)
    diags = Diagnostics(quiet=True)
    program = load_program(str(path), diagnostics=diags)
    result = compile_program(program, get_target(target), parse_pass_list(None), diags)
    kr = result.kernels[0]
    block = default_block(program, kr.naive)
    res = run_case(kr.naive, kr.optimized, block, Case(sizes, space), 3, program.device_functions)
    assert res.ok, f"{code}\nsizes {sizes} space {space} target {target}\n{res.error or res.mismatches}"
