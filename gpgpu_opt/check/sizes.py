"""`--size NAME=VALUE` checked against the program before anything runs: the name must be one the program
uses (a kernel's scalar parameter, or a host variable a launch may read), and an integer must fit the type
of each parameter of that name. Zero is a size (a loop that runs no iteration is a case worth checking);
a negative integer is not."""
from __future__ import annotations

from gpgpu_opt.cuda_types import scalar
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend import scanner


def check_sizes(program, sizes: dict[str, int | float]) -> None:
    """A CompileError for the first --size that the program cannot take."""
    parameters = {}
    for kernel in program.kernels:
        for p in kernel.scalars:
            parameters.setdefault(p.name, []).append((kernel.name, p.base_type))
    named = None
    for name, value in sizes.items():
        if name not in parameters:
            named = named if named is not None else _identifiers(program)
            if name not in named:
                known = ", ".join(sorted(parameters)) or "none"
                raise CompileError(f"--size {name}={value}: the program has no parameter or variable '{name}' "
                                   f"(the kernels' scalar parameters: {known})")
        if isinstance(value, int) and value < 0:
            raise CompileError(f"--size {name}={value}: sizes are not negative")
        for kernel_name, type_name in parameters.get(name, []):
            _check_fits(name, value, kernel_name, type_name)


def _identifiers(program) -> set[str]:
    return {t.text for f in program.source_files() for t in scanner.tokenize(f.text) if t.kind == "ident"}


def _check_fits(name: str, value: int | float, kernel: str, type_name: str) -> None:
    scalar_type = scalar(type_name)
    if scalar_type is None or not isinstance(value, int) or scalar_type.kind == "f":
        return
    bits = 8 * scalar_type.size
    if scalar_type.kind == "b":
        low, high = 0, 1
    elif scalar_type.kind == "u":
        low, high = 0, 2 ** bits - 1
    else:
        low, high = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    if not low <= value <= high:
        raise CompileError(f"--size {name}={value}: does not fit '{type_name} {name}' of kernel '{kernel}' "
                           f"({low} to {high})")
