"""vectorize does not widen a body whose elements are long chains of slow arithmetic (passes/vectorize/latency.py)
on a launch too small to fill the GPU widened, and the note says why: each thread runs several such chains in a
row with a quarter of the warps to hide them (Rodinia cfd's compute_step_factor went from 5.1 to 8.4 us on an
H100). Streaming bodies are widened where the launch fills the GPU (launch_dispatch.min_threads_widened)."""
from __future__ import annotations

import textwrap

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

KERNEL = """
__global__ void k(int n, float *out, const float *a, const float *b)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        {body}
    }}
}}
int main() {{ float *o, *a, *b; k<<<{blocks}, 256>>>({blocks} * 256, o, a, b); }}
"""
CHAIN = "float s = sqrtf(a[i]) / b[i]; out[i] = 0.5f / (s + sqrtf(b[i] / a[i]));"
STREAM = "out[i] = a[i] / 255.0f + expf(b[i]);"


def _compile(tmp_path, body: str, vector_width=None, blocks=64):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(KERNEL.format(body=body, blocks=blocks)))
    program = load_program(str(path), diagnostics=Diagnostics(quiet=True))
    result = compile_with(program, get_target("sm_90"), parse_pass_list("restrict,normalize,vectorize"),
                             Diagnostics(quiet=True), vector_width=vector_width)
    return result.kernels[0]


def _vectorize(kernel, action):
    return [d.reason for d in kernel.context.log.decisions if d.pass_name == "vectorize" and d.action == action]


def test_a_chain_of_divisions_and_square_roots_is_not_widened_and_the_note_says_why(tmp_path):
    kernel = _compile(tmp_path, CHAIN)
    assert not _vectorize(kernel, "applied")
    assert any("chain of 5 long-latency operations (division, sqrtf)" in r for r in _vectorize(kernel, "skipped"))


def test_a_streaming_body_with_a_division_and_an_exponential_is_widened_where_the_launch_fills_the_gpu(tmp_path):
    """(8192 blocks of 256: more than the 4 x 132 x 2048 naive threads a float4 widening needs on sm_90.)"""
    assert any("widened" in r for r in _vectorize(_compile(tmp_path, STREAM, blocks=8192), "applied"))


def test_a_width_asked_for_widens_the_chain_anyway(tmp_path):
    assert any("widened" in r for r in _vectorize(_compile(tmp_path, CHAIN, vector_width=4), "applied"))
