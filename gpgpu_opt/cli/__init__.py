"""The `gpgpu-opt` command line.

`gpgpu-opt nvcc ARGS...` (and `gpgpu-opt /path/to/nvcc ARGS...`, the form CMake's compiler launcher calls)
takes nvcc's own command line, which no option parser here may read: `main` hands it to the drop-in before
typer sees it. Everything else is a typer command, each in its module; `--version` and `--help` import none
of the heavy modules (cli/common.py)."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from gpgpu_opt import __version__
from gpgpu_opt.cli import check_program, checks, common, compile_command, gpu_commands

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None if common.plain_help() else "rich",
                  help="Optimize naive CUDA kernels (after Yang et al., PLDI 2010).",
                  epilog="Exit status: 0 done; 1 an error in the input, or a failed check; 2 a wrong command line, "
                         "or a missing tool (nvcc, a GPU); 3 an internal error. `gpgpu-opt nvcc ARGS...` exits "
                         "with nvcc's status.")


def _print_version(value: bool) -> None:
    if value:
        print(f"gpgpu-opt {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main_options(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                               help="print the version and exit")) -> None:
    """Optimize naive CUDA kernels (after Yang et al., PLDI 2010)."""


compile_command.register(app)
checks.register(app)
gpu_commands.register(app)
check_program.register(app)


@app.command("nvcc", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def _nvcc_help(ctx: typer.Context) -> None:
    """Stand in for nvcc: `gpgpu-opt nvcc ARGS...` optimizes each .cu file the command compiles, then runs
    nvcc on the result (make NVCC="gpgpu-opt nvcc"; CMake: CMAKE_CUDA_COMPILER_LAUNCHER=gpgpu-opt)."""
    # main() hands `nvcc ARGS...` to the drop-in before typer parses anything (`gpgpu-opt nvcc --help` is
    # nvcc's own help); this command is reached by `gpgpu-opt nvcc` alone, and says what it does.
    print(ctx.get_help())


def main(args: Optional[List[str]] = None, prog_name: Optional[str] = None) -> None:
    """The command line; an internal error of a pass (strict mode) ends it as a compiler error, exit 3, with
    the Python traceback only when GPGPU_OPT_TRACEBACK=1 asks for it. `args` and `prog_name` (default: the
    process's) let the tests run the command line in their own process."""
    argv = list(sys.argv[1:] if args is None else args)
    compiler = _compiler_in_front(argv)
    if compiler is not None:
        from gpgpu_opt.dropin import drop_in

        sys.exit(drop_in(compiler or None, argv[1:]))
    try:
        app(args=argv, prog_name=prog_name)
    except Exception as err:  # noqa: BLE001 - an internal error of a pass, named; anything else goes on
        pipeline = sys.modules.get("gpgpu_opt.pipeline")
        if pipeline is None or not isinstance(err, pipeline.InternalError):
            raise
        if os.environ.get("GPGPU_OPT_TRACEBACK", "") not in ("", "0"):
            import traceback

            traceback.print_exception(err.cause)
        print(str(err), file=sys.stderr)
        sys.exit(common.EXIT_INTERNAL)


def _compiler_in_front(argv: list[str]) -> Optional[str]:
    """'' for `gpgpu-opt nvcc ...` (the nvcc gpgpu-opt finds), the path for `gpgpu-opt /path/to/nvcc ...`
    (a compiler launcher's form), None for any other command line."""
    if not argv:
        return None
    first = argv[0]
    if first == "nvcc":
        return "" if len(argv) > 1 else None      # `gpgpu-opt nvcc` alone: its help
    if os.path.basename(first).startswith("nvcc") and os.sep in first and os.access(first, os.X_OK):
        return first
    return None


__all__ = ["app", "main"]
