"""`gpgpu-opt analyze` (what each access does, per warp) and `gpgpu-opt verify` (naive against optimized in the
CPU emulator)."""
from __future__ import annotations

import json
from typing import List, Optional

import typer

from gpgpu_opt.cli import common
from gpgpu_opt.cli.common import Verbosity
from gpgpu_opt.diagnostics import CompileError


def register(app: typer.Typer) -> None:
    app.command(cls=common.PlainUsage)(common.no_traceback(common.with_verbosity(analyze)))
    app.command(cls=common.PlainUsage)(common.no_traceback(common.with_verbosity(verify)))


def analyze(file: str = common.FileArg, target: str = common.TargetOpt,
            as_json: bool = typer.Option(False, "--json", help="print JSON"),
            define: Optional[List[str]] = common.DefineOpt, include: Optional[List[str]] = common.IncludeOpt,
            bind: Optional[List[str]] = common.BindOpt, *, verbosity: Verbosity = Verbosity()) -> None:
    """What each global access of each kernel does, per request of the target."""
    from gpgpu_opt.analysis import analyze_kernel
    from gpgpu_opt.note_summary import fail_on_warnings, print_notes
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.frontend import load_program
    from gpgpu_opt.pipeline import default_block

    try:
        tgt = common.target(target)
        diagnostics = Diagnostics(quiet=True)
        program = load_program(file, common.defines(define), include, diagnostics, target=tgt)
        bindings = common.bindings(bind)
        analyses = [analyze_kernel(k, tgt, default_block(program, k), bindings) for k in program.kernels]
    except CompileError as err:
        common.fail(err)
        return
    print_notes(diagnostics, verbosity)
    if fail_on_warnings(diagnostics, verbosity):
        raise typer.Exit(common.EXIT_ERROR)
    if as_json:
        print(json.dumps({"file": file, "target": tgt.name, "kernels": [a.as_dict() for a in analyses]}, indent=2))
        return
    for a in analyses:
        _print_analysis(a, tgt)


def _print_analysis(a, tgt) -> None:
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


def verify(file: str = common.FileArg, target: str = common.TargetOpt, passes: Optional[str] = common.PassesOpt,
           size: Optional[List[str]] = common.SizeOpt,
           global_: Optional[str] = typer.Option(None, "--global", metavar="X[,Y]", help="naive thread space"),
           seed: int = typer.Option(1, "--seed", metavar="N", help="random seed for the inputs"),
           against: Optional[str] = typer.Option(None, "--against", metavar="FILE",
                                                 help="check this hand-written file (or an output) instead"),
           block: Optional[str] = typer.Option(None, "--block", metavar="X[,Y]",
                                               help="naive launch block (default: the file's launch)"),
           grid: Optional[str] = typer.Option(None, "--grid", metavar="X[,Y]",
                                              help="naive launch grid (default: the file's launch)"),
           extent: Optional[List[str]] = typer.Option(None, "--extent", metavar="NAME=N",
                                                      help="array size in elements (gathers)"),
           merge: Optional[str] = common.MergeOpt, vector_width: Optional[int] = common.VectorWidthOpt,
           matmul_precision: str = common.MatmulPrecisionOpt,
           define: Optional[List[str]] = common.DefineOpt, include: Optional[List[str]] = common.IncludeOpt,
           bind: Optional[List[str]] = common.BindOpt, strict: bool = common.StrictOpt, *,
           verbosity: Verbosity = Verbosity()) -> None:
    """Emulate naive and optimized kernels on the CPU, on random data, and compare (with a race check)."""
    from gpgpu_opt.check.command import parse_extents, parse_shape, run_verify
    from gpgpu_opt.note_summary import fail_on_warnings, print_notes
    from gpgpu_opt.diagnostics import Diagnostics
    from gpgpu_opt.frontend import load_program

    common.strict(strict)
    diagnostics = Diagnostics(quiet=not verbosity.verbose)   # -v: the notes as they come, among the cases
    try:
        tgt = common.target(target)
        space, bindings = common.global_space(global_), common.bindings(bind)
        program = load_program(file, common.defines(define), include, diagnostics, target=tgt)
        sizes = common.sizes(size, program)
        ok = run_verify(program, tgt, passes, sizes, space, seed, against, diagnostics, bindings,
                        common.defines(define), include, parse_shape("--block", block), parse_shape("--grid", grid),
                        parse_extents(extent), common.merge(merge), common.vector_width(vector_width),
                        common.matmul_precision(matmul_precision))
    except (CompileError, ValueError) as err:
        common.fail(err)
        return
    if not verbosity.verbose:
        print_notes(Diagnostics(notes=[n for n in diagnostics.notes if n.severity == "warning"]), verbosity)
    if fail_on_warnings(diagnostics, verbosity):
        raise typer.Exit(common.EXIT_ERROR)
    raise typer.Exit(0 if ok else common.EXIT_ERROR)
