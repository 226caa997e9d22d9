"""The FileCheck-style `.checks` beside the golden outputs (tests/filecheck.py): for each of the paper's
benchmarks and each golden target, the lines that are the optimization. The byte comparison in
test_compile.py makes the compiler's output equal to the golden file; these make the golden file say what it
must (so a regenerated golden file that lost its padded tile or gained a barrier fails here)."""
import pytest

from tests.conftest import GOLDEN, GOLDEN_TARGETS
from tests.filecheck import CheckFailure, check_text, parse_checks

PAPER_BENCHMARKS = ["mm", "mv", "tmv", "vv", "conv", "transpose", "reduction", "strsm"]


@pytest.mark.parametrize("target", GOLDEN_TARGETS)
@pytest.mark.parametrize("name", PAPER_BENCHMARKS)
def test_golden_output_has_the_checked_shape(name, target):
    checks = GOLDEN / target / f"{name}.checks"
    assert checks.exists(), f"every paper benchmark has its checks: {checks} is missing"
    check_text(checks.read_text(), (GOLDEN / target / f"{name}.cu").read_text())


def test_every_checks_file_belongs_to_a_golden_output():
    for checks in GOLDEN.glob("*/*.checks"):
        assert checks.with_suffix(".cu").exists(), checks


TEXT = """\
__global__ void k() {
    __shared__ float tile_A[16][17];
    tile_A[ty][tx] = A[i];
    __syncthreads();
    sum += tile_A[tx][k];
    __syncthreads();
}
"""


def test_check_finds_lines_in_order():
    check_text("CHECK: __shared__ float tile_A[16][17];\nCHECK: sum += tile_A[tx][k];", TEXT)
    with pytest.raises(CheckFailure, match="not found"):
        check_text("CHECK: sum += tile_A[tx][k];\nCHECK: __shared__ float tile_A[16][17];", TEXT)


def test_check_next_must_be_on_the_following_line():
    check_text("CHECK: tile_A[ty][tx] = A[i];\nCHECK-NEXT: __syncthreads();", TEXT)
    with pytest.raises(CheckFailure, match="not on the next line"):
        check_text("CHECK: __shared__ float\nCHECK-NEXT: __syncthreads();", TEXT)


def test_check_not_holds_between_its_neighbours_only():
    check_text("CHECK: tile_A[ty][tx]\nCHECK-NOT: __shared__\nCHECK: sum +=", TEXT)
    with pytest.raises(CheckFailure, match="found where it must not be"):
        check_text("CHECK: tile_A[ty][tx]\nCHECK-NOT: __syncthreads();\nCHECK: sum +=", TEXT)
    with pytest.raises(CheckFailure, match="found where it must not be"):   # a trailing one: to the end
        check_text("CHECK: sum +=\nCHECK-NOT: __syncthreads();", TEXT)


def test_whitespace_in_a_pattern_spans_lines_so_two_barriers_in_a_row_are_caught():
    doubled = TEXT.replace("    sum += tile_A[tx][k];\n", "")
    check_text("CHECK: __global__\nCHECK-NOT: __syncthreads(); __syncthreads();", TEXT)
    with pytest.raises(CheckFailure):
        check_text("CHECK: __global__\nCHECK-NOT: __syncthreads(); __syncthreads();", doubled)


def test_regex_pieces_and_literal_brackets():
    check_text("CHECK: __shared__ float tile_A[{{[0-9]+}}][17];", TEXT)
    with pytest.raises(CheckFailure):
        check_text("CHECK: __shared__ float tile_A[{{[0-9]}}][17];", TEXT)


def test_a_typo_or_a_file_of_nots_alone_is_refused():
    with pytest.raises(ValueError, match="not a directive"):
        parse_checks("CHEK: tile_A")
    with pytest.raises(ValueError, match="no CHECK"):
        parse_checks("CHECK-NOT: __syncthreads();")
    assert [d.kind for d in parse_checks("# comment\n\nCHECK: a\nCHECK-NEXT: b\nCHECK-NOT: c")] == \
        ["CHECK", "CHECK-NEXT", "CHECK-NOT"]


def test_each_checks_file_tells_its_output_from_every_other_golden_output():
    """Checks loose enough to pass on another benchmark's or target's output would check nothing specific."""
    checks_files = sorted(GOLDEN.glob("*/*.checks"))
    for checks in checks_files:
        for other in checks_files:
            if other != checks:
                with pytest.raises(CheckFailure):
                    check_text(checks.read_text(), other.with_suffix(".cu").read_text())
