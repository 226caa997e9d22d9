"""Running the passes over every kernel of a program and assembling the output file and report."""
from __future__ import annotations

import os
import re
import traceback
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from gpgpu_opt.launch import sites
from gpgpu_opt.launch import dispatch
from gpgpu_opt.analysis.aggregates import unmodelled_parameter
from gpgpu_opt.analysis.aliasing import AliasFacts
from gpgpu_opt.analysis.file_scope import may_write_device_variable
from gpgpu_opt.analysis.launch_races import RacyWrite, launch_races
from gpgpu_opt.check.sanity import SanityError
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics, Location
from gpgpu_opt.frontend.program import Program
from gpgpu_opt.frontend.scanner import outside_namespaces
from gpgpu_opt.frontend.templates import specialization_edits
from gpgpu_opt.launch.host_view import view_of
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.line_wrap import wrap_lines
from gpgpu_opt.launch.contract import launch_assumptions
from gpgpu_opt.launch.lowering import launch_helper, rewrite_launch
from gpgpu_opt import passes as registry
from gpgpu_opt.pass_api.instruments import Dump, PassInstrument, SanityCheck, SelfCheck
from gpgpu_opt.pass_api.context import DecisionLog, PassContext
from gpgpu_opt.pass_api.facts import KernelFacts, fallback_block, kernel_facts
from gpgpu_opt.pass_api.options import CompileOptions
from gpgpu_opt.rewriting.batch_loop import BatchLoop
from gpgpu_opt.rewriting.batches import Batches
from gpgpu_opt.rewriting.cbuild import Unsupported
from gpgpu_opt.rewriting.three_d import block_z
from gpgpu_opt.pass_api.schedule import Schedule
from gpgpu_opt.rewriting.parameter_views import ParameterViews
from gpgpu_opt.rewriting.prototypes import declaration_plan, with_declared_signature
from gpgpu_opt.rewriting.tidy import tidy
from gpgpu_opt.rewriting.vector import definitions as vector_definitions
from gpgpu_opt.signature import requalified
from gpgpu_opt.targets import Target

if TYPE_CHECKING:
    from gpgpu_opt.check.validate import Validation


@dataclass
class KernelResult:
    naive: Kernel
    optimized: Kernel
    context: PassContext
    passes_run: list[str] = field(default_factory=list)
    races: list[RacyWrite] = field(default_factory=list)
    validation: "Validation | None" = None

    @property
    def rewritten(self) -> bool:
        return self.optimized.launch is not None

    @property
    def transformed(self) -> bool:
        """Did a pass transform the kernel? Restatements alone (pointer qualifiers, induction variables in closed
        form: a form for the later passes) are not a transformation: such a kernel is written as the user wrote
        it; so is one whose check rolled back every pass but the form passes (their decisions are in the log
        all the same)."""
        kept = self.validation.kept_after if self.validation is not None else None
        if self.validation is not None and self.validation.status == "rolled back" \
                and (kept or "naive") in registry.form_passes() | {"naive"}:
            return False
        return self.rewritten or any(d.applied and not d.restatement for d in self.context.log.decisions)


@dataclass
class CompileResult:
    program: Program
    target: Target
    kernels: list[KernelResult]
    output: str                                             # the main file
    #: Every user file of the program, edited or not, by its name in the program (the main file too).
    outputs: dict[str, str] = field(default_factory=dict)

    def changed_files(self) -> list[str]:
        """The user files whose text the compilation changed."""
        return [f.path for f in self.program.source_files() if self.outputs.get(f.path, f.text) != f.text]

    def report(self) -> dict:
        report = {"file": self.program.path, "target": self.target.name,
                  "kernels": [_kernel_report(k) for k in self.kernels],
                  "passed_through": self.program.passed_through}
        if self.program.code_in_included_files:  # (a header of helpers alone changes nothing here)
            report["files"] = [f.path for f in self.program.source_files()]
            report["changed_files"] = self.changed_files()
        return report


def _kernel_report(result: KernelResult) -> dict:
    k = result.optimized
    d = {"name": k.name, **({"file": k.source_file} if k.source_file else {}), "passes": result.passes_run,
         "naive_block": result.context.facts.naive_block.as_list(),
         "decisions": result.context.log.as_dicts()}
    if result.context.facts.aliasing is not None:
        d["aliasing"] = result.context.facts.aliasing.as_dict()
    if result.races:
        d["naive_launch_races"] = [{"write": r.subject, "dimension": r.dimension, "threads": r.extent}
                                   for r in result.races]
    if result.validation is not None:
        d["validation"] = result.validation.as_dict()
    if k.launch is not None:
        gx, gy = k.launch.grid_expressions()
        d["launch"] = {"block": k.launch.block.as_list(), "outputs_per_block": k.launch.outputs_per_block.as_list(),
                       "grid": [gx, gy]}
        if k.launch.z_steps:                # marching z: the grid's z is the naive launch's z threads over it
            d["launch"]["z_steps"] = k.launch.z_steps
        if k.launch.z_blocks:               # a z loop split over the grid's z: that many blocks in z
            d["launch"]["z_blocks"] = k.launch.z_blocks
        if dispatch.dispatched(k):   # launched where the naive launch has at least this many threads
            d["launch"]["dispatch_min_threads"] = k.size_dispatch
    return d


def default_block(program: Program, kernel: Kernel) -> tuple[int, int]:
    """The naive block: the launch sites', else 16x16 for a kernel that uses y, else 256."""
    return sites.naive_block(program, kernel) or fallback_block(kernel)


STRICT_ENV = "GPGPU_OPT_STRICT"


class InternalError(Exception):
    """A pass failed in a way it did not mean to (a bug, not the SanityError that says "cannot do this"),
    raised instead of a rollback in strict mode. Not a CompileError: nothing that handles a user's error may
    swallow it."""

    def __init__(self, pass_name: str, kernel_name: str, location: Location | None, cause: BaseException):
        self.pass_name, self.kernel_name, self.location, self.cause = pass_name, kernel_name, location, cause
        super().__init__(str(self))

    @property
    def detail(self) -> str:
        return "".join(traceback.format_exception_only(type(self.cause), self.cause)).strip()

    def __str__(self) -> str:
        prefix = f"{self.location}: " if self.location else ""
        return f"{prefix}error: internal error in pass {self.pass_name} on kernel '{self.kernel_name}': {self.detail}"


def strict_default() -> bool:
    """Strict unless asked otherwise? `GPGPU_OPT_STRICT=1` (the test suite sets it) says yes."""
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def optimize_kernel(kernel: Kernel, ctx: PassContext, pass_names: list[str],
                    instruments: list[PassInstrument] | None = None,
                    strict: bool = False) -> tuple[Kernel, list[tuple[str, Kernel]]]:
    """Run the passes in order, each followed by the instruments (pass_api/instruments.py: the sanity checks
    by default). A pass that raises, or whose kernel an instrument refuses, is rolled back with a note; the
    kernel then continues from the last good version. `strict`: a pass that raises anything but a
    SanityError (a bug in the pass) raises InternalError instead. Returns the final kernel and each pass that
    ran with the kernel it left."""
    passes = registry.registered_passes()
    instruments = [SanityCheck()] if instruments is None else instruments
    current = kernel
    schedule = Schedule(kernel)
    ran: list[tuple[str, Kernel]] = []
    for name in pass_names:
        ctx.log.pass_name = name
        ctx.schedule = schedule     # a pass rolled back leaves the schedule as it was
        before = current.copy()
        try:
            result = passes[name](before, ctx)
            tidy(result.funcdef)
            for instrument in instruments:
                instrument.after_pass(name, result, ctx)
        except SanityError as err:
            ctx.log.skip("kernel", f"rolled back: {err}", Location.of(kernel.funcdef))
            continue
        except Exception as err:  # noqa: BLE001 - never let a pass bug become a miscompile or a crash
            if strict:
                raise InternalError(name, kernel.name, Location.of(kernel.funcdef.decl), err) from err
            detail = "".join(traceback.format_exception_only(type(err), err)).strip()
            ctx.log.skip("kernel", f"rolled back after an internal error ({detail})", Location.of(kernel.funcdef))
            continue
        schedule = _scheduled(schedule, ctx.schedule, result, current)
        current = result
        ran.append((name, current))
        for instrument in instruments:
            instrument.kept(name, current, len(ran))
    ctx.schedule = schedule         # the kept kernel's schedule: `current` is its lowering
    if any(name not in registry.form_passes() for name, _ in ran):   # a form alone is written as the user wrote it
        tidy(current.funcdef, last=True)
    return current, ran


def _scheduled(schedule: Schedule, recorded: Schedule, result: Kernel, current: Kernel) -> Schedule:
    """The schedule after a pass: the one it recorded (a scheduling pass; `result` is its lowering), else
    one whose source is the kernel it rewrote source to source (a pass that canonicalizes: later passes
    schedule from its result), unless it left a scheduled kernel as it was."""
    if recorded is not schedule:
        return recorded
    if not schedule.empty and kernel_source(result.funcdef) == kernel_source(current.funcdef):
        return schedule
    return Schedule(result)


def compile_program(program: Program, options: CompileOptions, diagnostics: Diagnostics) -> CompileResult:
    """Optimize every kernel of `program` as `options` say (passes/options.py)."""
    if options.strict is None:
        options = options.but(strict=strict_default())
    log = Diagnostics(quiet=True)   # the notes of a compile that may be redone, told once it is kept
    canonical_program, canonical = _program_steps(program, options, log)
    if canonical:
        result = compile_kernels(canonical_program, canonical, options, log)
        idle = frozenset(r.naive.name for r in result.kernels if r.naive.name in canonical and not _built_on(r))
        if idle:    # the form alone is no faster than what the user wrote: compile again with those kept as written
            return compile_program(program, options.but(keep_loops=options.keep_loops | idle), diagnostics)
        _replay(log, diagnostics)
        return result
    _replay(log, diagnostics)
    return compile_kernels(program, {}, options, diagnostics)


def compile_with(program: Program, target: Target, pass_names: list[str], diagnostics: Diagnostics,
                 bindings: dict[str, int] | None = None, **options) -> CompileResult:
    """compile_program with the options spelled out (`options`: CompileOptions' fields by keyword); the
    passes' `named` come from a PassList. For callers that compile once with a few options (tests, tools)."""
    return compile_program(program, CompileOptions.of(target, pass_names, bindings, **options), diagnostics)


def compile_kernels(program: Program, canonical: dict, options: CompileOptions,
                    diagnostics: Diagnostics) -> CompileResult:
    """Run the passes over each kernel of the program (`canonical`: the kernels a program step canonicalized,
    by name, with the step's name) and assemble the files."""
    results = [_compile_kernel(program, kernel, canonical.get(kernel.name), options, diagnostics)
               for kernel in program.kernels]
    outputs = assemble_files(program, results)
    return CompileResult(program, options.target, results, outputs[program.main_file], outputs)


def _compile_kernel(program: Program, kernel: Kernel, canonical, options: CompileOptions,
                    diagnostics: Diagnostics) -> KernelResult:
    pass_names = list(options.passes)
    views = _views(kernel, pass_names, diagnostics)
    start = kernel if views is None else views.start    # what the passes see: flat arrays
    facts = kernel_facts(program, kernel if views is not None and views.members else start, options)
    if views is not None and views.members:  # the launches' facts; of a struct's arrays nothing is known
        facts = replace(facts, aliasing=AliasFacts(False, "", why_not=f"'{kernel.name}' reads arrays through a "
                                                   "struct passed by value, which may point anywhere"))
    block = facts.naive_block
    races = _report_launch_races(program, kernel, block, diagnostics) if pass_names else []
    held = bool(pass_names) and not races and _left_as_written(program, start, diagnostics)
    start, names = _z_axis(program, start, pass_names, diagnostics)
    batches = _batches(kernel, start, views is None and names == pass_names and not races and not held,
                       diagnostics)
    if batches is not None:
        start, facts = batches.start, _batch_facts(facts, batches)
    log = DecisionLog(diagnostics, kernel.name)
    ctx = PassContext(options, facts, log, kernel.name, lowering=registry.lowering())
    if canonical is not None:
        name, form = canonical
        log.record(name, "kernel", form.describe(), Location.of(kernel.funcdef.decl))
    optimized, ran = optimize_kernel(start, ctx, [] if races or held else names,
                                     _instruments(program, start, block, options), options.strict)
    if batches is not None:
        optimized, ran = _batches_declared(batches, kernel, optimized, ran, diagnostics)
    result = KernelResult(kernel, optimized if views is None else views.declared(optimized), ctx,
                          [name for name, _ in ran], races)
    if views is not None and not result.transformed:
        result.optimized = kernel.copy()    # no pass paid: the kernel as written
    elif options.validate and result.transformed:
        _validate(program, result, [("naive", kernel), *ran], block, dict(options.bindings), diagnostics,
                  options.strict, views)
    return result


def _instruments(program: Program, kernel: Kernel, block: tuple[int, int],
                 options: CompileOptions) -> list[PassInstrument]:
    """The instruments run around each pass: the sanity checks, and as the options ask the emulated self-check
    and the dumps."""
    instruments: list[PassInstrument] = [SanityCheck()]
    if options.self_check:
        from gpgpu_opt.check.cases import quick_check

        instruments.append(SelfCheck(quick_check(program, kernel, block)))
    if options.dump_dir:
        instruments.append(Dump(options.dump_dir, kernel.name))
    return instruments


def _built_on(result: KernelResult) -> bool:
    """Did a pass transform a canonicalized kernel beyond the forms (PassRecord.form: restrict's qualifiers,
    normalize's temporaries)? Otherwise its canonical form only costs (a grid-stride loop's one thread per
    element, more blocks): it stays as written."""
    form = registry.form_passes()
    kept = result.validation.kept_after if result.validation is not None else None
    if result.validation is not None and (kept or "naive") in form | {"naive"}:
        return False    # the check rolled back what the later passes did
    return result.rewritten or any(d.applied and d.pass_name not in form for d in result.context.log.decisions)


def _replay(log: Diagnostics, diagnostics: Diagnostics) -> None:
    for note in log.notes:
        diagnostics._emit(note)


def _program_steps(program: Program, options: CompileOptions, diagnostics: Diagnostics) -> tuple[Program, dict]:
    """The program as the passes' program steps canonicalize it, in pipeline order (grid-stride loops as one
    thread per element, their launches re-sized: a form for the passes), each re-read from the rewritten
    text; and the kernels they changed, by name: (the step's pass, what it did)."""
    from gpgpu_opt.frontend import load_program

    canonical: dict = {}
    for record in registry.program_steps():
        def reload(text: str, path=program.path, defines=program.defines, dirs=program.include_dirs) -> Program:
            return load_program(path, defines, dirs, Diagnostics(quiet=True), target=options.target, text=text)
        program, changed = record.program_step.canonicalize(program, options, diagnostics, reload)
        canonical.update({name: (record.name, form) for name, form in changed.items()})
    return program, canonical


def _z_axis(program: Program, kernel: Kernel, pass_names: list[str],
            diagnostics: Diagnostics) -> tuple[Kernel, list[str]]:
    """The kernel the passes start from and the passes that may run, as its blocks' z allows
    (rewriting/three_d.py): blocks of one z make threadIdx.z 0, else only the passes whose records say they
    may run on 3-D blocks (PassRecord.three_d)."""
    found = sites.naive_launch(program, kernel, {})
    z = block_z(kernel, program.device_functions, None if found is None else found.block[2], found is not None)
    if z.why_not is None:
        return z.start, pass_names
    kept = [name for name in pass_names if registry.runs_on_3d_blocks(name, z.reads_z_itself)]
    if kept != list(pass_names):
        diagnostics.note(f"{kernel.name}: not retiled: {z.why_not}", Location.of(kernel.funcdef.decl),
                         kernel=kernel.name)
    return kernel, kept


def _batches(kernel: Kernel, start: Kernel, wanted: bool, diagnostics: Diagnostics) -> Batches | BatchLoop | None:
    """The kernel of one batch (rewriting/batches.py, batch_loop.py) where the kernel reads blockIdx.z as an
    independent batch index or loops over its batches; a note says why its batches are not taken apart where
    they are not."""
    found = Batches.of(kernel, start) if wanted else None
    if found is None and wanted:
        found = BatchLoop.of(start)
    if isinstance(found, str):
        diagnostics.note(f"{kernel.name}: its batches not optimized apart: {found}",
                         Location.of(kernel.funcdef.decl), kernel=kernel.name)
        return None
    return found


def _batch_facts(facts: KernelFacts, batches: Batches | BatchLoop) -> KernelFacts:
    """The facts of the kernel of one batch: a slice is its array's part (distinct where the array is,
    written where it is); its alignment is not known."""
    renamed = batches.renamed_arrays()
    aliasing = facts.aliasing
    if aliasing is not None:
        aliasing = replace(aliasing, written={renamed.get(name, name) for name in aliasing.written})
    return replace(facts, aliasing=aliasing, alignment=MappingProxyType(
        {name: bytes_ for name, bytes_ in facts.alignment.items() if name not in renamed}))


def _batches_declared(batches: Batches | BatchLoop, kernel: Kernel, optimized: Kernel, ran: list, diagnostics: Diagnostics):
    """The passes' versions written back as batched kernels; where one cannot be, the kernel as written."""
    try:
        return batches.declared(optimized), [(name, batches.declared(v)) for name, v in ran]
    except Unsupported as why:
        diagnostics.note(f"{kernel.name}: left as written: {why}", Location.of(kernel.funcdef.decl),
                         kernel=kernel.name)
        return kernel.copy(), []


def _validate(program: Program, result: KernelResult, versions: list[tuple[str, Kernel]], block: tuple[int, int],
              bindings: dict[str, int] | None, diagnostics: Diagnostics, strict: bool,
              views: ParameterViews | None = None) -> None:
    """Emulate the versions against the naive kernel and keep the newest that the check vouches for (or that
    is proved without it); a note says what was dropped or left unchecked, and why. With `views`, the
    versions are the passes' (flat) ones: each is emulated as the views say, and the one kept is declared."""
    from gpgpu_opt.check.validate import validate as validate_kernel

    kernel = result.naive
    if views is None:
        result.optimized, result.validation = validate_kernel(program, kernel, versions, block, bindings=bindings)
    else:
        emulated = [("naive", views.emulated_naive)] + [(name, views.emulated(v)) for name, v in versions[1:]]
        chosen, result.validation = validate_kernel(program, views.emulated_naive, emulated, block,
                                                    bindings=bindings)
        at = next((k for k, (_, v) in enumerate(emulated) if v is chosen), 0)   # (0: as written)
        result.optimized = kernel.copy() if at == 0 else views.declared(versions[at][1])
    validation, where = result.validation, Location.of(kernel.funcdef.decl)
    if strict and validation.error is not None:
        raise InternalError("validate (the emulator)", kernel.name, where, validation.error) from validation.error
    if validation.status == "rolled back" and validation.emulated:
        diagnostics.note(f"{kernel.name}: the emulated check failed ({validation.detail}); "
                         f"kept the kernel {_after(validation.kept_after)}", where, kernel=kernel.name)
    elif validation.status == "rolled back":
        diagnostics.note(f"{kernel.name}: not written as transformed: {validation.detail}; kept the kernel "
                         f"{_after(validation.kept_after)}", where, kernel=kernel.name)
    elif validation.status == "not checked":
        diagnostics.note(f"{kernel.name}: {validation.detail}", where, kernel=kernel.name)


def _views(kernel: Kernel, pass_names: list[str], diagnostics: Diagnostics) -> ParameterViews | None:
    """The kernel's parameters as flat arrays for the passes (rewriting/parameter_views.py), where it has a
    struct of arrays or arrays of arrays and nothing else keeps it as written; a use that keeps it has a note."""
    views = ParameterViews.of(kernel) if pass_names else None
    if isinstance(views, str):
        diagnostics.note(f"'{kernel.name}' left as written: {views}", Location.of(kernel.funcdef.decl),
                         kernel=kernel.name)
        return None
    if views is None or unmodelled_parameter(views.start) is not None:
        return None
    return views


def _left_as_written(program: Program, kernel: Kernel, diagnostics: Diagnostics) -> bool:
    """A kernel that may store to a file-scope `__device__` variable, or has a struct or pointer-to-pointers
    parameter, is left as written (no pass models that memory), with a note saying why."""
    why = unmodelled_parameter(kernel) or may_write_device_variable(kernel, program.device_functions)
    host_text = view_of(program).once("every file's text",
                                      lambda: "\n".join(f.text for f in program.source_files()))
    symbol = next((n for n, v in kernel.file_variables.items() if v.space == "device"
                   and re.search(rf"cudaGetSymbolAddress\s*\([^;]*\b{re.escape(n)}\b", host_text)), None)
    if why is None and symbol is not None:
        why = f"the host takes the address of the __device__ variable '{symbol}' (a pointer argument may alias it)"
    if why is None:
        return False
    diagnostics.note(f"'{kernel.name}' left as written: {why}",
                     Location.of(kernel.funcdef.decl), kernel=kernel.name)
    return True


def _after(pass_name: str | None) -> str:
    return "as written" if pass_name in (None, "naive") else f"as it was after {pass_name}"


def _report_launch_races(program: Program, kernel: Kernel, block: tuple[int, int],
                         diagnostics: Diagnostics) -> list[RacyWrite]:
    """Stores that several threads of the program's own launch make to one element: a warning each; the
    kernel is then left as written (its result already depends on the order the threads run in)."""
    found = sites.naive_launch(program, kernel, {})
    if found is None:
        return []
    for line, why, file in found.unknown:
        diagnostics.note(f"the launch of '{kernel.name}' is not known here: {why}",
                         Location(file or program.path, line), kernel=kernel.name)
    # the dimensions the launch states (a scalar block is 1 in y), the default for the others
    block = tuple(b if f is None else f for f, b in zip(found.block[:2], block))
    races = launch_races(kernel, block, found.grid[:2])
    for race in races:
        who = f"the {race.extent} threads of a block" if race.dimension.startswith("thread") else \
            f"the {race.extent} blocks of the grid"
        diagnostics.warning(f"the naive launch races: {who} that differ only in {race.dimension} all store to "
                            f"{race.subject} (block {block[0]}x{block[1]}, launched at {found.describe()}); "
                            f"'{kernel.name}' is left unchanged", Location.of(race.node), kernel=kernel.name)
    return races


def assemble(program: Program, results: list[KernelResult]) -> str:
    """The main file of the program as assemble_files writes it."""
    return assemble_files(program, results)[program.main_file]


def assemble_files(program: Program, results: list[KernelResult]) -> dict[str, str]:
    """Every user file of the program (by its name in the program), edited: each kernel replaced by its
    printed version in the file it lives in, the launch helpers of a file's rewritten kernels inserted
    before the first of them there, the headers they need included by that file, and the launch sites of
    rewritten kernels in every file given their new configuration."""
    edits: dict[str, list[tuple[int, int, str]]] = {f.path: [] for f in program.source_files()}
    headers: dict[str, set[str]] = {f.path: set() for f in program.source_files()}

    def file_of(path: str) -> str:
        return path or program.main_file

    declared = declaration_plan(program, results)  # prototypes get the definitions' new qualifiers
    for file, file_edits in declared.edits.items():
        edits[file] += file_edits
    for r in results:
        file = file_of(r.naive.source_file)
        if r.transformed:
            headers[file] |= set(r.optimized.includes)
        if r.naive.instance is not None:
            continue  # an instantiation of a template kernel: written as a specialization, below
        if r.naive.name in declared.keep_declared:  # or, where one cannot be edited, keep their signature
            r = replace(r, optimized=with_declared_signature(r.optimized, r.naive))
        start, end = r.naive.source_span
        naive_copy = dispatch.naive_copy(program, r.naive, r.optimized.size_dispatch) \
            if dispatch.dispatched(r.optimized) else ""   # launched where the launch is small
        edits[file].append((start, end, _kernel_text(program.text_of(file)[start:end], r) + naive_copy))
    for file in edits:
        mine = [r for r in results if file_of(r.naive.source_file) == file]
        edits[file] += specialization_edits(mine, lambda r: _kernel_text("", r))
        edits[file] += dispatch.naive_template_copies(program, mine)  # the naive instances the launches choose
    rewritten = [r for r in results if r.rewritten]
    names = {r.naive.name for r in rewritten}
    early = _sites_maybe_before_definition(program, rewritten)
    for file in edits:
        mine = [r for r in rewritten if file_of(r.naive.source_file) == file]
        if mine:
            _insert_helpers(program, file, mine, edits[file], headers[file], early)
        for r in rewritten:  # a guarded copy where a site may come before the kernel's file is included
            if file in early.get(r.naive.name, ()):
                at = _after_preamble(program.text_of(file))
                edits[file].append((at, at, _helpers(program, [r], headers[file], early)))
    dispatched = {r.naive.name: r.optimized for r in rewritten if dispatch.dispatched(r.optimized)}
    optimized = {r.naive.name: r.optimized for r in rewritten}
    for site in program.launch_sites:
        if site.kernel in dispatched:
            edits[file_of(site.file)].append(dispatch.dispatch_site(site, program.text_of(file_of(site.file))))
        elif site.kernel in names and len(site.config) >= 2:
            file = file_of(site.file)
            edits[file].append((site.config_start, site.config_end, rewrite_launch(site, optimized[site.kernel])))
    out = {}
    for file, file_edits in edits.items():
        text = program.text_of(file)
        missing = [h for h in sorted(headers[file]) if f"<{h}>" not in text]
        if missing:
            first_include = re.search(r"^#\s*include", text, re.M)
            at = first_include.start() if first_include else _after_header_comment(text)
            file_edits.append((at, at, "".join(f"#include <{h}>\n" for h in missing)))
        for start, end, new in sorted(file_edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = text[:start] + new + text[end:]
        out[file] = text
    return out


def _insert_helpers(program: Program, file: str, rewritten: list[KernelResult],
                    edits: list[tuple[int, int, str]], headers: set[str], early: dict[str, set[str]]) -> None:
    """The launch helpers of a file's rewritten kernels, before the first of them (after the file's
    preamble where a launch site in the file comes before it)."""
    text = program.text_of(file)
    first = min(r.naive.source_span[0] for r in rewritten)
    names = {r.naive.name for r in rewritten}
    sites_before = [s.start for s in program.launch_sites
                    if (s.file or program.main_file) == file and s.start < first and s.kernel in names]
    at = first if not sites_before else _after_preamble(text)
    at = outside_namespaces(text, at)  # a launch `ns::k<<<...>>>` outside `ns` calls them unqualified
    edits.append((at, at, _helpers(program, rewritten, headers, early)))


def _helpers(program: Program, rewritten: list[KernelResult], headers: set[str], early: dict[str, set[str]]) -> str:
    """The helpers' text (their refusal needs cstdio and cstdlib, added to `headers`); those of a kernel
    with copies in other files (`early`) under an include guard, so that the first copy seen defines them.
    First, the vectors CUDA lacks that the kernels use (`half8`), each under its own guard."""
    out = list(dict.fromkeys(text for r in rewritten for text in vector_definitions(r.optimized.funcdef)))
    for r in rewritten:
        contract = launch_assumptions(program, r.naive, r.optimized, r.context.facts.naive_block)
        if contract is not None and contract.requirements():
            headers |= {"cstdio", "cstdlib"}
        text = wrap_lines(launch_helper(r.optimized, contract))
        if r.naive.name in early:
            guard = f"GPGPU_OPT_{r.naive.name.upper()}_LAUNCH_HELPERS"
            text = f"#ifndef {guard}\n#define {guard}\n{text}#endif\n"
        out.append(text)
    return "".join(out)


_USER_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"', re.MULTILINE)


def _sites_maybe_before_definition(program: Program, rewritten: list[KernelResult]) -> dict[str, set[str]]:
    """Kernel -> the other files with a launch site of it that a user #include follows: the kernel may be
    defined after the site there (its file included at the end), so the helpers go before the site too."""
    early: dict[str, set[str]] = {}
    for r in rewritten:
        home = r.naive.source_file or program.main_file
        for site in program.launch_sites:
            file = site.file or program.main_file
            if site.kernel == r.naive.name and file != home and _USER_INCLUDE.search(program.text_of(file), site.start):
                early.setdefault(r.naive.name, set()).add(file)
    return early


def _kernel_text(as_written: str, result: KernelResult) -> str:
    """A kernel no pass transformed keeps the user's text, only its parameters requalified (normalize's
    temporaries are a form for the later passes, not worth a change of their own); a transformed one is
    printed, after the line that states its launch if that changed."""
    if not result.transformed and not result.naive.shorthand:
        try:
            return requalified(as_written, result.optimized)
        except ValueError:
            pass  # a parameter list the text edit cannot follow (a comment with a comma): print it
    launch = sites.launch_line(result.optimized) + "\n" if result.rewritten else ""
    return launch + wrap_lines(result.optimized.with_launch_bounds(kernel_source(result.optimized.funcdef).rstrip("\n")))


def _after_preamble(text: str) -> int:
    """Just after the leading comments and #include / #define lines."""
    return _after_leading(text, directives=True)


def _after_header_comment(text: str) -> int:
    """Just after the file's leading comments (where headers go in a file that includes none: before the
    user's macros, which a header must not see)."""
    return _after_leading(text, directives=False)


def _after_leading(text: str, directives: bool) -> int:
    pos = 0
    in_comment = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if in_comment or stripped.startswith("/*"):
            in_comment = "*/" not in (stripped if in_comment else stripped[2:])
            pos += len(line)
            continue
        if (directives and stripped.startswith("#")) or not stripped or stripped.startswith("//"):
            pos += len(line)
            continue
        break
    return pos


__all__ = ["assemble_files", "compile_program", "compile_with", "CompileOptions", "CompileResult", "InternalError", "KernelResult", "optimize_kernel",
           "strict_default"]
