"""`gpgpu-opt check-program DIR -- COMMAND...`: the program of DIR built as written and through `gpgpu-opt
nvcc`, run, compared and timed (gpgpu_opt/program_check)."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from gpgpu_opt.cli import common


def register(app: typer.Typer) -> None:
    app.command("check-program", cls=common.PlainUsage)(common.no_traceback(check_program))


def check_program(directory: str = typer.Argument(..., metavar="DIR", help="the program's source tree (copied twice)"),
                  command: List[str] = typer.Argument(..., metavar="COMMAND...",
                                                      help="how to run it, after `--` (./app -s 1024)"),
                  build: str = typer.Option('make NVCC="$NVCC"', "--build", metavar="SHELL",
                                            help="the build command; $NVCC is nvcc, then `gpgpu-opt nvcc`"),
                  subdir: str = typer.Option(".", "--in", metavar="PATH",
                                             help="where in the tree to build and run (a suite's program directory)"),
                  runs: int = typer.Option(3, "--runs", metavar="N", help="runs of each version (the median is timed)"),
                  tolerance: float = typer.Option(1e-3, "--tolerance", metavar="R",
                                                  help="relative difference allowed between numbers"),
                  nvcc: Optional[str] = typer.Option(None, "--nvcc", metavar="PATH", help="the nvcc to build with"),
                  work: Optional[str] = typer.Option(None, "--work", metavar="DIR",
                                                     help="build here (default: a new temporary directory)"),
                  timeout: float = typer.Option(600.0, "--timeout", metavar="S", help="seconds per build or run")) -> None:
    """Build a program as written and optimized, run both with COMMAND, compare what they print and write
    (numbers within --tolerance) and time them. Exit status 0 when they agree."""
    from gpgpu_opt.diagnostics import CompileError
    from gpgpu_opt.program_check import check_program as check
    from gpgpu_opt.toolchain import ToolchainError

    if runs < 1:
        common.fail(CompileError("--runs: at least one run"))
    try:
        outcome = check(directory, list(command), build, subdir, runs, tolerance, nvcc, work, timeout,
                        echo=lambda line: print(line, file=sys.stderr))
    except ToolchainError as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(common.EXIT_USAGE)
    except (OSError, ValueError) as err:
        common.fail(err)
        return
    print(outcome.table())
    if not outcome.ok:
        print(f"error: {outcome.difference}", file=sys.stderr)
    raise typer.Exit(0 if outcome.ok else common.EXIT_ERROR)
