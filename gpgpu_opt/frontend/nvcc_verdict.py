"""A function gpgpu-opt cannot read is either valid CUDA it does not understand, which passes through with a
note, or invalid CUDA, which is an error: nvcc, where it is installed, says which (gpgpu_opt.nvcc_front_end).

The error is raised only where one of nvcc's errors lies inside a function that could not be read: a file
nvcc rejects for another reason (a header only its host code needs, a flag the user gives nvcc and not
gpgpu-opt) compiles as it did, its unreadable functions passed through.
"""
from __future__ import annotations

import os

from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.frontend import scanner
from gpgpu_opt.nvcc_front_end import NvccError, front_end_errors
from gpgpu_opt.targets import Target


def reject_what_nvcc_rejects(path: str, defines: dict[str, str], include_dirs: list[str], target: Target,
                             unparsed: list) -> None:
    """Raise nvcc's errors as a CompileError when one of them is inside a function of `unparsed` ((SourceFile,
    FunctionDefinition) pairs: the functions the front end could not read)."""
    errors = front_end_errors(path, defines, include_dirs, target.nvcc_arch)
    if not errors:
        return
    inside = [e for e in errors if any(_within(e, file, definition) for file, definition in unparsed)]
    if not inside:
        return
    first = inside[0]
    raise CompileError(first.message, first.location, tuple(str(e) for e in errors if e is not first))


def _within(error: NvccError, file, definition: scanner.FunctionDefinition) -> bool:
    """Does the error fall on the lines of `definition` in `file` (a SourceFile)?"""
    if not _same_path(error.location.file, file.path):
        return False
    last_line = definition.line + file.text.count("\n", definition.start, definition.end)
    return definition.line <= error.location.line <= last_line


def _same_path(reported: str, path: str) -> bool:
    return os.path.normpath(os.path.abspath(reported)) == os.path.normpath(os.path.abspath(path))
