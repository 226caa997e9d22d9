"""The commands that build and run on a GPU: `run` (naive against optimized, timed), `tune` (the variants,
timed, the fastest stored) and `bench` (the project's benchmark table). Without a GPU they build
(--build-only) or emit a script for a GPU machine (--emit)."""
from __future__ import annotations

import os
import sys
import tempfile
from typing import List, Optional

import typer

from gpgpu_opt.cli import common
from gpgpu_opt.diagnostics import CompileError


def register(app: typer.Typer) -> None:
    app.command(cls=common.PlainUsage)(common.no_traceback(run))
    app.command(cls=common.PlainUsage)(common.no_traceback(tune))
    app.command(cls=common.PlainUsage)(common.no_traceback(bench))


def _gpu_command(body) -> None:
    """Run a GPU command: compiler errors, a missing nvcc or GPU end it with a message, not a traceback."""
    from gpgpu_opt.gpu.results import GpuUnavailable
    from gpgpu_opt.toolchain import ToolchainError
    from gpgpu_opt.tune.command import ModelMissing

    try:
        status = body()
    except (GpuUnavailable, ToolchainError, ModelMissing) as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(common.EXIT_USAGE)
    except (CompileError, ValueError, FileNotFoundError, RuntimeError) as err:
        common.fail(err)
        return
    raise typer.Exit(status)


def run(file: str = common.FileArg, target: str = common.TargetOpt,
        kernel: Optional[str] = typer.Option(None, "--kernel", metavar="NAME",
                                             help="the kernel (default: the first one rewritten)"),
        size: Optional[List[str]] = common.SizeOpt,
        global_: Optional[str] = typer.Option(None, "--global", metavar="X[,Y[,Z]]",
                                              help="naive thread space, Z the batches of a kernel reading "
                                                   "blockIdx.z (default: the program's launch, the guards or "
                                                   "globalDimX/Y)"),
        extent: Optional[List[str]] = typer.Option(None, "--extent", metavar="NAME=N",
                                                   help="array size in elements (where the subscripts do not "
                                                        "bound it)"),
        reps: int = typer.Option(30, "--reps", metavar="N", help="timed runs (the median is reported)"),
        reference: Optional[str] = typer.Option(None, "--reference", metavar="NAME",
                                                help="library reference: sgemm, sgemv_t, sgemv_n, sger, copy, cub_sum"),
        flops: float = typer.Option(0.0, "--flops", metavar="N",
                                    help="floating-point operations of one launch (for GFLOP/s)"),
        sanitize: bool = typer.Option(False, "--sanitize", help="compute-sanitizer memcheck and racecheck"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        build_only: bool = typer.Option(False, "--build-only", help="stop after nvcc (no GPU needed)"),
        out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="keep the harness and binary here"),
        passes: Optional[str] = common.PassesOpt,
        merge: Optional[str] = common.MergeOpt, vector_width: Optional[int] = common.VectorWidthOpt,
        matmul_precision: str = common.MatmulPrecisionOpt,
        restrict: bool = common.RestrictOpt, define: Optional[List[str]] = common.DefineOpt,
        include: Optional[List[str]] = common.IncludeOpt, bind: Optional[List[str]] = common.BindOpt,
        strict: bool = common.StrictOpt) -> None:
    """Compile FILE, then build and run naive vs optimized on this machine's GPU: time, bandwidth, speedup, error."""
    common.strict(strict)

    def body() -> int:
        from gpgpu_opt.check.command import parse_extents, parse_shape
        from gpgpu_opt.diagnostics import Diagnostics
        from gpgpu_opt.frontend import load_program
        from gpgpu_opt.gpu import commands
        from gpgpu_opt.pipeline import CompileOptions, compile_program

        tgt = common.target(target)
        space = parse_shape("--global", global_)
        program = load_program(file, common.defines(define), include, Diagnostics(quiet=True), target=tgt)
        sizes = common.sizes(size, program)
        options = CompileOptions.of(tgt, common.pass_list(passes), common.bindings(bind), validate=True,
                                    merge_request=common.merge(merge), assume_restrict=restrict,
                                    vector_width=common.vector_width(vector_width),
                                    matmul_precision=common.matmul_precision(matmul_precision))
        result = compile_program(program, options, Diagnostics(quiet=True))
        generated = commands.harness_for_kernel(program, result, kernel, sizes, reference, reps, flops, space,
                                                parse_extents(extent))
        run_, status = commands.run_one(generated, tgt, build_only, out, sanitize, print)
        if run_ is not None:
            commands.print_run(run_, as_json, print)
        return status
    _gpu_command(body)


def tune(file: Optional[str] = typer.Argument(None, metavar="FILE", help="the .cu file (not with --from-results)"),
         target: str = common.TargetOpt,
         kernel: Optional[str] = typer.Option(None, "--kernel", metavar="NAME", help="the kernel (default: the first)"),
         size: Optional[List[str]] = common.SizeOpt,
         reps: int = typer.Option(20, "--reps", metavar="N", help="timed runs per variant"),
         flops: float = typer.Option(0.0, "--flops", metavar="N", help="floating-point operations of one launch"),
         db: Optional[str] = common.DbOpt,
         model_only: bool = typer.Option(False, "--model-only", help="rank with the offline model, no GPU"),
         build_only: bool = typer.Option(False, "--build-only", help="stop after nvcc (no GPU needed)"),
         emit: Optional[str] = common.EmitOpt,
         from_results: Optional[str] = typer.Option(None, "--from-results", metavar="DIR",
                                                    help="rank and store what run.sh wrote"),
         passes: Optional[str] = typer.Option(None, "--passes", metavar="LIST",
                                              help="the pipeline the variants start from"),
         define: Optional[List[str]] = common.DefineOpt, include: Optional[List[str]] = common.IncludeOpt,
         bind: Optional[List[str]] = common.BindOpt) -> None:
    """Try the variants the passes can make, time them on the GPU, and store the fastest for `compile`."""
    def body() -> int:
        from gpgpu_opt.diagnostics import Diagnostics
        from gpgpu_opt.frontend import load_program
        from gpgpu_opt.tune import command
        from gpgpu_opt.tune.db import TuningDB

        database = TuningDB(db)
        if from_results:
            return command.from_results(from_results, database, print)
        if file is None:
            raise CompileError("tune: give the .cu file (or --from-results DIR)")
        tgt = common.target(target)
        program = load_program(file, common.defines(define), include, Diagnostics(), target=tgt)
        sizes = common.sizes(size, program)
        # The sizes are what the variants are timed at; only --bind specializes the code (as for `compile`).
        bindings = common.bindings(bind)
        name = kernel or (program.kernels[0].name if program.kernels else "")
        dirs = [os.path.dirname(os.path.abspath(file)), *(include or [])]
        return command.tune(program, tgt, name, sizes, bindings, common.pass_list(passes), reps, flops, database,
                            model_only, build_only, emit, dirs, print)
    _gpu_command(body)


def bench(files: Optional[List[str]] = typer.Argument(None, metavar="NAME...",
                                                      help="benchmark names or input files (default: all)"),
          target: str = common.TargetOpt,
          reps: int = typer.Option(30, "--reps", metavar="N", help="timed runs per variant"),
          json_out: Optional[str] = typer.Option(None, "--json", metavar="FILE", help="write the results as JSON here"),
          plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE", help="write a PNG plot here (matplotlib)"),
          build_only: bool = typer.Option(False, "--build-only", help="build the harnesses here and stop"),
          emit: Optional[str] = common.EmitOpt,
          from_results: Optional[str] = typer.Option(None, "--from-results", metavar="DIR",
                                                     help="report what run.sh wrote"),
          passes: Optional[str] = common.PassesOpt) -> None:
    """The project's benchmark: naive vs ours vs the vendor reference, at sizes that fill the GPU."""
    def body() -> int:
        from pathlib import Path

        from gpgpu_opt.gpu import commands, script
        from gpgpu_opt.gpu.runner import run_harness

        tgt = common.target(target)
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
