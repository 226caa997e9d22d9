"""Long printed lines wrapped as a person wraps them (line_wrap.py)."""
from __future__ import annotations

from gpgpu_opt.line_wrap import wrap_lines


def test_a_call_wraps_after_a_comma_aligned_after_its_parenthesis():
    line = "    __pipeline_memcpy_async(&tile_B[stage ^ 1][e / 128][e % 128], &B[in_range ? (col + k * n) : 0], " \
           "sizeof(float), in_range ? 0 : (sizeof(float)));"
    out = wrap_lines(line).split("\n")
    assert len(out) == 2 and all(len(x) <= 110 for x in out)
    assert out[1].startswith(" " * len("    __pipeline_memcpy_async(")) and out[1].lstrip().startswith("sizeof")


def test_strings_directives_and_launch_lines_stay_whole():
    string = '    fprintf(stderr, "' + "x" * 120 + '");'
    assert wrap_lines(string) == string
    for line in ("#pragma unroll " + "1" * 120, "// gpgpu_opt launch block(16, 16) grid(" + "g" * 110 + ")"):
        assert wrap_lines(line) == line


def test_a_long_comment_wraps_at_spaces():
    out = wrap_lines("    // " + " ".join(["word"] * 40)).split("\n")
    assert len(out) > 1 and all(x.startswith("    // ") and len(x) <= 110 for x in out)


def test_a_chain_of_conditions_breaks_before_an_operator_at_the_outermost_level():
    line = "            const int in_range = load_row_of_the_tile < rows_of_the_matrix && " \
           "load_column_of_the_tile < columns_of_the_matrix && k_index < n;"
    out = wrap_lines(line).split("\n")
    assert len(out) == 2 and out[1].lstrip().startswith("&&")
