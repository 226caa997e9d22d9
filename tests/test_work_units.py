"""How conftest.py cuts the suite into units of work for pytest-xdist: whole files, except the files split by
their first parameter (one program, one golden input), whose units two workers can share."""
import inspect

from tests.conftest import SPLIT_BY_PARAMETER, work_unit
from tests.programs import test_programs


def test_a_file_is_one_unit_unless_it_is_split_by_parameter():
    assert work_unit("tests/emulator/test_emulator.py::test_x[a-b]") == "tests/emulator/test_emulator.py"
    assert "tests/programs/test_programs.py" in SPLIT_BY_PARAMETER
    assert work_unit("tests/programs/test_programs.py::test_the_output_builds_and_verifies[gemm.cu]") == \
        "tests/programs/test_programs.py::gemm.cu"
    assert work_unit("tests/programs/test_programs.py::test_row_walking[atax.cu-atax_kernel1]") == \
        "tests/programs/test_programs.py::atax.cu"
    assert work_unit("tests/cli/test_compile.py::test_conv_stages[g80-tile_in[31][31]-row0 + elem / 31]") == \
        "tests/cli/test_compile.py::g80"
    assert work_unit("tests/cli/test_compile.py::test_merge_option_is_parsed") == "tests/cli/test_compile.py"


def test_every_test_of_the_compiled_programs_names_its_program_as_its_first_parameter():
    """Else it would land in another unit than its program's, and compile that program a second time."""
    for name, function in inspect.getmembers(test_programs, inspect.isfunction):
        parameters = list(inspect.signature(function).parameters)
        if name.startswith("test_") and "compiled" in parameters:
            marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
            assert marks and marks[0].args[0].split(",")[0].strip() == "name", name
