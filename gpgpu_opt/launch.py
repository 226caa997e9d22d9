"""Launch sites: the naive launch's block shape, and rewriting `k<<<grid, block>>>` for new kernels."""
from __future__ import annotations

import re

from gpgpu_opt.frontend.program import Program
from gpgpu_opt.frontend.scanner import LaunchSite
from gpgpu_opt.kernel import Kernel, LaunchConfig
from gpgpu_opt.templating import render


def evaluate_int(text: str, macros: dict[str, str]) -> int | None:
    """Evaluate a host integer expression made of literals and object-like macros; None otherwise."""
    for _ in range(8):
        replaced = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f"({macros[m.group(0)]})" if m.group(0) in macros
                          else m.group(0), text)
        if replaced == text:
            break
        text = replaced
    text = re.sub(r"(\d+)[uUlL]+\b", r"\1", text)
    if not re.fullmatch(r"[\d\s()+\-*/%]+", text):
        return None
    try:
        return int(eval(text.replace("/", "//"), {"__builtins__": {}}, {}))  # digits and operators only
    except Exception:
        return None


def _dim3_values(expr: str, host_text: str, macros: dict[str, str]) -> tuple[int, int] | None:
    expr = expr.strip()
    value = evaluate_int(expr, macros)
    if value is not None:
        return value, 1
    m = re.fullmatch(r"dim3\s*\((.*)\)", expr, re.DOTALL)
    if m is None and re.fullmatch(r"[A-Za-z_]\w*", expr):
        decl = re.search(rf"\bdim3\s+{expr}\s*(?:\((.*?)\)|=\s*dim3\s*\((.*?)\)|\{{(.*?)\}})\s*;", host_text,
                         re.DOTALL)
        if decl:
            args = next(g for g in decl.groups() if g is not None)
            m = re.fullmatch(r"(.*)", args, re.DOTALL)
    if m is None:
        return None
    parts = [p.strip() for p in m.group(1).split(",")]
    values = [evaluate_int(p, macros) for p in parts]
    if not values or any(v is None for v in values):
        return None
    return values[0], values[1] if len(values) > 1 else 1


def naive_block(program: Program, kernel: Kernel) -> tuple[int, int] | None:
    """The block shape the kernel is launched with: a `#pragma gpgpu_opt launch` line right before it (a
    file gpgpu-opt wrote), else its launch sites in the file, when they agree and can be evaluated."""
    start = kernel.source_span[0]
    before = [p for p in pragma_launches(program.text) if p[0] < start
              and not program.text[program.text.index("\n", p[0]):start].strip()]
    if before:
        values = [evaluate_int(v, program.macros) for v in before[-1][1].split(",")]
        if values and None not in values:
            return values[0], values[1] if len(values) > 1 else 1
    shapes = {_dim3_values(site.config[1], program.text, program.macros)
              for site in program.launch_sites if site.kernel == kernel.name and len(site.config) >= 2}
    shapes.discard(None)
    return shapes.pop() if len(shapes) == 1 else None


_LAUNCH_PRAGMA = re.compile(r"#\s*pragma\s+gpgpu_opt\s+launch\s+block\s*\(([^)]*)\)\s*grid\s*\((.*)\)\s*$",
                            re.MULTILINE)


def launch_pragma(kernel: Kernel) -> str:
    """The line that states an optimized kernel's launch, read back by `verify --against` and `analyze`."""
    gx, gy = kernel.launch.grid_expressions()
    return f"#pragma gpgpu_opt launch block({kernel.launch.block[0]}, {kernel.launch.block[1]}) grid({gx}, {gy})"


def pragma_launches(text: str) -> list[tuple[int, str, str]]:
    """Every `#pragma gpgpu_opt launch` line: (offset, block text, grid text)."""
    return [(m.start(), m.group(1), m.group(2)) for m in _LAUNCH_PRAGMA.finditer(text)]


def launch_helper(kernel: Kernel) -> str:
    config: LaunchConfig = kernel.launch
    gx, gy = config.grid_expressions()
    per = config.outputs_per_block
    summary = "one thread per output" if per == config.block else \
        f"{(per[0] * per[1]) // (config.block[0] * config.block[1])} outputs per thread"
    return render("launch_helper.cu.j2", name=kernel.name, block=config.block, outputs=per, grid=(gx, gy),
                  summary=summary)


def rewrite_launch(site: LaunchSite, text: str) -> str:
    """The new `<<<...>>>` for a launch site of a rewritten kernel; shared-memory size and stream stay."""
    grid, block, *rest = site.config
    new = [f"{site.kernel}_grid({grid}, {block})", f"{site.kernel}_block({grid}, {block})", *rest]
    return "<<<" + ", ".join(new) + ">>>"
