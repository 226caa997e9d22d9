"""What the commands share: their options, the parsing of option values, how they end (exit statuses), and
how much they say (-q, -v, -Werror).

Exit statuses (docs/REFERENCE.md): 0 done; 1 the input or a check failed (`file:line:col: error: ...`); 2 the
command line is wrong, or what the command needs is missing (nvcc, a GPU); 3 an internal error of
gpgpu-opt. `gpgpu-opt nvcc` exits with nvcc's status.

This module is imported by `gpgpu-opt --version` and `--help`: it imports nothing heavy (the front end,
sympy, numpy, the passes), only what the options' help needs. The commands import the rest when they run.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
from dataclasses import dataclass
from typing import List, Optional

import typer
from typer._click import exceptions as click_exceptions
from typer.core import TyperCommand

from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.targets import DEFAULT_TARGET, TARGETS

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def plain_help() -> bool:
    """Help without Rich's boxes and colours where it is not read on a terminal (a pipe, a file, a test)."""
    return not sys.stdout.isatty()


class PlainUsage(TyperCommand):
    """A command whose usage line names its arguments as their help does (`FILE...`; typer writes a required
    one in braces, `{FILE}`)."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            name = param.metavar or param.name.upper()
            if param.nargs != 1 and not name.endswith("..."):
                name += "..."
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx, formatter) -> None:
        for param in self.get_params(ctx):
            if param.param_type_name == "argument" and param.metavar:
                param.display_type_rich = _no_type   # the metavar says it: `FILE...`, not `FILE... <list[str]>`
        super().format_options(ctx, formatter)


def _no_type(ctx=None) -> str:
    return ""


def fail(err: Exception) -> None:
    message = str(err)
    print(message if isinstance(err, CompileError) else f"error: {message}", file=sys.stderr)
    raise typer.Exit(EXIT_ERROR)


def no_traceback(command):
    """A bug inside a command ends it with an `error:` line and exit status 3, never a Python traceback
    (GPGPU_OPT_TRACEBACK=1 shows the traceback, for the developers). An internal error of a pass (strict
    mode) goes on to `main`, which names the pass."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, click_exceptions.ClickException):
            raise           # a usage error (exit 2) is the command line's, not a bug
        except Exception as err:  # noqa: BLE001 - the last line of defence; the message names the bug
            if _is_internal_error_of_a_pass(err) or os.environ.get("GPGPU_OPT_TRACEBACK"):
                raise
            where = kwargs.get("file") or (kwargs.get("files") or ["gpgpu-opt"])[0]
            print(f"{where}: error: internal error in gpgpu-opt ({type(err).__name__}: {err}); please report it",
                  file=sys.stderr)
            raise typer.Exit(EXIT_INTERNAL)
    return wrapper


def _is_internal_error_of_a_pass(err: Exception) -> bool:
    pipeline = sys.modules.get("gpgpu_opt.pipeline")   # only a compile raises one, and it imported the module
    return pipeline is not None and isinstance(err, pipeline.InternalError)


# -- how much a command says ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verbosity:
    """-q: errors and warnings only; default: warnings and one note per kernel (what was done, or why not);
    -v: every note. -Werror: a warning fails the command (exit 1, nothing written)."""
    quiet: bool = False
    verbose: bool = False
    warnings_are_errors: bool = False


def with_verbosity(command):
    """Adds -q/--quiet, -v/--verbose and -Werror to a command: it receives them as `verbosity`."""
    signature = inspect.signature(command)
    added = [
        inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=typer.Option(
            False, "-q", "--quiet", help="print errors and warnings only")),
        inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=typer.Option(
            False, "-v", "--verbose", help="print every note (default: one per kernel)")),
        inspect.Parameter("werror", inspect.Parameter.KEYWORD_ONLY, default=typer.Option(
            False, "-Werror", help="warnings are errors: exit 1 and write nothing")),
    ]
    kept = [p for p in signature.parameters.values() if p.name != "verbosity"]

    @functools.wraps(command)
    def wrapper(*args, quiet: bool = False, verbose: bool = False, werror: bool = False, **kwargs):
        if quiet and verbose:
            raise typer.BadParameter("-q and -v contradict each other")
        return command(*args, verbosity=Verbosity(quiet, verbose, werror), **kwargs)

    wrapper.__signature__ = signature.replace(parameters=kept + added)
    return wrapper


# -- options --------------------------------------------------------------------------------------------------
TargetOpt = typer.Option(DEFAULT_TARGET, "--target", metavar="NAME", help=f"GPU target: {', '.join(TARGETS)}")
DefineOpt = typer.Option(None, "-D", metavar="NAME[=VALUE]", help="define a macro (as nvcc -D)")
IncludeOpt = typer.Option(None, "-I", metavar="DIR", help="add an include directory (as nvcc -I)")
BindOpt = typer.Option(None, "--bind", metavar="NAME=VALUE", help="give a kernel parameter a known value")
MergeOpt = typer.Option(None, "--merge", metavar="x=NX,y=NY", help="merge factors instead of the model's choice "
                                                                  "(outputs per thread in each dimension)")
RestrictOpt = typer.Option(False, "--restrict", help="kernel pointer parameters never alias (as nvcc --restrict)")
StrictOpt = typer.Option(False, "--strict", help="an internal error in a pass fails the command (exit 3) "
                                                "instead of rolling the pass back")
MatmulPrecisionOpt = typer.Option("ieee", "--matmul-precision", metavar="P",
                                  help="what a float matrix product may run at: ieee (FP32 on CUDA cores), "
                                       "tf32x3 (three TF32 tensor-core products, FP32-class accuracy) or tf32")
VectorWidthOpt = typer.Option(None, "--vector-width", metavar="N",
                              help="elements per widened access: 1 (no widening), 2, 4 or 8 (halves) "
                                   "(default: the vectorize pass's model)")
PassesOpt = typer.Option(None, "--passes", metavar="LIST", help="comma list of passes, or 'none'")
SizeOpt = typer.Option(None, "--size", metavar="NAME=VALUE", help="a scalar parameter's value (repeatable)")
DbOpt = typer.Option(None, "--db", metavar="FILE",
                     help="tuning database (default: the user's cache dir, gpgpu-opt/tuning.json)")
EmitOpt = typer.Option(None, "--emit", metavar="DIR",
                       help="write the harnesses and a run.sh for a GPU machine here, and stop")
FileArg = typer.Argument(..., metavar="FILE", help="the .cu file")


def defines(values: Optional[List[str]]) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, _, value = v.partition("=")
        out[name] = value if value else "1"
    return out


def merge(text: Optional[str]):
    if text is None:
        return None
    from gpgpu_opt.pass_api.options import MergeRequest

    try:
        return MergeRequest.parse(text)
    except ValueError as err:
        raise CompileError(str(err)) from None


def matmul_precision(text: str) -> str:
    from gpgpu_opt.pass_api.options import MATMUL_PRECISIONS

    if text not in MATMUL_PRECISIONS:
        raise CompileError(f"--matmul-precision: expected one of {', '.join(MATMUL_PRECISIONS)}, got '{text}'")
    return text


def vector_width(width: Optional[int]) -> Optional[int]:
    if width is not None and width not in (1, 2, 4, 8):
        raise CompileError(f"--vector-width: expected 1, 2, 4 or 8 (halves), got {width}")
    return width


def bindings(values: Optional[List[str]]) -> dict[str, int]:
    out = {}
    for v in values or []:
        name, _, value = v.partition("=")
        try:
            out[name.strip()] = int(value, 0)
        except ValueError:
            raise CompileError(f"--bind expects NAME=INTEGER, got '{v}'") from None
        if out[name.strip()] < 1:
            raise CompileError(f"--bind {v}: bound values are sizes and must be positive")
    return out


def sizes(values: Optional[List[str]], program) -> dict[str, int | float]:
    """`--size NAME=VAL`, checked against the program (check/sizes.py): a name it uses, an integer that fits
    the parameter's type and is not negative; float parameters (`alpha=-1.5`) take any value."""
    from gpgpu_opt.check.command import parse_sizes
    from gpgpu_opt.check.sizes import check_sizes

    parsed = parse_sizes(values)
    check_sizes(program, parsed)
    return parsed


def global_space(text: Optional[str]) -> Optional[tuple[int, int]]:
    from gpgpu_opt.check.command import parse_shape

    parts = parse_shape("--global", text)
    return None if parts is None else (parts[0], parts[1] if len(parts) > 1 else 1)


def target(name: str):
    from gpgpu_opt.targets import get_target

    try:
        return get_target(name)
    except KeyError as err:
        raise CompileError(str(err.args[0])) from None


def pass_list(passes: Optional[str]):
    from gpgpu_opt.passes import parse_pass_list

    try:
        return parse_pass_list(passes)
    except ValueError as err:
        raise CompileError(str(err)) from None


def strict(flag: bool) -> None:
    """`--strict`: every compile this command makes (verify's, run's) raises InternalError on a pass's bug.
    Set as the environment's default, which compile_program reads, so it reaches each of them."""
    if flag:
        os.environ["GPGPU_OPT_STRICT"] = "1"
