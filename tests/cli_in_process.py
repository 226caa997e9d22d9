"""`gpgpu-opt` run in the test process: what `python -m gpgpu_opt ARGS` does, without a new interpreter.

A CLI subprocess pays 1.5 to 2.5 s of interpreter start and imports (sympy, numpy, pycparser, the project)
before any work; the tests made a few hundred of them. `run_cli` calls the same entry point,
`gpgpu_opt.cli.main` (the typer app and its InternalError -> exit 3 handling), in this process and answers
like `subprocess.run(..., capture_output=True, text=True)`: a CompletedProcess with the exit status and
standard output and error, captured apart.

What one run changes is put back: the working directory, every environment variable (`--strict` sets
GPGPU_OPT_STRICT), sys.stdin/stdout/stderr. An exception that escapes `main()` (a subprocess would print a
traceback and exit 1) is raised again, so the test fails on it whatever it asserts about the exit status.

A few tests still start the real process on purpose (the module entry point, the packaging, the exit status
and standard error of a process on bad input): they say why where they do.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import contextmanager
from typing import Mapping, Optional

#: What click names the program in usage messages: the name `python -m gpgpu_opt` gets.
PROG_NAME = "python -m gpgpu_opt"


def run_cli(*args, cwd=None, env: Optional[Mapping[str, Optional[str]]] = None, input=None,
            text: bool = True) -> subprocess.CompletedProcess:
    """`python -m gpgpu_opt *args` in this process. `env`: variables set for the call only (None: unset);
    a whole environment (`{**os.environ, ...}`) works too. `input`: standard input (str, or bytes with
    text=False). With text=False stdout and stderr are bytes, as subprocess gives them."""
    from gpgpu_opt.cli import main

    argv = [str(a) for a in args]
    stdin = io.BytesIO(input.encode() if isinstance(input, str) else (input or b""))
    stdout, stderr = io.BytesIO(), io.BytesIO()
    try:
        with _environment(env), _working_directory(cwd), _streams(stdin, stdout, stderr):
            returncode = _exit_status(main, argv)
    except Exception as bug:
        bug.add_note(f"gpgpu-opt {' '.join(argv)}: its standard error:\n{_decoded(stderr.getvalue())}")
        raise
    out, err = stdout.getvalue(), stderr.getvalue()
    if text:
        out, err = _decoded(out), _decoded(err)
    return subprocess.CompletedProcess([sys.executable, "-m", "gpgpu_opt", *argv], returncode, out, err)


def _exit_status(main, argv: list[str]) -> int:
    """The status `main(argv)` exits with (0 when it returns); any other exception propagates."""
    try:
        main(argv, prog_name=PROG_NAME)
    except SystemExit as done:
        code = done.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)      # sys.exit("message"): Python prints it and exits 1
        return 1
    return 0


def _decoded(data: bytes) -> str:
    """As `text=True` decodes a subprocess's output (UTF-8 here); bytes that are no UTF-8 fail the test."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


@contextmanager
def _environment(env: Optional[Mapping[str, Optional[str]]]):
    saved = dict(os.environ)
    try:
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _working_directory(cwd):
    saved = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved)


@contextmanager
def _streams(stdin: io.BytesIO, stdout: io.BytesIO, stderr: io.BytesIO):
    """Text streams over byte buffers, like a process's: `sys.stdout.buffer` takes bytes (`-o -` writes the
    output's bytes, non-UTF-8 ones included); line buffering keeps print() and buffer writes in order."""
    saved = sys.stdin, sys.stdout, sys.stderr
    wrapped = [io.TextIOWrapper(stream, encoding="utf-8", errors=errors, line_buffering=True)
               for stream, errors in ((stdin, "strict"), (stdout, "strict"), (stderr, "backslashreplace"))]
    sys.stdin, sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        for stream in wrapped[1:]:
            stream.flush()
        sys.stdin, sys.stdout, sys.stderr = saved
        for stream in wrapped:
            stream.detach()          # the BytesIO stays readable
