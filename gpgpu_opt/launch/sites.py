"""Launch sites as facts: the naive launch's block and grid, the parameters its grid covers, the names of a
kernel's naive copy. Writing the launch helpers and the new `<<<grid, block>>>` is launch_lowering's."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pycparser import c_ast

from gpgpu_opt.ast_util import is_call_to
from gpgpu_opt.frontend.program import Program
from gpgpu_opt.frontend.scanner import LaunchSite, find_functions
from gpgpu_opt.launch.host_view import view_of
from gpgpu_opt.host_expr import HostDeclarations, HostScope, evaluate_int, parse_host_expression, split_top_level
from gpgpu_opt.launch.host_scopes import declarations_at
from gpgpu_opt.kernel import Kernel


@dataclass(frozen=True)
class NaiveLaunch:
    """How the program launches a kernel: block and grid (x, y, z), a component None where the launch
    sites disagree or it cannot be evaluated, and the lines of the launch sites."""
    block: tuple[int | None, int | None, int | None]
    grid: tuple[int | None, int | None, int | None]
    lines: tuple[int, ...]
    #: (line, why, file) for a site's dim3 that has no known value (assigned in a loop or a branch, ...): a
    #: note. file: the user file of the site ('': the main file).
    unknown: tuple[tuple[int, str, str], ...] = ()
    #: The user file of each site, beside `lines` ('': the main file).
    files: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return None not in self.block and None not in self.grid

    def describe(self) -> str:
        where = "line" if len(self.lines) == 1 else "lines"
        files = self.files or ("",) * len(self.lines)
        return f"{where} {', '.join(f'{f}:{n}' if f else str(n) for f, n in zip(files, self.lines))}"


def host_text(program: Program, file: str = "") -> str:
    """A user file of the program ('': the main file) without its CUDA functions: kernel locals are not
    host variables. Offsets and lines stay, so a launch site's offsets hold in it."""
    return _without_cuda_functions(program.text_of(file))


@lru_cache(maxsize=32)
def _without_cuda_functions(text: str) -> str:
    """(Each launch site asks for its file's host text: scanned once per text.)"""
    for f in sorted(find_functions(text), key=lambda f: f.start, reverse=True):
        text = text[:f.start] + re.sub(r"[^\n]", " ", text[f.start:f.end]) + text[f.end:]
    return text


def sites_of(program: Program, name: str) -> list[LaunchSite]:
    """The launch sites of the kernel named `name`, in the program's order (indexed once per program: the
    questions asked per kernel of each site filtered every site, quadratic in a file of many kernels)."""
    return view_of(program).once("sites by kernel", lambda: _sites_by_kernel(program)).get(name, [])


def _sites_by_kernel(program: Program) -> dict[str, list[LaunchSite]]:
    found: dict[str, list[LaunchSite]] = {}
    for site in program.launch_sites:
        found.setdefault(site.kernel, []).append(site)
    return found


def naive_launch(program: Program, kernel: Kernel, sizes: dict[str, int | float]) -> NaiveLaunch | None:
    """The kernel's launch as its launch sites make it, evaluated with `sizes`; None without sites.

    `sizes` are values of the kernel's scalar parameters and of host variables. A kernel parameter that
    a site passes as a plain host variable (`k<<<(n + 255) / 256, 256>>>(d, n)`) gives that variable its
    value, so the launch covers what the case's sizes say. Each site is read with the host variables its
    own function sees (declarations_at). Without sizes it is asked once per kernel (host_view)."""
    if not sizes:
        return view_of(program).answer("naive launch", kernel, lambda: _naive_launch(program, kernel, {}))
    return _naive_launch(program, kernel, sizes)


def _naive_launch(program: Program, kernel: Kernel, sizes: dict[str, int | float]) -> NaiveLaunch | None:
    sites = [s for s in sites_of(program, kernel.name) if len(s.config) >= 2]
    if not sites:
        return None
    blocks, grids, unknown = [], [], []
    for site in sites:
        declarations = declarations_at(host_text(program, site.file), site.start)
        scope = HostScope(program.macros, _site_values(kernel, site, sizes), declarations)
        blocks.append(scope.dim3(site.config[1]) or (None, None, None))
        grids.append(scope.dim3(site.config[0]) or (None, None, None))
        unknown += [(site.line, why, site.file) for name, why in declarations.reasons.items()
                    if re.search(rf"\b{re.escape(name)}\b", ",".join(site.config[:2]))]
    return NaiveLaunch(_agreed(blocks), _agreed(grids), tuple(s.line for s in sites), tuple(unknown),
                       tuple(s.file for s in sites) if any(s.file for s in sites) else ())


def launch_arguments(program: Program, kernel: Kernel) -> dict[str, int]:
    """The integer scalar parameters to which every launch site of the kernel passes the same value that
    the host code fixes (`k<<<g, b>>>(d, N)` with `#define N 100000`, or `int n = 1 << 20;` set once)."""
    sites = [s for s in sites_of(program, kernel.name) if len(s.config) >= 2]
    values: dict[str, set] = {}
    for site in sites:
        scope = HostScope(program.macros, {}, declarations_at(host_text(program, site.file), site.start))
        for param, arg in zip(kernel.params, site.args):
            if not param.is_pointer and param.base_type in _INTEGER_TYPES:
                values.setdefault(param.name, set()).add(scope.evaluate_int(arg))
    return {name: seen.pop() for name, seen in values.items() if len(seen) == 1 and None not in seen}


_INTEGER_TYPES = ("int", "unsigned", "unsigned int", "long", "unsigned long", "long long", "size_t")


def covered_parameters(program: Program, kernel: Kernel, axis: int = 0) -> frozenset[str]:
    """The integer parameters n for which every launch site of the kernel starts at least n threads in x
    (`axis` 0; 1 and 2 for y and z),
    whatever n is: the site passes n as a host variable v of an integer type, and the grid's x is
    `(v + C) / D` in integer arithmetic, with D the block's x and C >= D - 1 (the usual `(n + 255) / 256`).
    A float `ceil((float)n / 256)` is not proof: past 2^24 the float rounds n down."""
    sites = [s for s in sites_of(program, kernel.name) if len(s.config) >= 2]
    if not sites:
        return frozenset()
    covered: set[str] | None = None
    for site in sites:
        host = host_text(program, site.file)
        declarations = declarations_at(host, site.start)
        scope = HostScope(program.macros, {}, declarations)
        block = scope.dim3(site.config[1])
        components = _grid_components(site.config[0], declarations)
        grid_x = components[axis] if len(components) > axis else None
        here = {p.name for p, arg in zip(kernel.params, site.args)
                if p.base_type in _INTEGER_TYPES and not p.is_pointer and block and block[axis]
                and grid_x is not None and _rounds_up(grid_x, _passed_variable(arg), block[axis], scope, host)}
        covered = here if covered is None else covered & here
    return frozenset(covered or ())


def truncating_grids(program: Program, kernel: Kernel) -> dict[str, str]:
    """Axes along which a launch site's grid is a division that rounds down (`ny / 4` blocks of 4 rows):
    its threads may stop short of the kernel's guard (`j < ny - 2`), leaving the last rows undone. That
    is the program's meaning, so a grid rounded up to bigger blocks must not reach past it. Axis -> where."""
    found: dict[str, str] = {}
    for site in sites_of(program, kernel.name):
        if len(site.config) < 2:
            continue
        declarations = declarations_at(host_text(program, site.file), site.start)
        scope = HostScope(program.macros, {}, declarations)
        for axis, component in zip("xy", _grid_components(site.config[0], declarations)):
            if axis not in found and _rounds_down(component, scope):
                found[axis] = f"the grid's {axis} `{component.strip()}` at line {site.line}"
    return found


def _rounds_down(text: str, scope: HostScope) -> bool:
    """`E / D` in integer arithmetic that may stop short of E's main part. E's terms that name nothing
    but what D names (`255`, `BLOCK - 1` over `BLOCK`) are the round-up; the rest is what is covered.
    Known values: it rounds down when the blocks cover less than the rest. Else it does not only when the
    round-up is at least D - 1 (`(n + 255) / 256`, `(n + D - 1) / D`)."""
    try:
        node = parse_host_expression(text)
    except Exception:  # noqa: BLE001 - a grid the host parser cannot read: nothing is claimed
        return False
    while isinstance(node, c_ast.Cast) and " ".join(getattr(node.to_type.type.type, "names", [])) in _INTEGER_TYPES:
        node = node.expr
    if not (isinstance(node, c_ast.BinaryOp) and node.op == "/"):
        return False
    divisor_names = _names(node.right)
    terms = _terms(node.left, 1)
    round_up = [(t, sign) for t, sign in terms if _names(t) <= divisor_names]
    rest = [(t, sign) for t, sign in terms if not _names(t) <= divisor_names]
    divisor, added, covered = _integer(node.right, scope), _sum(round_up, scope), _sum(rest, scope)
    if divisor is None or divisor <= 0 or added is None:
        return not _is_divisor_minus_one(round_up, node.right)
    if covered is not None:
        return (covered + added) // divisor * divisor < covered
    return added < divisor - 1


def _names(node: c_ast.Node) -> set[str]:
    """The variables and macros an expression names (a dim3's member counts as the dim3)."""
    if isinstance(node, c_ast.ID):
        return {node.name}
    if isinstance(node, c_ast.StructRef):
        return _names(node.name)
    return set().union(*(_names(child) for _, child in node.children())) if node.children() else set()


def _sum(terms: list[tuple[c_ast.Node, int]], scope: HostScope) -> int | None:
    values = [_integer(t, scope) for t, _ in terms]
    return None if None in values else sum(sign * v for (_, sign), v in zip(terms, values))


def _is_divisor_minus_one(terms: list[tuple[c_ast.Node, int]], divisor: c_ast.Node) -> bool:
    """`D - 1` (in any order) among the round-up terms, D written as in the divisor."""
    from gpgpu_opt.codegen import CudaGenerator

    text = CudaGenerator().visit(divisor)
    written = sorted((CudaGenerator().visit(t), sign) for t, sign in terms)
    return written == sorted([(text, 1), ("1", -1)])


def _grid_components(text: str, declarations: HostDeclarations) -> list[str]:
    """The grid's components as written; none for a dim3 variable whose value the site cannot tell."""
    node = parse_host_expression(text)
    if isinstance(node, c_ast.ID) and node.name in declarations.dim3:
        return list(declarations.dim3[node.name] or [])
    if is_call_to(node, "dim3"):
        return split_top_level(text[text.index("(") + 1:text.rindex(")")])
    return [text]


def _grid_x_text(text: str, declarations: HostDeclarations) -> str | None:
    components = _grid_components(text, declarations)
    return components[0] if components else None


def _rounds_up(grid_x: str, variable: str | None, block_x: int, scope: HostScope, host: str) -> bool:
    """`(variable + C) / block_x` with C >= block_x - 1, all of it integer arithmetic."""
    if variable is None or not _declared_integer(host, variable):
        return False
    node = parse_host_expression(grid_x)
    while isinstance(node, c_ast.Cast) and " ".join(getattr(node.to_type.type.type, "names", [])) in _INTEGER_TYPES:
        node = node.expr
    if not (isinstance(node, c_ast.BinaryOp) and node.op == "/"):
        return False
    divisor = _integer(node.right, scope)
    terms = _terms(node.left, 1)
    mine = [t for t in terms if isinstance(t[0], c_ast.ID) and t[0].name == variable]
    rest = [sign * _integer(t, scope) if _integer(t, scope) is not None else None
            for t, sign in terms if not any(t is m[0] for m in mine)]
    return divisor == block_x and len(mine) == 1 and mine[0][1] == 1 and None not in rest \
        and sum(rest) >= block_x - 1


@lru_cache(maxsize=4096)
def _declared_integer(host: str, variable: str) -> bool:
    """The host text declares `variable` with an integer type and never with a floating one, alone or in a
    list (`int nx = n, ny = n, nz = n;`: no parenthesis, brace or `;` before it in the list), asked once per
    text and name: every kernel of a file asks for its `n`."""
    return re.search(rf"\b(?:int|unsigned|long|size_t)\s+(?:\w+\s+)*(?:[^;{{}}()]*,\s*)?{variable}\s*[=;,)]",
                     host) is not None \
        and re.search(rf"\b(?:float|double)\s+{variable}\b", host) is None


def _terms(node: c_ast.Node, sign: int) -> list[tuple[c_ast.Node, int]]:
    while isinstance(node, c_ast.Cast) and " ".join(getattr(node.to_type.type.type, "names", [])) in _INTEGER_TYPES:
        node = node.expr
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
        return _terms(node.left, sign) + _terms(node.right, sign if node.op == "+" else -sign)
    return [(node, sign)]


def _integer(node: c_ast.Node, scope: HostScope) -> int | None:
    """An integer constant expression (literals, macros, fixed host variables), else None."""
    from gpgpu_opt.codegen import CudaGenerator

    value = scope.evaluate(CudaGenerator().visit(node))
    return value if isinstance(value, int) else None


def _site_values(kernel: Kernel, site: LaunchSite, sizes: dict[str, int | float]) -> dict[str, int | float]:
    values = dict(sizes)
    for param, arg in zip(kernel.params, site.args):
        name = _passed_variable(arg)
        if name is not None and param.name in sizes:
            values[name] = sizes[param.name]
    return values


def _passed_variable(arg: str) -> str | None:
    """`n` or `(int)n`: the host variable an argument passes as it is."""
    node = parse_host_expression(arg)
    if isinstance(node, c_ast.Cast):
        node = node.expr
    return node.name if isinstance(node, c_ast.ID) else None


def _agreed(shapes: list[tuple]) -> tuple:
    """Per component: the value every site gives, else None."""
    return tuple(column[0] if len(set(column)) == 1 else None for column in zip(*shapes))


def naive_block(program: Program, kernel: Kernel) -> tuple[int, int] | None:
    """The block shape the kernel is launched with: a `// gpgpu_opt launch` line right before it (a file
    gpgpu-opt wrote), else its launch sites in the file, when they agree and can be evaluated from
    literals, macros and host variables set once (`int threads = 128;`)."""
    start, text = kernel.source_span[0], program.text_of(kernel.source_file)
    before = [p for p in launch_lines(text) if p[0] < start and not text[text.index("\n", p[0]):start].strip()]
    if before:
        values = [evaluate_int(v, program.macros) for v in before[-1][1].split(",")]
        if values and None not in values:
            return values[0], values[1] if len(values) > 1 else 1
    launch = naive_launch(program, kernel, {})
    if launch is None or None in launch.block[:2]:
        return None
    return launch.block[0], launch.block[1]


#: The line gpgpu-opt writes before a rewritten kernel to state its launch: a comment, so that nvcc and the
#: host compiler take it silently (an unknown `#pragma` warns under -Wall and fails -Werror). The pragma
#: form is read too: hand-written files for `verify --against` and outputs of earlier versions use it.
_LAUNCH_LINE = re.compile(r"^[ \t]*(?://[ \t]*|#[ \t]*pragma[ \t]+)gpgpu_opt[ \t]+launch[ \t]+block[ \t]*\(([^)]*)\)"
                         r"[ \t]*grid[ \t]*\((.*)\)[ \t]*$", re.MULTILINE)


def launch_line(kernel: Kernel) -> str:
    """The line that states an optimized kernel's launch, read back by `verify --against` and `analyze`."""
    gx, gy = kernel.launch.grid_expressions()
    return f"// gpgpu_opt launch block({kernel.launch.block[0]}, {kernel.launch.block[1]}) grid({gx}, {gy})"


def launch_lines(text: str) -> list[tuple[int, str, str]]:
    """Every `// gpgpu_opt launch` (or `#pragma gpgpu_opt launch`) line: (offset, block text, grid text)."""
    return list(_launch_lines(text))


@lru_cache(maxsize=16)
def _launch_lines(text: str) -> tuple[tuple[int, str, str], ...]:
    """Scanned once per text: every kernel of a file asks (per kernel, a compile was quadratic in them)."""
    return tuple((m.start(), m.group(1), m.group(2)) for m in _LAUNCH_LINE.finditer(text))


def naive_name(kernel_name: str) -> str:
    """The kernel as written, kept beside its optimized version for the launches too small to gain
    (launch_dispatch)."""
    return f"{kernel_name}_naive"


def naive_launch_name(kernel: Kernel) -> str:
    """The naive kernel as a launch names it: `k_naive`, or `k_naive<float, 256>` for a template instance (the
    instance of the template's naive copy, launch_dispatch.naive_template_copies)."""
    if kernel.instance is None:
        return naive_name(kernel.name)
    return f"{naive_name(kernel.instance.template_name)}<{', '.join(kernel.instance.args)}>"


def has_launch_site(program, kernel: Kernel) -> bool:
    """Does the program launch the kernel with a configuration (`k<<<grid, block>>>`)?"""
    return any(s.kernel == kernel.name and len(s.config) >= 2 for s in program.launch_sites)
