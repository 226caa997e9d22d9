"""Size-dispatched launches: the optimized kernel where the launch is big enough to gain, else the naive one.

Some transformations gain only above a thread count. Widening by V (passes/vectorize) gives each thread V
elements and the launch V times fewer threads: that pays only once the widened launch still fills the GPU,
measured on an H100 as 2 GPU-fulls of naive threads (SMs x resident threads per SM) for a streaming body, 4 for
long chains of slow arithmetic (`min_threads_widened`). Below that, fewer threads mean fewer loads in flight (a
streaming body) or fewer warps to hide the chains behind (passes/vectorize/latency.py), and the widened kernel
loses.
When the launch's size is a constant (macros, `--bind`, a stated `globalDimX`/`globalDimY`), that is decided
here at compile time. When it is a run-time value (Rodinia cfd's `nelr`), the output keeps both kernels, the
naive one renamed `<name>_naive`, and each launch site chooses:

    if (k_gains(grid, block)) k<<<k_grid(grid, block), k_block(grid, block)>>>(args); else k_naive<<<grid, block>>>(args);

A whitelist: every launch of the kernel is a plain launch statement `k<<<grid, block[, shared, stream]>>>(args);`
after the kernel, grid and block free of side effects (they are read by the test and by the launch chosen), and
the kernel is named nowhere else. Each argument is evaluated once, by the launch chosen. A launch in another file
than the kernel (`#include "kernels.cu"`, a header) chooses too where the translation unit defines the kernel once,
before it: the naive copy and the helpers written beside the kernel are then declared there; being `static` (and
the copy keeping the kernel's own specifiers), they still link where two files include the header. A template
instance's launch `k<float, 256><<<...>>>` chooses between its specialization and `k_naive<float, 256>`, from a
copy of the template as written (naive_template_copies). Anything
else is not dispatched: the kernel is then decided as if the launch were small (not transformed), with a note.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from math import prod

from pycparser import c_ast

from gpgpu_opt.frontend.program import Program
from gpgpu_opt.frontend.scanner import LaunchSite
from gpgpu_opt.host_expr import parse_host_expression
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.launch.host_view import view_of
from gpgpu_opt.launch.sites import naive_launch_name, naive_name, sites_of

#: Calls a launch's grid or block may make and still be read twice: they have no side effects.
_PURE_CALLS = frozenset({"dim3", "min", "max", "ceil", "ceilf", "floor", "floorf"})
_PURE_UNARY = frozenset({"-", "+", "!", "~", "sizeof"})


@dataclass(frozen=True)
class DispatchFacts:
    """What the program's launches of a kernel allow: a size known at compile time, or a choice at run time."""
    #: The naive launch's threads, where every site's grid and block are known when compiling; else None.
    threads: int | None
    #: The launch sites, for notes ('line 12, 40').
    where: str
    #: Why the sites cannot choose at run time (None: they can).
    why_not: str | None


def dispatch_facts(program: Program, kernel: Kernel, bindings: dict[str, int] | None = None,
                   stated_space: tuple[int | None, int | None] = (None, None)) -> DispatchFacts:
    """`stated_space`: the thread space the program states (`#define globalDimX 4096`, the original compiler's
    inputs, passes/facts.stated_space): the size of a kernel the file does not launch."""
    from gpgpu_opt.launch.sites import naive_launch

    found = naive_launch(program, kernel, dict(bindings or {}))
    if found is None:
        why_not = f"the file does not launch '{kernel.name}'"
        if None in stated_space:
            return DispatchFacts(None, "", why_not)
        return DispatchFacts(prod(stated_space), "the stated globalDimX x globalDimY", why_not)
    threads = prod(found.grid) * prod(found.block) if found.complete else None
    return DispatchFacts(threads, found.describe(), _why_not_dispatched(program, kernel))


@dataclass(frozen=True)
class SizeVerdict:
    """The size rule's answer for a transformation that gains from `min_threads` naive threads on."""
    keep: bool                  # keep the transformed kernel
    dispatch_threads: int | None  # launch it only from this many naive threads (None: always)
    reason: str


def unsized(facts: DispatchFacts | None) -> str | None:
    """Why a transformation that gains only above some size cannot be kept whatever that size is: the launch's
    size is not known when compiling and its sites cannot choose by it at run time. None: one of them can."""
    if facts is None:
        return "the launch's size is not known"
    if facts.threads is not None or facts.why_not is None:
        return None
    return f"the launch's size is known only at run time, where it cannot choose the kernel: {facts.why_not}"


def size_verdict(facts: DispatchFacts | None, min_threads: int, why_slow: str,
                 trips: int | None = None) -> SizeVerdict:
    """`why_slow`: what makes the transformation lose below `min_threads` naive threads. `trips`: for a body
    with one loop of a constant trip count, each thread's trips: the rule counts threads x trips (see
    min_threads_widened)."""
    if trips is not None:
        return _streamed_verdict(facts, min_threads, why_slow, trips)
    if facts is not None and facts.threads is not None:
        if facts.threads >= min_threads:
            return SizeVerdict(True, None, f"the launch ({facts.where}) has {facts.threads} threads, at least the "
                                           f"{min_threads} that fill the GPU widened")
        return SizeVerdict(False, None, f"{why_slow}; the launch ({facts.where}) has {facts.threads} threads, "
                                        f"fewer than the {min_threads} that fill the GPU widened")
    if facts is None or facts.why_not is not None:
        why_not = facts.why_not if facts is not None else "the launches are not known"
        return SizeVerdict(False, None, f"{why_slow}; below {min_threads} threads it loses, and the launch cannot "
                                        f"choose at run time: {why_not}")
    return SizeVerdict(True, min_threads, f"widened where the launch has at least {min_threads} threads, the naive "
                                          f"kernel below")


def _streamed_verdict(facts: DispatchFacts | None, min_threads: int, why_slow: str, constant: int) -> SizeVerdict:
    """Threads x trips against `min_threads`, counting at most STREAMED_TRIPS_COUNTED trips."""
    trips = max(min(constant, STREAMED_TRIPS_COUNTED), 1)
    if facts is not None and facts.threads is not None:
        verdict = size_verdict(facts, min_threads, why_slow)
        if verdict.keep:
            return verdict
        if facts.threads * trips < min_threads:
            return SizeVerdict(False, None, f"{verdict.reason} (x {trips} trips each, the most counted)")
        return SizeVerdict(True, None, f"the launch ({facts.where}) has {facts.threads} threads of {constant} trips "
                                       f"each, at least the {min_threads} elements that fill the GPU widened "
                                       f"(counting {trips} trips a thread at most)")
    if facts is None or facts.why_not is not None:
        return size_verdict(facts, min_threads, why_slow)
    least = -(-min_threads // trips)     # a run-time launch: threads from min / trips on
    return SizeVerdict(True, least, f"widened where the launch has at least {least} threads ({constant} trips "
                                    f"each, {trips} counted: {min_threads} elements), the naive kernel below")


#: The most trips of a thread's loop that the fill rule counts (min_threads_widened): a body that loops gains
#: from half the threads a body without loops needs, never fewer.
STREAMED_TRIPS_COUNTED = 2
#: Naive threads, in GPU-fulls (target.resident_threads), from which a widened kernel gains: a streaming body,
#: and a body whose elements are long chains of slow arithmetic (passes/vectorize/latency.slow_chain).
STREAMING_FILLS = 2
SLOW_CHAIN_FILLS = 4


def min_threads_widened(target, slow_chain: bool) -> int:
    """The naive threads from which a widened kernel gains over the naive one: the one threshold of every
    widening, whatever its width (2 or 4).

    What it rests on, measured on an H100 (132 SMs x 2048 = 270336 resident threads): ten bodies, each naive
    against widened by 2 and by 4, at 16K to 8M elements, L2 flushed, median of 60 (bench/fill_rule.py, its table
    in bench/corpus_results/fill_rule_h100.txt):
    - streaming bodies (one to sixteen arrays, up to four divisions, square roots or transcendentals per
      element): from 524288 threads (about 2 GPU-fulls) every one gained, 1.02x to 1.13x; at 262144 they were
      0.96x to 1.09x, and below that the one-array bodies lost up to 5%;
    - a chain of eight (cfd's step factor): widened by 4 it lost at 262144 threads (0.89x) and gained from
      524288 (1.06x); widened by 2 it still lost at 524288 (0.95x) and gained from 1048576 (1.05x, about 4
      GPU-fulls).
    A body that loops over a trip count the source fixes streams threads x trips elements: size_verdict counts
    those against the same threshold, at most STREAMED_TRIPS_COUNTED (2) trips a thread, so never below one
    GPU-full of threads (a streaming body without loops exactly as above; a loop whose trip count the source
    leaves to a parameter counts threads alone, and is widened to 8-byte vectors at most:
    vectorize.RUN_TIME_LOOP_VECTOR_BYTES). Measured on an H100 (CUDA events, L2 flushed,
    median of 21; bench/corpus_results/loop_fill_h100.txt), Rodinia hotspot3D's z-marching stencil widened by
    4: 0.69x to 0.82x at 65536 threads (4 to 32 trips), 0.82x at 147456, 0.84x to 0.88x at 200704 (8 and 32
    trips), 1.04x to 1.13x at 262144 (4 to 32), 1.02x at 331776, 1.22x at 409600, 1.17x at 589824: below about
    one GPU-full more trips did not help. A loop of 5 constant trips (cfd's initialisation: stores of a
    constant) ran 0.87x to 1.06x at every size from 65536 to 1048576 threads, a 5-trip copy 1.11x to 1.32x."""
    return (SLOW_CHAIN_FILLS if slow_chain else STREAMING_FILLS) * target.resident_threads


def _launched_name(kernel: Kernel) -> str:
    """The name a launch of the kernel writes: a template instance's is its template's (`k` of `k<float, 256>`)."""
    return kernel.instance.template_name if kernel.instance is not None else kernel.name


def _why_not_dispatched(program: Program, kernel: Kernel) -> str | None:
    """Why the launch sites cannot choose between the kernels at run time, or None."""
    from gpgpu_opt.analysis.aliasing import unread_launches

    if kernel.instance is not None and kernel.instance.written:
        return (f"'{kernel.instance.spelled}' is the program's own specialization, which the copy of the template "
                f"'{kernel.instance.template_name}' as written would not launch")
    if kernel.shorthand:
        return "the kernel as written uses the original compiler's shorthand, not CUDA"
    name = naive_name(_launched_name(kernel))
    if name in view_of(program).once("words", lambda: _words(program)):
        return f"the program already names '{name}'"
    unread = unread_launches(kernel, program)
    if unread is not None:
        return f"not every launch of '{kernel.name}' can be read: {unread}"
    sites = sites_of(program, kernel.name)
    for site in sites:
        why = _site_problem(program, kernel, site)
        if why is not None:
            return f"the launch at {_site_where(program, kernel, site)} {why}"
    return _statement_problem(program, _launched_name(kernel)) or _other_files_problem(program, kernel, sites) \
        or _named_beside_the_program(program, kernel)


def _site_where(program: Program, kernel: Kernel, site: LaunchSite) -> str:
    """'line N', or 'line N of FILE' for a launch in another file than the kernel."""
    file = site.file or program.main_file
    return f"line {site.line}" if file == (kernel.source_file or program.main_file) else f"line {site.line} of {file}"


def _site_problem(program: Program, kernel: Kernel, site: LaunchSite) -> str | None:
    """What keeps one launch statement from choosing (where it stands among the files: _other_files_problem)."""
    home = kernel.source_file or program.main_file
    text = program.text_of(site.file)
    if (site.file or program.main_file) == home and site.start < kernel.source_span[1]:
        return "comes before the kernel's definition"
    if (site.template_args is not None) != (kernel.instance is not None):
        return "names template arguments" if kernel.instance is None else "names no template arguments"
    if not 2 <= len(site.config) <= 4 or site.args_start < 0:
        return "is not `k<<<grid, block[, shared, stream]>>>(args)`"
    if _statement_end(text, site) is None:
        return "is not a statement of its own (`k<<<...>>>(...);`)"
    for what, expression in zip(("grid", "block"), site.config):
        if not _pure(parse_host_expression(expression)):
            return f"has a {what} `{expression.strip()}` that may have side effects (it would be read twice)"
    return None


def _statement_problem(program: Program, name: str) -> str | None:
    """Every launch, as nvcc's host compilation reads it (macros expanded), is an expression statement (for a
    template: the launches of all its instances, `name` its template's)."""
    from gpgpu_opt.analysis.aliasing import host_view
    from gpgpu_opt.frontend.host_syntax import host_syntax

    syntax = host_syntax(host_view(program), program.path)
    launches_by_name, sites_by_name = view_of(program).once("launches by name", lambda: _launches_by_name(program))
    launches, site_count = launches_by_name.get(name, []), sites_by_name.get(name, 0)
    if len(launches) != site_count:
        return f"the preprocessed host code launches '{name}' {len(launches)} times, the text {site_count} times"
    for launch in launches:
        if launch.call.parent is None or launch.call.parent.type != "expression_statement":
            return f"the launch at {syntax.where(launch.call)} is part of a larger expression"
    return None


def _words(program: Program) -> frozenset[str]:
    """Every word of the program's files, in code, strings, comments and directives alike (a name the naive
    copy would take must be free of all of them): gathered once (per kernel, it was quadratic)."""
    return frozenset(word for f in program.source_files() for word in re.findall(r"\w+", f.text))


def _launches_by_name(program: Program) -> tuple[dict[str, list], dict[str, int]]:
    """The preprocessed host code's launches and the text's launch sites, by kernel name: counted once per
    program (per kernel, a file of many kernels was quadratic)."""
    from gpgpu_opt.analysis.aliasing import host_view
    from gpgpu_opt.frontend.host_syntax import host_syntax

    launches: dict[str, list] = {}
    for launch in host_syntax(host_view(program), program.path).launches:
        launches.setdefault(launch.kernel, []).append(launch)
    sites: dict[str, int] = {}
    for site in program.launch_sites:
        written = _written_name(program, site)
        sites[written] = sites.get(written, 0) + 1
    return launches, sites


def _other_files_problem(program: Program, kernel: Kernel, sites: list[LaunchSite]) -> str | None:
    """Launches in another file than the kernel call `k_naive`, `k_gains`, `k_grid` and `k_block`, written beside
    the kernel in its file: they choose only where the translation unit (the program's files as nvcc's host
    compilation reads them, #include expanded) defines the kernel once, before every launch of it."""
    from gpgpu_opt.analysis.aliasing import host_view
    from gpgpu_opt.frontend.host_syntax import host_syntax

    home = kernel.source_file or program.main_file
    elsewhere = [s for s in sites if (s.file or program.main_file) != home]
    if not elsewhere:
        return None
    syntax = host_syntax(host_view(program), program.path)
    where = f"the launch at {_site_where(program, kernel, elsewhere[0])}"
    definitions = [f for f in syntax.functions if syntax.function_name(f) == kernel.name]
    if not definitions:
        return f"{where} is in another file than the kernel, whose definition the host compilation does not read"
    if len(definitions) > 1 or syntax.location(definitions[0])[0] != _host_name(program, home):
        return (f"{where} is in another file than the kernel, and the translation unit defines '{kernel.name}' "
                f"{len(definitions)} times, not once in {home} (a file included twice without an include guard?)")
    launched = sorted(syntax.location(launch.call) for launch in syntax.launches if launch.kernel == kernel.name)
    written = sorted((_host_name(program, s.file or program.main_file), s.line) for s in sites)
    if launched != written:
        return (f"{where} is in another file than the kernel, and the translation unit's launches of "
                f"'{kernel.name}' are not the files' ones, one for one")
    defined_at = definitions[0].end_byte
    for launch in syntax.launches:
        if launch.kernel == kernel.name and launch.call.start_byte < defined_at:
            file, line = syntax.location(launch.call)
            return (f"the launch at line {line} of {file} comes before '{kernel.name}' is defined: {home} is "
                    f"included after it, so the naive kernel and the size test would not be declared there")
    return None


#: Files that may be translation units or headers of their own, looked at beside the program's files.
_SOURCE_SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl")
_MOST_FILES_LOOKED_AT = 512


def _named_beside_the_program(program: Program, kernel: Kernel) -> str | None:
    """A file beside the program's own that includes the kernel's file (a header, a kernel .cu) and names the
    kernel: compiled as a translation unit of its own (`nvcc main.cu other.cu`) against the output, its
    launches, which this program does not hold, would run the optimized kernel with their naive configuration.
    Only the directories of the program's files are looked at: a program split otherwise is not seen."""
    if not kernel.source_file:
        return None
    ours = {os.path.realpath(f.path) for f in program.source_files()}
    header = os.path.basename(kernel.source_file)
    includes = re.compile(rf'^[ \t]*#[ \t]*include[ \t]*["<](?:[^">\n]*/)?{re.escape(header)}[">]', re.MULTILINE)
    names = re.compile(rf"\b{re.escape(kernel.name)}\b")
    for directory in sorted({os.path.dirname(path) for path in ours}):
        for path in _source_files_in(directory):
            if os.path.realpath(path) in ours:
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(1 << 20)
            except OSError:
                continue
            if includes.search(text) and names.search(text):
                return (f"'{kernel.name}' is also named in {path}, which includes {header} but is not part of this "
                        f"program (a file compiled on its own): its launches would run the optimized kernel with their "
                        f"naive configuration")
    return None


def _source_files_in(directory: str) -> list[str]:
    """The first files of `directory` (by name) that may be sources or headers; none where it cannot be read."""
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return []
    paths = [os.path.join(directory, e) for e in entries if e.endswith(_SOURCE_SUFFIXES)]
    return [p for p in paths if os.path.isfile(p)][:_MOST_FILES_LOOKED_AT]


def _host_name(program: Program, file: str) -> str:
    """The name the host view's #line markers give a user file: the main file as the program was given."""
    return program.path if file == program.main_file else file


def _written_name(program: Program, site: LaunchSite) -> str:
    """The kernel's name as the launch writes it (a template instance's site is given the instance's identifier)."""
    return re.match(r"\w*", program.text_of(site.file)[site.start:]).group()


def _statement_end(text: str, site: LaunchSite) -> int | None:
    """The offset just past the `;` that ends the launch statement, or None when something else follows."""
    found = re.compile(r"\s*;").match(text, site.args_end)
    return found.end() if found else None


def _pure(node: c_ast.Node | None) -> bool:
    """An expression that reads, and changes nothing (a whitelist)."""
    if node is None:
        return False
    if isinstance(node, (c_ast.ID, c_ast.Constant)):
        return True
    if isinstance(node, c_ast.BinaryOp):
        return _pure(node.left) and _pure(node.right)
    if isinstance(node, c_ast.UnaryOp):
        return node.op in _PURE_UNARY and (node.op == "sizeof" or _pure(node.expr))
    if isinstance(node, c_ast.Cast):
        return _pure(node.expr)
    if isinstance(node, c_ast.TernaryOp):
        return _pure(node.cond) and _pure(node.iftrue) and _pure(node.iffalse)
    if isinstance(node, c_ast.StructRef):
        return _pure(node.name)
    if isinstance(node, c_ast.ArrayRef):
        return _pure(node.name) and _pure(node.subscript)
    if isinstance(node, c_ast.FuncCall):
        args = node.args.exprs if node.args is not None else []
        return isinstance(node.name, c_ast.ID) and node.name.name in _PURE_CALLS and all(_pure(a) for a in args)
    return False


# -- writing the output ----------------------------------------------------------------------------------

def dispatched(kernel: Kernel) -> bool:
    """Does the output keep the naive kernel beside this optimized one, chosen by size at each launch?"""
    return kernel.launch is not None and kernel.size_dispatch is not None


def naive_copy(program: Program, naive: Kernel, threads: int) -> str:
    """The naive kernel as the user wrote it, renamed, to follow the optimized one."""
    start, end = naive.source_span
    text = program.text_of(naive.source_file)[start:end]
    renamed = re.sub(rf"\b{re.escape(naive.name)}(\s*\()", rf"{naive_name(naive.name)}\1", text, count=1)
    return (f"\n\n// gpgpu-opt: '{naive.name}' as written, launched where the launch has fewer than {threads} "
            f"threads ({naive.name}_gains)\n{renamed}")


def naive_template_copies(program: Program, results) -> list[tuple[int, int, str]]:
    """For each template with a dispatched instance among `results` (pipeline's, of one file): the template as
    written, renamed `<template>_naive`, inserted after it. The optimized `k<float, 256>` is an explicit
    specialization, which replaces the template for those arguments: the naive instance the small launches run
    is `k_naive<float, 256>`, instantiated from the copy."""
    by_template: dict[tuple[int, int], list] = {}
    for r in results:
        if r.naive.instance is not None and dispatched(r.optimized):
            by_template.setdefault(r.naive.source_span, []).append(r)
    edits = []
    for (start, end), instances in by_template.items():
        template = instances[0].naive.instance.template_name
        text = program.text_of(instances[0].naive.source_file)[start:end]
        renamed = re.sub(rf"\b{re.escape(template)}(\s*\()", rf"{naive_name(template)}\1", text, count=1)
        which = "; ".join(f"{naive_launch_name(r.naive)} where the launch has fewer "
                          f"than {r.optimized.size_dispatch} threads ({r.naive.name}_gains)" for r in instances)
        edits.append((end, end, f"\n\n// gpgpu-opt: '{template}' as written, launched as {which}\n{renamed}"))
    return edits


def dispatch_site(site: LaunchSite, text: str) -> tuple[int, int, str]:
    """The edit (start, end, new text) that turns the launch statement into the size test and both launches
    (`k<float, 256>` and `k_naive<float, 256>` for a template instance's)."""
    end = _statement_end(text, site)
    grid, block, *rest = site.config
    args = text[site.args_start:site.args_end]
    spelled = text[site.start:site.config_start].rstrip()
    written = re.match(r"\w*", spelled).group()
    optimized = ", ".join([f"{site.kernel}_grid({grid}, {block})", f"{site.kernel}_block({grid}, {block})", *rest])
    naive = ", ".join([grid, block, *rest])
    gains = f"{site.kernel}_gains({grid}, {block})"
    return (site.start, end, f"if ({gains}) {spelled}<<<{optimized}>>>{args}; "
                             f"else {naive_name(written)}{spelled[len(written):]}<<<{naive}>>>{args};")
