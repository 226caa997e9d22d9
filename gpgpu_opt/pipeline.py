"""Running the passes over every kernel of a program and assembling the output file and report."""
from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field

from gpgpu_opt import launch
from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.checks import SanityError, check_kernel
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics, Location
from gpgpu_opt.frontend.program import Program
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes import registered_passes
from gpgpu_opt.passes.context import PassContext
from gpgpu_opt.targets import Target


@dataclass
class KernelResult:
    naive: Kernel
    optimized: Kernel
    context: PassContext
    passes_run: list[str] = field(default_factory=list)

    @property
    def rewritten(self) -> bool:
        return self.optimized.launch is not None


@dataclass
class CompileResult:
    program: Program
    target: Target
    kernels: list[KernelResult]
    output: str

    def report(self) -> dict:
        return {"file": self.program.path, "target": self.target.name,
                "kernels": [_kernel_report(k) for k in self.kernels],
                "passed_through": self.program.passed_through}


def _kernel_report(result: KernelResult) -> dict:
    k = result.optimized
    d = {"name": k.name, "passes": result.passes_run,
         "naive_block": list(result.context.naive_block),
         "decisions": [x.as_dict() for x in result.context.decisions]}
    if k.launch is not None:
        gx, gy = k.launch.grid_expressions()
        d["launch"] = {"block": list(k.launch.block), "outputs_per_block": list(k.launch.outputs_per_block),
                       "grid": [gx, gy]}
    return d


def default_block(program: Program, kernel: Kernel) -> tuple[int, int]:
    found = launch.naive_block(program, kernel)
    if found is not None:
        return found
    return (16, 16) if uses_y(kernel, collect_accesses(kernel)) else (256, 1)


def optimize_kernel(kernel: Kernel, ctx: PassContext, pass_names: list[str],
                    dump_dir: str | None = None, self_check=None) -> tuple[Kernel, list[str]]:
    """Run the passes in order. A pass that raises or leaves a broken kernel is rolled back with a note;
    the kernel then continues from the last good version. `self_check(kernel)` (optional) returns None
    when the kernel still computes what the naive one does, else why not."""
    passes = registered_passes()
    current = kernel
    ran = []
    for name in pass_names:
        ctx.pass_name = name
        before = current.copy()
        try:
            result = passes[name](before, ctx)
            check_kernel(result.funcdef)
            if self_check is not None:
                problem = self_check(result)
                if problem:
                    raise SanityError(f"self-check failed: {problem}")
        except SanityError as err:
            ctx.skip("kernel", f"rolled back: {err}", Location.of(kernel.funcdef))
            continue
        except Exception as err:  # noqa: BLE001 - never let a pass bug become a miscompile or a crash
            detail = "".join(traceback.format_exception_only(type(err), err)).strip()
            ctx.skip("kernel", f"rolled back after an internal error ({detail})", Location.of(kernel.funcdef))
            continue
        current = result
        ran.append(name)
        if dump_dir:
            os.makedirs(dump_dir, exist_ok=True)
            with open(os.path.join(dump_dir, f"{kernel.name}.{len(ran):02d}.{name}.cu"), "w") as fh:
                fh.write(kernel_source(current.funcdef))
    return current, ran


def compile_program(program: Program, target: Target, pass_names: list[str], diagnostics: Diagnostics,
                    bindings: dict[str, int] | None = None, dump_dir: str | None = None,
                    block_override: tuple[int, int] | None = None, self_check: bool = False) -> CompileResult:
    results = []
    for kernel in program.kernels:
        block = block_override or default_block(program, kernel)
        ctx = PassContext(target, diagnostics, block, dict(bindings or {}), kernel_name=kernel.name,
                          device_functions=program.device_functions)
        checker = None
        if self_check:
            from gpgpu_opt.verify import quick_check

            checker = quick_check(program, kernel, block)
        optimized, ran = optimize_kernel(kernel, ctx, pass_names, dump_dir, checker)
        results.append(KernelResult(kernel, optimized, ctx, ran))
    return CompileResult(program, target, results, assemble(program, results))


def assemble(program: Program, results: list[KernelResult]) -> str:
    """The user's file with each kernel replaced by its printed version, launch helpers inserted before the
    first rewritten kernel, and the launch sites of rewritten kernels given their new configuration."""
    text = program.text
    edits: list[tuple[int, int, str]] = []
    for r in results:
        start, end = r.naive.source_span
        pragma = launch.launch_pragma(r.optimized) + "\n" if r.rewritten else ""
        edits.append((start, end, pragma + kernel_source(r.optimized.funcdef).rstrip("\n")))
    rewritten = [r for r in results if r.rewritten]
    if rewritten:
        first = min(r.naive.source_span[0] for r in rewritten)
        sites_before = [s.start for s in program.launch_sites if s.start < first
                        and any(s.kernel == r.naive.name for r in rewritten)]
        at = first if not sites_before else _after_preamble(text)
        helpers = "".join(launch.launch_helper(r.optimized) for r in rewritten)
        edits.append((at, at, helpers))
        names = {r.naive.name for r in rewritten}
        for site in program.launch_sites:
            if site.kernel in names and len(site.config) >= 2:
                edits.append((site.config_start, site.config_end, launch.rewrite_launch(site, text)))
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _after_preamble(text: str) -> int:
    """Just after the leading #include / #define lines."""
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("#") or not stripped or stripped.startswith("//"):
            pos += len(line)
            continue
        break
    return pos


__all__ = ["compile_program", "CompileResult", "KernelResult", "optimize_kernel"]
