"""Functions nested deeper than the front end reads pass through as written, with a note, and never exhaust
the interpreter's stack: nvcc builds each of these files (150 and 10 000 nested parentheses, a sum of 3000
terms), so none of them is an error either."""
from __future__ import annotations

import pytest

from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import compile_with
from gpgpu_opt.targets import get_target

PROGRAM = """\
__global__ void scale(float *a, float *b, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < {bound}) b[i] = {value};
}}

int main()
{{
    float *a, *b;
    int n = {host_size};
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(a, b, n);
    return 0;
}}
"""


def nested(depth: int, inner: str) -> str:
    return "(" * depth + inner + ")" * depth


def program(tmp_path, bound="n", value="a[i] * 2.0f", host_size="1 << 12"):
    path = tmp_path / "deep.cu"
    path.write_text(PROGRAM.format(bound=bound, value=value, host_size=host_size))
    return path


def compiled(path):
    diagnostics = Diagnostics(quiet=True)
    loaded = load_program(str(path), diagnostics=diagnostics)
    result = compile_with(loaded, get_target("sm_90"), parse_pass_list(None), diagnostics)
    return loaded, result, [str(n) for n in diagnostics.notes]


@pytest.mark.parametrize("edit, why", [
    ({"bound": nested(150, "n")}, "it nests 152 brackets deep, more than the 64 gpgpu-opt reads"),
    ({"bound": nested(10_000, "n")}, "it nests 10002 brackets deep"),
    ({"value": "".join("(1.0f + " for _ in range(150)) + "a[i]" + ")" * 150}, "it nests 152 brackets deep"),
    ({"value": " + ".join(["a[i]"] * 300)}, "its syntax tree is 305 levels deep (a long expression?), more than "
                                            "the 100 gpgpu-opt reads"),
    ({"value": " + ".join(["a[i]"] * 3000)}, "a statement has 3001 operators, more than the 400 gpgpu-opt reads"),
])
def test_a_kernel_nested_too_deep_passes_through_with_a_note(tmp_path, edit, why):
    path = program(tmp_path, **edit)
    loaded, result, notes = compiled(path)
    assert loaded.kernels == [] and loaded.passed_through == ["scale"]
    assert any(f"'scale' passed through unchanged: {why}" in note for note in notes), notes
    assert result.output == path.read_text()


def test_nesting_within_the_bounds_is_optimized(tmp_path):
    """60 parentheses and a sum of 80 terms: read, rewritten and checked by compile's emulation."""
    path = program(tmp_path, bound=nested(60, "n"), value=" + ".join(["a[i]"] * 80), host_size="1 << 24")
    loaded, result, notes = compiled(path)
    assert [k.name for k in loaded.kernels] == ["scale"]
    assert result.kernels[0].transformed, notes


def test_host_code_nested_deep_is_read(tmp_path):
    """The host side is read by tree-sitter and evaluated for the launch: 10 000 parentheses there too."""
    path = program(tmp_path, host_size=nested(10_000, "1 << 12"))
    loaded, result, notes = compiled(path)
    assert [k.name for k in loaded.kernels] == ["scale"]
    assert "internal error" not in " ".join(notes)
