"""Property: random elementwise `__half` kernels (half intrinsics, comparisons, a per-element branch, a store
read back in place), launched with a run-time element count, compile to the 8-half widening (`half8`) and
compute what the naive kernel computes at sizes no 8 divides, on the vector and the scalar paths, with the race
check; both after the raw passes and after `compile` (its check included).

CI runs a few examples per mode; the large run is
    FUZZ_EXAMPLES=500 python -m pytest tests/fuzz/test_half_fuzz.py -q -o addopts=""
"""
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings, strategies as st  # noqa: E402

from gpgpu_opt.codegen import kernel_source  # noqa: E402
from gpgpu_opt.diagnostics import Diagnostics  # noqa: E402
from gpgpu_opt.frontend import load_program  # noqa: E402
from gpgpu_opt.passes import parse_pass_list  # noqa: E402
from gpgpu_opt.pipeline import compile_with  # noqa: E402
from gpgpu_opt.targets import get_target  # noqa: E402
from gpgpu_opt.check.cases import Case, run_case  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
SEED = os.environ.get("FUZZ_SEED")
#: Element counts: ragged (scalar tails), below one vector, whole vectors.
SIZES = (8 * 13 + 5, 3, 64)


@st.composite
def a_value(draw, inputs: list[str], depth: int = 0) -> str:
    if depth > 2 or draw(st.integers(0, 9)) < 3:
        return draw(st.sampled_from([f"{a}[i]" for a in inputs] + ["alpha", "__float2half(-1.25f)"]))
    op = draw(st.sampled_from(["__hadd", "__hmul", "__hsub", "__hneg", "max"]))
    a, b = draw(a_value(inputs, depth + 1)), draw(a_value(inputs, depth + 1))
    if op == "__hneg":
        return f"__hneg({a})"
    if op == "max":
        return f"(__hlt({a}, {b}) ? {b} : {a})"
    return f"{op}({a}, {b})"


@st.composite
def half_kernels(draw) -> str:
    inputs = [f"in{j}" for j in range(draw(st.integers(1, 3)))]
    outputs = [f"out{j}" for j in range(draw(st.integers(1, 2)))]
    body = []
    for out in outputs:
        value = draw(a_value(inputs))
        if draw(st.booleans()):      # a per-element branch on a local
            body += [f"__half t_{out} = {value};", f"if (__hlt(t_{out}, alpha)) t_{out} = alpha;",
                     f"{out}[i] = t_{out};"]
        else:
            body.append(f"{out}[i] = {value};")
    if draw(st.booleans()):          # a store read back in place
        body.append(f"{outputs[0]}[i] = __hadd({outputs[0]}[i], {inputs[0]}[i]);")
    params = ", ".join([f"const __half *{a}" for a in inputs] + [f"__half *{a}" for a in outputs])
    statements = "\n        ".join(body)
    return f"""#include <cuda_fp16.h>
__global__ void fuzz_half(int n, __half alpha, {params})
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        {statements}
    }}
}}

void run(int n, {params.replace('const ', '')})
{{
    fuzz_half<<<(n + 255) / 256, 256>>>(n, __float2half(0.5f), {', '.join(inputs + outputs)});
}}
"""


@pytest.mark.parametrize("mode", ["raw", "compile"])
def test_random_half_kernels_widened_by_eight_compute_what_the_naive_kernel_does(tmp_path_factory, mode):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(half_kernels())
    def check(code):
        path = tmp_path_factory.mktemp("half_fuzz") / "h.cu"
        path.write_text(code)
        diags = Diagnostics(quiet=True)
        program = load_program(str(path), diagnostics=diags)
        result = compile_with(program, get_target("sm_90"), parse_pass_list(None), diags,
                              validate=mode == "compile", strict=True)
        kr = result.kernels[0]
        assert "half8" in kernel_source(kr.optimized.funcdef), code
        for n in SIZES:
            res = run_case(kr.naive, kr.optimized, kr.context.facts.naive_block,
                           Case({"n": n, "alpha": 0.375}, (n, 1)), 3, program.device_functions)
            assert res.ok, f"{code}\nn = {n}: {res.error or res.mismatches}"

    (seed(int(SEED))(check) if SEED else check)()
