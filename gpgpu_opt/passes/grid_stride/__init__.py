"""grid_stride: a grid-stride loop becomes one thread per element, and its launch sites cover the elements.

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) body
becomes
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) body }

and every launch of the kernel in the file gets a grid of `(n + B - 1) / B` blocks of its B threads, n as the
launch passes it. Then the other passes see a naive kernel (one thread per output, a guard) and its launch.

This runs on the program's text before the passes (a kernel's meaning changes with its launch, so both are
rewritten together): the loop is canonicalized only when its iterations are independent (independence.py)
and every launch of the kernel in the file can be re-sized; otherwise the loop is kept with a note saying
why. A launch the user sized on purpose (`<<<32 * numSMs, 256>>>`) is re-sized all the same: a note and
the report say so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pycparser import c_ast

from gpgpu_opt.analysis.aliasing import alias_facts
from gpgpu_opt.codegen import CudaGenerator
from gpgpu_opt.diagnostics import Diagnostics, Location
from gpgpu_opt.frontend import scanner
from gpgpu_opt.frontend.program import Program
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.grid_stride import loop as gs
from gpgpu_opt.passes.grid_stride.independence import why_dependent
from gpgpu_opt.passes.grid_stride.text import TextError, canonical_kernel_edits
from gpgpu_opt.pass_api.record import PassRecord, ProgramStep

PASS_NAME = "grid_stride"

#: Host calls that name a kernel without launching it: its occupancy or attributes, not its grid.
_NAMING_CALLS = re.compile(r"(?:cudaOccupancy\w*|cudaFuncSetCacheConfig|cudaFuncGetAttributes|cudaFuncSetAttribute)"
                           r"\(")


@dataclass
class Canonicalized:
    """A kernel whose grid-stride loop became one thread per element, and what its launches became."""
    kernel: str
    line: int
    resized: list[str]          # per launch site: 'line L: <<<old>>> -> <<<new>>>'

    def describe(self) -> str:
        return ("grid-stride loop canonicalized to one thread per element; launch re-sized so the grid covers "
                "the loop's range: " + "; ".join(self.resized))


def canonicalize(program: Program, diagnostics: Diagnostics, assume_restrict: bool,
                 reload, keep: frozenset[str] = frozenset()) -> tuple[Program, dict[str, Canonicalized]]:
    """The program with its grid-stride kernels canonicalized (re-read with `reload(text)`), and by kernel
    what was done. Kernels that are not are noted and left as written; so are those in `keep`, whose
    canonical form no other pass transformed (one thread per element alone only adds blocks)."""
    edits: list[tuple[int, int, str]] = []
    done: dict[str, Canonicalized] = {}
    for kernel in program.kernels:
        where = Location.of(kernel.funcdef.decl)
        if kernel.name in keep:
            diagnostics.note(f"{PASS_NAME}: {kernel.name}: grid-stride loop kept: no other pass transformed its "
                             "one-thread-per-element form, which alone is no faster than the loop; the loop and "
                             "its launch stay as written", where, kernel=kernel.name, pass_name=PASS_NAME)
            continue
        try:
            found = gs.find(kernel.body)
            launch_edits, resized = _launch_edits(program, kernel, found)
            why = why_dependent(kernel, found, alias_facts(kernel, program, assume_restrict),
                                program.device_functions)
            if why:
                raise gs.Declined(f"its iterations may depend on each other: {why}")
            kernel_edits = canonical_kernel_edits(program.text, kernel, found)
        except gs.NotGridStride:
            continue
        except (gs.Declined, TextError) as why:
            diagnostics.note(f"{PASS_NAME}: {kernel.name}: grid-stride loop kept: {why}", where, kernel=kernel.name,
                             pass_name=PASS_NAME)
            continue
        edits += kernel_edits + launch_edits
        done[kernel.name] = Canonicalized(kernel.name, where.line if where else 0, resized)
    if not done:
        return program, {}
    text = program.text
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    for item in done.values():
        diagnostics.note(f"{PASS_NAME}: {item.kernel}: {item.describe()}", Location(program.path, item.line),
                         kernel=item.kernel, pass_name=PASS_NAME)
    return reload(text), done


def _launch_edits(program: Program, kernel: Kernel, found: gs.GridStride) -> tuple[list, list[str]]:
    """The new `<<<grid, block...>>>` of every launch of the kernel, or Declined when one cannot be re-sized."""
    sites = [s for s in program.launch_sites if s.kernel == kernel.name]
    if kernel.source_file or kernel.instance is not None or any(s.file for s in sites):
        raise gs.Declined("it or a launch of it is in an included file or a template; only the main file's text "
                          "is rewritten before the passes")
    if not sites:
        raise gs.Declined("the file does not launch it, so its grid cannot be re-sized to cover the loop's range")
    _only_launches_name_it(program, kernel, sites)
    scalars = {p.name for p in kernel.params if not p.is_pointer}
    named = {n.name for n in _walk(found.bound) if isinstance(n, c_ast.ID)}
    if not named <= scalars:
        raise gs.Declined(f"the loop's bound '{CudaGenerator().visit(found.bound)}' is not known at the launch "
                          "site (it names a local of the kernel)")
    edits, resized = [], []
    for site in sites:
        if len(site.config) < 2 or len(site.args) != len(kernel.params):
            raise gs.Declined(f"the launch at line {site.line} cannot be read (its configuration or arguments)")
        block = site.config[1]
        values = {p.name: arg for p, arg in zip(kernel.params, site.args)}
        for text in [block] + [values[n] for n in named]:
            if _has_side_effects(text):
                raise gs.Declined(f"the launch at line {site.line} computes '{text.strip()}' with side effects, "
                                  "which the re-sized grid would repeat")
        bound = _bound_at_site(found.bound, values)
        threads = _block_x(program, site)
        grid = f"({bound} + {threads} - 1) / {threads}"
        new = "<<<" + ", ".join([grid, *site.config[1:]]) + ">>>"
        old = program.text[site.config_start:site.config_end]
        edits.append((site.config_start, site.config_end, new))
        resized.append(f"line {site.line}: {' '.join(old.split())} -> {new}")
    return edits, resized


def _block_x(program: Program, site) -> str:
    """The block's x at the site: its value where the host code fixes it (`256`, `dim3 threads(128)`), else
    the expression `dim3(block).x`, which reads it whether the block is a number or a dim3."""
    from gpgpu_opt.host_expr import HostScope
    from gpgpu_opt.launch.host_scopes import declarations_at
    from gpgpu_opt.launch.sites import host_text

    shape = HostScope(program.macros, {}, declarations_at(host_text(program), site.start)).dim3(site.config[1])
    if shape and isinstance(shape[0], int):
        return str(shape[0])
    return f"dim3({site.config[1].strip()}).x"


def _only_launches_name_it(program: Program, kernel: Kernel, sites) -> None:
    """A kernel named in host code other than at its launches (a function pointer, cudaLaunchKernel) may be
    launched where the grid is not re-sized: then the loop stays. Its declarations (`__global__ void k(...);`)
    and occupancy and attribute queries (`cudaOccupancyMaxPotentialBlockSize(&g, &b, k)`) are fine."""
    from gpgpu_opt.launch.sites import host_text

    tokens = scanner.tokenize(host_text(program))   # comments and strings are not names
    at_sites = {s.start for s in sites}
    for k, token in enumerate(tokens):
        if token.kind != "ident" or token.text != kernel.name or token.start in at_sites:
            continue
        if _in_declaration(tokens, k) or _in_query(tokens, k):
            continue
        raise gs.Declined(f"line {token.line} names the kernel outside a launch (it may be launched there with a "
                          "grid this pass cannot re-size)")


def _statement_start(tokens, k: int) -> int:
    while k > 0 and tokens[k - 1].text not in (";", "{", "}") and tokens[k - 1].kind != "pp":
        k -= 1
    return k


def _in_declaration(tokens, k: int) -> bool:
    """`[static] __global__ void k(...)`: a prototype (the definition is not host text)."""
    return any(t.text == "__global__" for t in tokens[_statement_start(tokens, k):k]) \
        and k + 1 < len(tokens) and tokens[k + 1].text == "("


def _in_query(tokens, k: int) -> bool:
    """An argument of a call that asks about the kernel without launching it."""
    depth = 0
    for j in range(k - 1, _statement_start(tokens, k) - 1, -1):
        t = tokens[j].text
        depth += t == ")"
        if t == "(":
            if depth == 0:
                return j > 0 and bool(_NAMING_CALLS.fullmatch(tokens[j - 1].text + "("))
            depth -= 1
    return False


def _bound_at_site(bound: c_ast.Node, values: dict[str, str]) -> str:
    """The loop's bound written with the launch's arguments for the kernel's parameters."""
    class Printer(CudaGenerator):
        def visit_ID(self, n):
            return _grouped(values[n.name]) if n.name in values else n.name
    return _grouped(Printer().visit(bound))


def _grouped(text: str) -> str:
    """`text` as one operand: in parentheses unless it is a name or a number."""
    text = text.strip()
    return text if re.fullmatch(r"\w+|\(.*\)", text) and _balanced(text) else f"({text})"


def _balanced(text: str) -> bool:
    """For `(a) + (b)`: do the outer parentheses enclose the whole text?"""
    if not text.startswith("("):
        return True
    depth = 0
    for k, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and k < len(text) - 1:
            return False
    return True


def _has_side_effects(text: str) -> bool:
    """A call (other than a dim3), an assignment or an increment in a host expression."""
    calls = [m for m in re.finditer(r"\b(\w+)\s*\(", text) if m.group(1) not in ("dim3", "sizeof")]
    return bool(calls) or bool(re.search(r"\+\+|--|(?<![=!<>])=(?!=)", text))


def _walk(node: c_ast.Node):
    yield node
    for _, child in node.children():
        yield from _walk(child)


__all__ = ["Canonicalized", "PASS_NAME", "canonicalize"]


def canonicalize_program(program: Program, options, diagnostics: Diagnostics, reload):
    """The program step: grid-stride loops canonicalized where normalize runs (the form is normalize's: it runs
    with it), those in `options.keep_loops` kept as written."""
    if "normalize" not in options.passes:
        return program, {}
    return canonicalize(program, diagnostics, options.assume_restrict, reload, options.keep_loops)


PASS = PassRecord(PASS_NAME, "grid-stride loops read as one thread per element, their launches re-sized to cover "
                  "the loop's range", form=True, program_step=ProgramStep(canonicalize_program))
