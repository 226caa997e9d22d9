"""`gpgpu-opt compile FILE... -o OUT`: each FILE (or `-`, standard input) is a program of its own, its kernels
optimized and its launch sites updated; OUT is a file (one program, `-` for standard output) or a directory
(OUTDIR/) that mirrors every program's files. Every destination is checked before any work and everything
is written at the end, each file atomically: a failed command leaves nothing behind."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

import typer

from gpgpu_opt.cli import common
from gpgpu_opt.cli.common import Verbosity
from gpgpu_opt.cli_output import (STDOUT, PendingWrites, check_directory_destination, check_file_destination,
                                  check_mirrored_destinations, is_directory_output, mirrored, same_file)
from gpgpu_opt.diagnostics import STDIN_NAME, CompileError



#: The file name that stands for standard input (and `-o -` for standard output).
STDIN = "-"


@dataclass
class CompileRequest:
    """What the command line asks of every program it compiles."""
    target: object
    pass_names: list
    bindings: dict[str, int]
    defines: dict[str, str]
    include_dirs: list[str]
    options: dict = field(default_factory=dict)   # CompileOptions' fields (self_check, validate, ...)
    passes_given: bool = False
    merge_text: Optional[str] = None
    vector_width: Optional[int] = None
    use_tuned: bool = True
    db: Optional[str] = None
    gpu: Optional[str] = None


def register(app: typer.Typer) -> None:
    app.command("compile", cls=common.PlainUsage)(common.no_traceback(common.with_verbosity(compile_)))


def compile_(files: List[str] = typer.Argument(..., metavar="FILE...",
                                               help="the .cu files ('-': standard input)"),
             output: str = typer.Option(..., "-o", metavar="OUT",
                                        help="output .cu file ('-': standard output), or a directory (OUTDIR/) "
                                             "for the programs and the files they include"),
             target: str = common.TargetOpt, passes: Optional[str] = common.PassesOpt,
             report: Optional[str] = typer.Option(None, "--report", metavar="FILE", help="write a JSON report here"),
             dump_passes: Optional[str] = typer.Option(None, "--dump-passes", metavar="DIR",
                                                       help="write each pass's kernel here"),
             self_check: bool = typer.Option(False, "--self-check", help="emulate a small case after every pass"),
             restrict: bool = common.RestrictOpt,
             no_validate: bool = typer.Option(False, "--no-validate",
                                              help="write rewritten kernels without emulating them first"),
             no_resource_usage: bool = typer.Option(False, "--no-resource-usage",
                                                    help="leave nvcc's registers/shared/spills out of the report "
                                                         "(no nvcc build of the output)"),
             merge: Optional[str] = common.MergeOpt, vector_width: Optional[int] = common.VectorWidthOpt,
             matmul_precision: str = common.MatmulPrecisionOpt,
             define: Optional[List[str]] = common.DefineOpt, include: Optional[List[str]] = common.IncludeOpt,
             bind: Optional[List[str]] = common.BindOpt,
             no_tuned: bool = typer.Option(False, "--no-tuned", help="ignore a choice `tune` stored"),
             db: Optional[str] = typer.Option(None, "--db", metavar="FILE",
                                              help="tuning database (default: the user's cache dir)"),
             gpu: Optional[str] = typer.Option(None, "--gpu", metavar="NAME",
                                               help="use the tuned choice measured on this GPU"),
             strict: bool = common.StrictOpt, *, verbosity: Verbosity = Verbosity()) -> None:
    """Optimize the kernels of each FILE (and of the user files it includes) and write the whole program,
    launch sites updated, to OUT: a file, or a directory mirroring the programs' files."""
    common.strict(strict)
    dump_dir = None
    try:
        _check_inputs(files, output, report, dump_passes)
        request = CompileRequest(common.target(target), common.pass_list(passes), common.bindings(bind),
                                 common.defines(define), list(include or []),
                                 dict(self_check=self_check, assume_restrict=restrict, validate=not no_validate,
                                      matmul_precision=common.matmul_precision(matmul_precision)),
                                 passes is not None, merge, common.vector_width(vector_width), not no_tuned, db, gpu)
        common.merge(merge)   # a bad --merge is an error before any work
        dump_dir = tempfile.mkdtemp(prefix="gpgpu-opt-passes-") if dump_passes else None
        stdin_text = _read_stdin() if STDIN in files else None
        compiled = [compile_one(path, request, dump_dir, stdin_text) for path in files]
        status = _write(compiled, output, report, dump_passes, dump_dir, not no_resource_usage, verbosity)
    except CompileError as err:
        common.fail(err)
        return
    finally:
        if dump_dir:
            shutil.rmtree(dump_dir, ignore_errors=True)
    raise typer.Exit(status)


@dataclass
class Compiled:
    """One program compiled: what it writes and says."""
    program: object
    result: object
    report: dict
    diagnostics: object


def compile_one(path: str, request: CompileRequest, dump_dir: Optional[str] = None,
                stdin_text: Optional[str] = None) -> Compiled:
    """Load, compile and report one program (`-`: `stdin_text`). Notes are collected, not printed."""
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.frontend import load_program
    from gpgpu_opt.pipeline import CompileOptions, compile_program

    diagnostics = Diagnostics(quiet=True)
    name, text = (STDIN_NAME, stdin_text) if path == STDIN else (path, None)
    program = load_program(name, request.defines, request.include_dirs, diagnostics, target=request.target,
                           text=text)
    pass_names, merge_request, width, tuned = request.pass_names, common.merge(request.merge_text), \
        request.vector_width, None
    if request.use_tuned and not request.passes_given and request.merge_text is None and width is None:
        from gpgpu_opt.tune.db import TuningDB, tuned_choice

        tuned = tuned_choice(TuningDB(request.db), program, request.target, request.bindings, request.gpu,
                             diagnostics)
        if tuned is not None:
            pass_names, merge_request = tuned.choice.pass_list(), common.merge(tuned.choice.merge)
            width = tuned.choice.vector_width
    options = CompileOptions.of(request.target, pass_names, request.bindings, dump_dir=dump_dir,
                                merge_request=merge_request, vector_width=width, **request.options)
    result = compile_program(program, options, diagnostics)
    report = result.report()
    if tuned is not None:
        report["tuned"] = tuned.as_dict()
    report["notes"] = [str(n) for n in diagnostics.notes]
    return Compiled(program, result, report, diagnostics)


def _read_stdin() -> str:
    from gpgpu_opt.frontend.source_files import source_text

    return source_text(sys.stdin.buffer.read(), STDIN_NAME)


def _write(compiled: list[Compiled], output: str, report: Optional[str], dump_passes: Optional[str],
           dump_dir: Optional[str], resource_usage: bool, verbosity: Verbosity) -> int:
    """Print the notes, then (unless -Werror fails the command) write every output at once."""
    from gpgpu_opt.note_summary import fail_on_warnings, print_notes

    for c in compiled:
        print_notes(c.diagnostics, verbosity, c.result)
    if any(fail_on_warnings(c.diagnostics, verbosity) for c in compiled):
        return common.EXIT_ERROR
    writes = PendingWrites()
    if is_directory_output(output):
        _write_directory(compiled, output, report, writes)
    else:
        c = compiled[0]
        _check_single_output(c.result, output)
        writes.add_file(output, c.program.source_files()[0].as_written(c.result.output))
    if report:
        if resource_usage:   # they go only into the report: no report, no nvcc build
            for c in compiled:
                _add_resource_usage(c.report, c.result, c.program.include_dirs)
        whole = compiled[0].report if len(compiled) == 1 else {"programs": [c.report for c in compiled]}
        writes.add_file(report, json.dumps(whole, indent=2) + "\n")
    if dump_dir:
        writes.add_directory(dump_passes, dump_dir)
    writes.commit()
    return common.EXIT_OK


def _write_directory(compiled: list[Compiled], output: str, report: Optional[str], writes: PendingWrites) -> None:
    """Every program's files mirrored under OUTDIR from the deepest directory holding all of them; two
    programs that would write one file differently are an error."""
    paths = [f.path for c in compiled for f in c.program.source_files() if f.path != STDIN_NAME]
    destinations = mirrored(output, paths) if paths else {}
    check_mirrored_destinations(destinations, report)
    written: dict[str, tuple[str, str]] = {}
    for c in compiled:
        c.report["written"] = []
        for f in c.program.source_files():
            if f.path == STDIN_NAME:
                destination = os.path.join(output, "stdin.cu")
            else:
                destination = destinations[f.path]
            text = f.as_written(c.result.outputs[f.path])
            earlier = written.get(destination)
            if earlier is not None and earlier[1] != text:
                raise CompileError(f"-o {output}: '{f.path}' is compiled differently for {earlier[0]} and "
                                   f"{c.program.path}; compile them into separate directories")
            if earlier is None:
                writes.add_file(destination, text, make_parents=True)
                written[destination] = (c.program.path, text)
            c.report["written"].append(destination)


def _check_single_output(result, output: str) -> None:
    """One output file holds the main file only: a program whose included files changed needs a directory."""
    changed = [f for f in result.changed_files() if f != result.program.main_file]
    if changed:
        raise CompileError(f"-o {output}: the compilation changed files that {result.program.path} includes "
                           f"({', '.join(changed)}); give a directory (-o OUTDIR/) to write the whole program")


def _check_inputs(files: list[str], output: str, report: Optional[str], dump_passes: Optional[str]) -> None:
    """Before any work: every place compile writes can take the file, and none is an input."""
    if files.count(STDIN) > 1:
        raise CompileError("'-' (standard input) may be given once")
    if len(files) > 1 and not is_directory_output(output):
        raise CompileError(f"-o {output}: {len(files)} files compile into a directory (-o OUTDIR/)")
    if dump_passes and len(files) > 1:
        raise CompileError("--dump-passes takes one file")
    named = [f for f in files if f != STDIN]
    if is_directory_output(output):
        check_directory_destination("-o", output)
        for file in named:
            if same_file(os.path.dirname(os.path.abspath(file)), output):
                raise CompileError(f"-o '{output}' is the input's directory: writing there would overwrite "
                                   f"'{file}'; give another directory")
    elif output != STDOUT:
        check_file_destination("-o", output, {"the input": named[0]} if named else {})
    if report:
        others = {"the input": named[0]} if named else {}
        if output != STDOUT and not is_directory_output(output):
            others["-o"] = output
        check_file_destination("--report", report, others)
    if dump_passes:
        check_directory_destination("--dump-passes", dump_passes)


def _add_resource_usage(rep: dict, result, include_dirs: list[str]) -> None:
    """Each kernel's registers, shared memory and spills from nvcc's build of the output (none without nvcc)."""
    from gpgpu_opt.nvcc import program_resource_usage

    usage = program_resource_usage(result, result.target, include_dirs)
    if usage is not None:
        for k in rep["kernels"]:
            k["resources"] = usage.get(k["name"])
