"""The `gpgpu-opt` command line."""
from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
from importlib import metadata
from typing import List, Optional

import typer

from gpgpu_opt.analysis import analyze_kernel
from gpgpu_opt.cli_output import (STDOUT, PendingWrites, check_directory_destination, check_file_destination,
                                  check_mirrored_destinations, is_directory_output, mirrored,
                                  same_file)
from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.pipeline import STRICT_ENV, CompileOptions, InternalError, compile_program, default_block
from gpgpu_opt.targets import DEFAULT_TARGET, TARGETS, get_target

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Optimize naive CUDA kernels (after Yang et al., PLDI 2010).")


def _version() -> str:
    try:
        return metadata.version("gpgpu-opt")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        print(f"gpgpu-opt {_version()}")
        raise typer.Exit(0)


@app.callback()
def _main_options(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                               help="print the version and exit")) -> None:
    """Optimize naive CUDA kernels (after Yang et al., PLDI 2010)."""


def _no_traceback(command):
    """A bug inside a command ends it with an `error:` line and exit status 3, never a Python traceback
    (GPGPU_OPT_TRACEBACK=1 shows the traceback, for the developers)."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, InternalError):
            raise  # InternalError: main() prints it as a compiler error naming the pass
        except Exception as err:  # noqa: BLE001 - the last line of defence; the message names the bug
            if os.environ.get("GPGPU_OPT_TRACEBACK"):
                raise
            where = kwargs.get("file") or "gpgpu-opt"
            print(f"{where}: error: internal error in gpgpu-opt ({type(err).__name__}: {err}); please report it",
                  file=sys.stderr)
            raise typer.Exit(3)
    return wrapper

TargetOpt = typer.Option(DEFAULT_TARGET, "--target", help=f"GPU target: {', '.join(TARGETS)}")
DefineOpt = typer.Option(None, "-D", help="Define a macro, NAME or NAME=VALUE (as nvcc -D)")
IncludeOpt = typer.Option(None, "-I", help="Add an include directory (as nvcc -I)")
BindOpt = typer.Option(None, "--bind", help="Give a kernel parameter a known value, NAME=VALUE")
MergeOpt = typer.Option(None, "--merge", help="merge factors instead of the model's choice: x=NX,y=NY "
                                              "(outputs per thread in each dimension)")
RestrictOpt = typer.Option(False, "--restrict", help="kernel pointer parameters never alias (as nvcc --restrict)")
StrictOpt = typer.Option(False, "--strict", help="an internal error in a pass fails the command (exit 3) "
                                                "instead of rolling the pass back")
MatmulPrecisionOpt = typer.Option("ieee", "--matmul-precision",
                                  help="what a float matrix product may run at: ieee (FP32 on CUDA cores), "
                                       "tf32x3 (three TF32 tensor-core products, FP32-class accuracy) or tf32")
VectorWidthOpt = typer.Option(None, "--vector-width", help="elements per widened access: 1 (no widening), "
                                                           "2, 4 or 8 (halves) (default: the vectorize pass's model)")


def _defines(values: Optional[List[str]]) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, _, value = v.partition("=")
        out[name] = value if value else "1"
    return out


def _merge(text: Optional[str]) -> Optional[MergeRequest]:
    if text is None:
        return None
    try:
        return MergeRequest.parse(text)
    except ValueError as err:
        raise CompileError(str(err)) from None


def _vector_width(width: Optional[int]) -> Optional[int]:
    if width is not None and width not in (1, 2, 4, 8):
        raise CompileError(f"--vector-width: expected 1, 2, 4 or 8 (halves), got {width}")
    return width


def _bindings(values: Optional[List[str]]) -> dict[str, int]:
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


def _sizes(values: Optional[List[str]], program) -> dict[str, int | float]:
    """`--size NAME=VAL`, checked against the program (check/sizes.py): a name it uses, an integer that fits
    the parameter's type and is not negative; float parameters (`alpha=-1.5`) take any value."""
    from gpgpu_opt.check.command import parse_sizes
    from gpgpu_opt.check.sizes import check_sizes

    sizes = parse_sizes(values)
    check_sizes(program, sizes)
    return sizes


def _global_space(text: Optional[str]) -> Optional[tuple[int, int]]:
    from gpgpu_opt.check.command import parse_shape

    parts = parse_shape("--global", text)
    return None if parts is None else (parts[0], parts[1] if len(parts) > 1 else 1)


def _fail(err: Exception) -> None:
    message = str(err)
    print(message if isinstance(err, CompileError) else f"error: {message}", file=sys.stderr)
    raise typer.Exit(1)


def _target(name: str):
    try:
        return get_target(name)
    except KeyError as err:
        raise CompileError(str(err.args[0])) from None


@app.command()
@_no_traceback
def analyze(file: str = typer.Argument(..., help="the .cu file"), target: str = TargetOpt,
            as_json: bool = typer.Option(False, "--json", help="print JSON"),
            define: Optional[List[str]] = DefineOpt, include: Optional[List[str]] = IncludeOpt,
            bind: Optional[List[str]] = BindOpt) -> None:
    """What each global access of each kernel does, per request of the target."""
    try:
        tgt = _target(target)
        diagnostics = Diagnostics()
        program = load_program(file, _defines(define), include, diagnostics, target=tgt)
        bindings = _bindings(bind)
        analyses = [analyze_kernel(k, tgt, default_block(program, k), bindings) for k in program.kernels]
    except CompileError as err:
        _fail(err)
        return
    if as_json:
        print(json.dumps({"file": file, "target": tgt.name, "kernels": [a.as_dict() for a in analyses]}, indent=2))
        return
    for a in analyses:
        where = f" in {a.kernel.source_file}" if a.kernel.source_file else ""  # a file the program includes
        print(f"kernel {a.kernel.name}{where}  (target {tgt.name}: {tgt.description}; naive block "
              f"{a.block[0]}x{a.block[1]}, request = {tgt.request_threads} threads, "
              f"{tgt.transaction_bytes}-byte {'segments' if tgt.coalescing_rule != 'sectors' else 'sectors'})")
        header = f"  {'line':>4}  {'access':<34} {'mode':<5} {'kind':<10} {'coalesced':<9} {'per req':>7} " \
                 f"{'eff':>5}  {'path':<4}  {'shared by blocks':<22}  reuse"
        print(header)
        for r in a.reports:
            d = r.as_dict()
            ref = f"{d['array']}[{d['index']}]"
            ref = ref if len(ref) <= 34 else ref[:31] + "..."
            per = "-" if d["sectors_per_request"] is None else f"{d['sectors_per_request']:g}"
            eff = "-" if d["efficiency"] is None else f"{d['efficiency']:.2f}"
            coal = ("broadcast" if d.get("broadcast") else "yes") if d["coalesced"] else "no"
            reuse = ", ".join(_reuse_label(x) for x in d["reuse"]) or "none"
            camping = "  [partition camping]" if d.get("partition_camping", {}).get("camping") else ""
            shared = r.sharing.label() if r.sharing is not None else ""
            print(f"  {d['line'] or '':>4}  {ref:<34} {d['mode']:<5} {d['kind']:<10} {coal:<9} {per:>7} "
                  f"{eff:>5}  {d.get('load_path') or '':<4}  {shared:<22}  {reuse}{camping}")
        for read in a.file_scope_reads:  # __constant__/__device__ arrays: one address per warp or not
            ref = f"{read.array}[{read.index_text}]"
            ref = ref if len(ref) <= 34 else ref[:31] + "..."
            how = "broadcast" if read.extra["uniform"] else "per-thread"
            print(f"  {read.location.line if read.location else '':>4}  {ref:<34} read  {read.kind:<10} {how}")
        print()


def _reuse_label(entry: dict) -> str:
    where = entry.get("loop") or entry.get("dimension") or ""
    return f"{entry['kind']}:{entry['scope']}({where})"


def _add_resource_usage(rep: dict, result, tgt, include_dirs: list[str]) -> None:
    """Each kernel's registers, shared memory and spills from nvcc's build of the output (none without nvcc)."""
    from gpgpu_opt.nvcc import program_resource_usage

    usage = program_resource_usage(result, tgt, include_dirs)
    if usage is not None:
        for k in rep["kernels"]:
            k["resources"] = usage.get(k["name"])


@app.command("compile")
@_no_traceback
def compile_(file: str = typer.Argument(..., help="the .cu file"),
             output: str = typer.Option(..., "-o", help="output .cu file ('-': standard output), or a directory "
                                                        "(OUTDIR/) for the program and the files it includes"),
             target: str = TargetOpt,
             passes: Optional[str] = typer.Option(None, "--passes", help="comma list of passes, or 'none'"),
             report: Optional[str] = typer.Option(None, "--report", help="write a JSON report here"),
             dump_passes: Optional[str] = typer.Option(None, "--dump-passes", help="write each pass's kernel here"),
             self_check: bool = typer.Option(False, "--self-check", help="emulate a small case after every pass"),
             restrict: bool = typer.Option(False, "--restrict",
                                           help="kernel pointer parameters never alias (as nvcc --restrict)"),
             no_validate: bool = typer.Option(False, "--no-validate",
                                              help="write rewritten kernels without emulating them first"),
             no_resource_usage: bool = typer.Option(False, "--no-resource-usage",
                                                    help="leave nvcc's registers/shared/spills out of the report "
                                                         "(no nvcc build of the output)"),
             merge: Optional[str] = MergeOpt, vector_width: Optional[int] = VectorWidthOpt,
             matmul_precision: str = MatmulPrecisionOpt,
             define: Optional[List[str]] = DefineOpt, include: Optional[List[str]] = IncludeOpt,
             bind: Optional[List[str]] = BindOpt,
             no_tuned: bool = typer.Option(False, "--no-tuned", help="ignore a choice `tune` stored"),
             db: Optional[str] = typer.Option(None, "--db", help="tuning database (default: the user's cache dir)"),
             gpu: Optional[str] = typer.Option(None, "--gpu", help="use the tuned choice measured on this GPU"),
             strict: bool = StrictOpt) -> None:
    """Optimize the kernels of FILE (and of the user files it includes) and write the whole program, launch
    sites updated, to OUTPUT: a file, or a directory mirroring the program's files."""
    _strict(strict)
    dump_dir = None
    try:
        _check_destinations(file, output, report, dump_passes)
        tgt = _target(target)
        try:
            pass_names = parse_pass_list(passes)
        except ValueError as err:
            raise CompileError(str(err)) from None
        diagnostics = Diagnostics()
        program = load_program(file, _defines(define), include, diagnostics, target=tgt)
        destinations = mirrored(output, [f.path for f in program.source_files()]) \
            if is_directory_output(output) else None
        if destinations is not None:
            check_mirrored_destinations(destinations, report)
        merge_request, width, tuned = _merge(merge), _vector_width(vector_width), None
        if not no_tuned and passes is None and merge is None and vector_width is None:
            from gpgpu_opt.tune.db import TuningDB, tuned_choice

            tuned = tuned_choice(TuningDB(db), program, tgt, _bindings(bind), gpu, diagnostics)
            if tuned is not None:
                pass_names, merge_request = tuned.choice.pass_list(), _merge(tuned.choice.merge)
                width = tuned.choice.vector_width
        dump_dir = tempfile.mkdtemp(prefix="gpgpu-opt-passes-") if dump_passes else None
        options = CompileOptions.of(tgt, pass_names, _bindings(bind), dump_dir=dump_dir, self_check=self_check,
                                    assume_restrict=restrict, validate=not no_validate,
                                    merge_request=merge_request, vector_width=width,
                                    matmul_precision=matmul_precision)
        result = compile_program(program, options, diagnostics)
        rep = result.report()
        if tuned is not None:
            rep["tuned"] = tuned.as_dict()
        rep["notes"] = [str(n) for n in diagnostics.notes]
        _check_single_output(result, output, destinations)
        if report and not no_resource_usage:   # they go only into the report: no report, no nvcc build
            _add_resource_usage(rep, result, tgt, include or [])
        writes = PendingWrites()
        if destinations is None:
            writes.add_file(output, program.source_files()[0].as_written(result.output))
        else:
            rep["written"] = list(destinations.values())
            for f in program.source_files():
                writes.add_file(destinations[f.path], f.as_written(result.outputs[f.path]), make_parents=True)
        if report:
            writes.add_file(report, json.dumps(rep, indent=2) + "\n")
        if dump_dir:
            writes.add_directory(dump_passes, dump_dir)
        writes.commit()
    except CompileError as err:
        _fail(err)
        return
    finally:
        if dump_passes and dump_dir:
            shutil.rmtree(dump_dir, ignore_errors=True)


def _check_single_output(result, output: str, destinations) -> None:
    """One output file holds the main file only: a program whose included files changed needs a directory."""
    changed = [f for f in result.changed_files() if f != result.program.main_file]
    if destinations is None and changed:
        raise CompileError(f"-o {output}: the compilation changed files that {result.program.path} includes "
                           f"({', '.join(changed)}); give a directory (-o OUTDIR/) to write the whole program")


def _check_destinations(file: str, output: str, report: Optional[str], dump_passes: Optional[str]) -> None:
    """Before any work: every place compile writes can take the file, and none is the input (the files of
    a directory output are checked once the program's files are known)."""
    if is_directory_output(output):
        check_directory_destination("-o", output)
        if same_file(os.path.dirname(os.path.abspath(file)), output):
            raise CompileError(f"-o '{output}' is the input's directory: writing there would overwrite "
                               f"'{file}'; give another directory")
    elif output != STDOUT:
        check_file_destination("-o", output, {"the input": file})
    if report:
        others = {"the input": file, **({"-o": output} if output != STDOUT and not is_directory_output(output) else {})}
        check_file_destination("--report", report, others)
    if dump_passes:
        check_directory_destination("--dump-passes", dump_passes)


@app.command()
@_no_traceback
def verify(file: str = typer.Argument(..., help="the .cu file"), target: str = TargetOpt,
           passes: Optional[str] = typer.Option(None, "--passes", help="comma list of passes, or 'none'"),
           size: Optional[List[str]] = typer.Option(None, "--size", help="scalar parameter value, NAME=VAL"),
           global_: Optional[str] = typer.Option(None, "--global", help="naive thread space X[,Y]"),
           seed: int = typer.Option(1, "--seed", help="random seed for the inputs"),
           against: Optional[str] = typer.Option(None, "--against", help="check this hand-written file instead"),
           block: Optional[str] = typer.Option(None, "--block", help="naive launch block X[,Y] (default: the file's launch)"),
           grid: Optional[str] = typer.Option(None, "--grid", help="naive launch grid X[,Y] (default: the file's launch)"),
           extent: Optional[List[str]] = typer.Option(None, "--extent", help="array size in elements, NAME=N (gathers)"),
           merge: Optional[str] = MergeOpt, vector_width: Optional[int] = VectorWidthOpt,
           matmul_precision: str = MatmulPrecisionOpt,
           define: Optional[List[str]] = DefineOpt, include: Optional[List[str]] = IncludeOpt,
           bind: Optional[List[str]] = BindOpt, strict: bool = StrictOpt) -> None:
    """Emulate naive and optimized kernels on the CPU, on random data, and compare (with a race check)."""
    from gpgpu_opt.check.command import parse_extents, parse_shape, run_verify

    _strict(strict)
    try:
        tgt = _target(target)
        space, bindings = _global_space(global_), _bindings(bind)
        diagnostics = Diagnostics()
        program = load_program(file, _defines(define), include, diagnostics, target=tgt)
        sizes = _sizes(size, program)
        ok = run_verify(program, tgt, passes, sizes, space, seed, against, diagnostics, bindings,
                        _defines(define), include, parse_shape("--block", block), parse_shape("--grid", grid),
                        parse_extents(extent), _merge(merge), _vector_width(vector_width), matmul_precision)
    except (CompileError, ValueError) as err:
        _fail(err)
        return
    raise typer.Exit(0 if ok else 1)


# -- running on a GPU: run, tune, bench (gpgpu_opt/gpu, gpgpu_opt/tune) --------------------------------------
SizeOpt = typer.Option(None, "--size", help="scalar parameter value, NAME=VAL")
DbOpt = typer.Option(None, "--db", help="tuning database (default: the user's cache dir, gpgpu-opt/tuning.json)")
EmitOpt = typer.Option(None, "--emit", help="write the harnesses and a run.sh for a GPU machine here, and stop")


def _gpu_command(body) -> None:
    """Run a GPU command: compiler errors, a missing nvcc or GPU end it with a message, not a traceback."""
    from gpgpu_opt.gpu.results import GpuUnavailable
    from gpgpu_opt.toolchain import ToolchainError
    from gpgpu_opt.tune.command import ModelMissing

    try:
        status = body()
    except (GpuUnavailable, ToolchainError, ModelMissing) as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(2)
    except (CompileError, ValueError, FileNotFoundError, RuntimeError) as err:
        _fail(err)
        return
    raise typer.Exit(status)


@app.command()
@_no_traceback
def run(file: str = typer.Argument(..., help="the .cu file"), target: str = TargetOpt,
        kernel: Optional[str] = typer.Option(None, "--kernel", help="the kernel (default: the first one rewritten)"),
        size: Optional[List[str]] = SizeOpt,
        global_: Optional[str] = typer.Option(None, "--global", help="naive thread space X[,Y] (default: from the "
                                                                     "guards or globalDimX/Y)"),
        reps: int = typer.Option(30, "--reps", help="timed runs (the median is reported)"),
        reference: Optional[str] = typer.Option(None, "--reference",
                                                help="library reference: sgemm, sgemv_t, sgemv_n, sger, copy, cub_sum"),
        flops: float = typer.Option(0.0, "--flops", help="floating-point operations of one launch (for GFLOP/s)"),
        sanitize: bool = typer.Option(False, "--sanitize", help="compute-sanitizer memcheck and racecheck"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        build_only: bool = typer.Option(False, "--build-only", help="stop after nvcc (no GPU needed)"),
        out: Optional[str] = typer.Option(None, "--out", help="keep the harness and binary in this folder"),
        passes: Optional[str] = typer.Option(None, "--passes", help="comma list of passes, or 'none'"),
        merge: Optional[str] = MergeOpt, vector_width: Optional[int] = VectorWidthOpt,
        matmul_precision: str = MatmulPrecisionOpt,
        restrict: bool = RestrictOpt, define: Optional[List[str]] = DefineOpt,
        include: Optional[List[str]] = IncludeOpt, bind: Optional[List[str]] = BindOpt,
        strict: bool = StrictOpt) -> None:
    """Compile FILE, then build and run naive vs optimized on this machine's GPU: time, bandwidth, speedup, error."""
    from gpgpu_opt.gpu import commands
    from gpgpu_opt.check.command import parse_shape

    _strict(strict)
    def body() -> int:
        tgt = _target(target)
        space = parse_shape("--global", global_)
        program = load_program(file, _defines(define), include, Diagnostics(), target=tgt)
        sizes = _sizes(size, program)
        options = CompileOptions.of(tgt, parse_pass_list(passes), _bindings(bind), validate=True,
                                    merge_request=_merge(merge), assume_restrict=restrict,
                                    vector_width=_vector_width(vector_width), matmul_precision=matmul_precision)
        result = compile_program(program, options, Diagnostics(quiet=True))
        generated = commands.harness_for_kernel(program, result, kernel, sizes, reference, reps, flops,
                                                space)
        run_, status = commands.run_one(generated, tgt, build_only, out, sanitize, print)
        if run_ is not None:
            commands.print_run(run_, as_json, print)
        return status
    _gpu_command(body)


@app.command()
@_no_traceback
def tune(file: Optional[str] = typer.Argument(None, help="the .cu file (not with --from-results)"),
         target: str = TargetOpt,
         kernel: Optional[str] = typer.Option(None, "--kernel", help="the kernel (default: the first)"),
         size: Optional[List[str]] = SizeOpt, reps: int = typer.Option(20, "--reps", help="timed runs per variant"),
         flops: float = typer.Option(0.0, "--flops", help="floating-point operations of one launch"),
         db: Optional[str] = DbOpt,
         model_only: bool = typer.Option(False, "--model-only", help="rank with the offline model, no GPU"),
         build_only: bool = typer.Option(False, "--build-only", help="stop after nvcc (no GPU needed)"),
         emit: Optional[str] = EmitOpt,
         from_results: Optional[str] = typer.Option(None, "--from-results", help="rank and store what run.sh wrote"),
         passes: Optional[str] = typer.Option(None, "--passes", help="the pipeline the variants start from"),
         define: Optional[List[str]] = DefineOpt, include: Optional[List[str]] = IncludeOpt,
         bind: Optional[List[str]] = BindOpt) -> None:
    """Try the variants the passes can make, time them on the GPU, and store the fastest for `compile`."""
    from gpgpu_opt.tune import command
    from gpgpu_opt.tune.db import TuningDB

    def body() -> int:
        database = TuningDB(db)
        if from_results:
            return command.from_results(from_results, database, print)
        if file is None:
            raise CompileError("tune: give the .cu file (or --from-results DIR)")
        tgt = _target(target)
        program = load_program(file, _defines(define), include, Diagnostics(), target=tgt)
        sizes = _sizes(size, program)
        # The sizes are what the variants are timed at; only --bind specializes the code (as for `compile`).
        bindings = _bindings(bind)
        name = kernel or (program.kernels[0].name if program.kernels else "")
        dirs = [os.path.dirname(os.path.abspath(file)), *(include or [])]
        return command.tune(program, tgt, name, sizes, bindings, parse_pass_list(passes), reps, flops, database,
                            model_only, build_only, emit, dirs, print)
    _gpu_command(body)


@app.command()
@_no_traceback
def bench(files: Optional[List[str]] = typer.Argument(None, help="benchmark names or input files (default: all)"),
          target: str = TargetOpt, reps: int = typer.Option(30, "--reps", help="timed runs per variant"),
          json_out: Optional[str] = typer.Option(None, "--json", help="write the results as JSON here"),
          plot: Optional[str] = typer.Option(None, "--plot", help="write a PNG plot here (matplotlib)"),
          build_only: bool = typer.Option(False, "--build-only", help="build the harnesses here and stop"),
          emit: Optional[str] = EmitOpt,
          from_results: Optional[str] = typer.Option(None, "--from-results", help="report what run.sh wrote"),
          passes: Optional[str] = typer.Option(None, "--passes", help="comma list of passes, or 'none'")) -> None:
    """The project's benchmark: naive vs ours vs the vendor reference, at sizes that fill the GPU."""
    from pathlib import Path

    from gpgpu_opt.gpu import commands, script
    from gpgpu_opt.gpu.runner import run_harness

    def body() -> int:
        tgt = _target(target)
        if from_results:
            _, runs = script.read_results(from_results)
            return commands.bench_report(list(runs.values()), tgt, json_out, plot, print)
        generated = commands.generate_benchmarks(commands.select_benchmarks(files or []), tgt, passes, reps, print)
        if emit:
            run_sh = commands.emit_benchmarks(generated, emit, tgt)
            print(f"wrote {emit}: on the GPU machine `bash {run_sh}`, then here "
                  f"`gpgpu-opt bench --from-results {Path(emit) / 'results'}`")
            return 0
        directory = Path(tempfile.mkdtemp(prefix="gpgpu-opt-bench-"))
        builds = commands.build_all(generated, directory, tgt)
        failed = [b for b in builds.values() if not b.ok]
        for b in failed:
            print(f"error: nvcc failed on {b.source}:\n{b.log[-2000:]}", file=sys.stderr)
        if build_only:
            print(f"built {len(builds) - len(failed)} of {len(builds)} harnesses in {directory}")
            return 1 if failed else 0
        runs = [run_harness(b.binary, name) for name, b in builds.items() if b.ok]
        return commands.bench_report(runs, tgt, json_out, plot, print) or (1 if failed else 0)
    _gpu_command(body)


def _strict(flag: bool) -> None:
    """`--strict`: every compile this command makes (verify's, run's) raises InternalError on a pass's bug.
    Set as the environment's default, which compile_program reads, so it reaches each of them."""
    if flag:
        os.environ[STRICT_ENV] = "1"


def main(args: Optional[List[str]] = None, prog_name: Optional[str] = None) -> None:
    """The command line; an internal error of a pass (strict mode) ends it as a compiler error, exit 3, with
    the Python traceback only when GPGPU_OPT_TRACEBACK=1 asks for it. `args` and `prog_name` (default: the
    process's) let the tests run the command line in their own process."""
    try:
        app(args=args, prog_name=prog_name)
    except InternalError as err:
        if os.environ.get("GPGPU_OPT_TRACEBACK", "") not in ("", "0"):
            import traceback

            traceback.print_exception(err.cause)
        print(str(err), file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
