"""The variants `tune` tries for one kernel, read off the model's schedule (pass_api/schedule.py): merge factors
n/2, n and 2n per direction around the model's n, each entry of the plan dropped (the pass that decided it
switched off; a pass that schedules nothing for this kernel is not tried without), and the vector width where
the compiler has that option. Variants are compared by their schedules: two with the same plan of the same
source are one, as are two that compile to the same kernel."""
from __future__ import annotations

import dataclasses
import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import Diagnostics
from gpgpu_opt.harness import renamed_source
from gpgpu_opt.nvcc import nvcc_available, resource_usage
from gpgpu_opt.pass_api.context import MergeRequest
from gpgpu_opt.pass_api.schedule import ENTRY_ORDER
from gpgpu_opt.pipeline import CompileOptions, KernelResult, compile_program
from gpgpu_opt.tune.db import Choice

#: Passes always run (the others build on them) and the one whose factors are varied instead of switched off.
_ALWAYS = ("restrict", "normalize")
_FACTORS = "merge"


@dataclass
class Variant:
    label: str
    choice: Choice
    result: KernelResult | None = None
    duplicate_of: str | None = None
    rejected: str | None = None
    resources: dict | None = None

    @property
    def kernel(self):
        return self.result.optimized

    @property
    def schedule(self):
        """The plan the variant's kernel was generated from (None: not compiled)."""
        return self.result.context.schedule if self.result is not None else None


@dataclass
class VariantSet:
    kernel: str
    model_factors: tuple[int, int]
    variants: list[Variant] = field(default_factory=list)

    @property
    def unique(self) -> list[Variant]:
        return [v for v in self.variants if v.duplicate_of is None and v.rejected is None]


def outputs_per_thread(result: KernelResult) -> tuple[int, int]:
    """The merge factors the model chose: outputs per thread in x and y of the optimized launch."""
    launch = result.optimized.launch
    if launch is None or launch.fixed_grid:
        return (1, 1)
    return tuple(max(1, o // b) for o, b in zip(launch.outputs_per_block.xy, launch.block.xy))


def _around(n: int) -> list[int]:
    return sorted({max(1, n // 2), n, 2 * n})


def vector_width_supported() -> bool:
    """Whether the compiler takes a vector width (CompileOptions' `vector_width`, when vectorize lands)."""
    return "vector_width" in {f.name for f in dataclasses.fields(CompileOptions)}


def plan_variants(base_passes: list[str], model_factors: tuple[int, int], uses_y: bool,
                  vector_widths: tuple[int, ...] = (), model_schedule=None) -> list[Variant]:
    """The variants to compile, the model's choice first. `base_passes`: the default pipeline;
    `model_schedule`: the model's plan, whose entries say which passes to try without (None: every pass)."""
    deciding = _passes_deciding(model_schedule)
    variants = [Variant("model", Choice(tuple(base_passes)))]
    if _FACTORS in base_passes:
        ys = _around(model_factors[1]) if uses_y else [1]
        for fx, fy in itertools.product(_around(model_factors[0]), ys):
            variants.append(Variant(f"merge-x{fx}-y{fy}", Choice(tuple(base_passes), f"x={fx},y={fy}")))
    for name in base_passes:
        if name not in _ALWAYS and name != _FACTORS and (deciding is None or name in deciding):
            variants.append(Variant(f"no-{name}", Choice(tuple(p for p in base_passes if p != name))))
    if _FACTORS in base_passes:
        variants.append(Variant("no-merge", Choice(tuple(p for p in base_passes if p != _FACTORS))))
    for width in vector_widths:
        variants.append(Variant(f"vector-{width}", Choice(tuple(base_passes), vector_width=width)))
    if "partition" in base_passes:   # by default only where the target camps: try it everywhere
        variants.append(Variant("partition", Choice(tuple(base_passes), named=("partition",))))
    return variants


def _passes_deciding(schedule) -> set[str] | None:
    """The passes whose entries the schedule holds, and those that schedule nothing (they change the kernel
    source to source, so only switching them off shows what they are worth); None without a schedule."""
    if schedule is None:
        return None
    from gpgpu_opt.passes import records

    decided = {name for name, entry in zip(ENTRY_ORDER, schedule.entries()) if entry is not None}
    return {r.name for r in records() if not r.steps or decided & set(r.steps)}


def _same_plan(a: Variant, b: Variant) -> bool:
    sa, sb = a.schedule, b.schedule
    return sa is not None and sb is not None and not sa.empty and sa.entries() == sb.entries() and \
        kernel_source(sa.source.funcdef) == kernel_source(sb.source.funcdef)


def compile_variant(program, target, kernel_name: str, choice: Choice, bindings: dict) -> KernelResult:
    options = {"vector_width": choice.vector_width} if choice.vector_width else {}
    compile_options = CompileOptions.of(target, choice.pass_list(), bindings, validate=True, **options,
                                        merge_request=MergeRequest.parse(choice.merge) if choice.merge else None)
    result = compile_program(program, compile_options, Diagnostics(quiet=True))
    return next(k for k in result.kernels if k.naive.name == kernel_name)


def _identity(result: KernelResult) -> str:
    launch = result.optimized.launch
    return renamed_source(result.optimized, "variant") + repr(launch)


def build_variants(program, target, kernel_name: str, bindings: dict, base_passes: list[str],
                   progress=None, include_dirs: list[str] | None = None) -> VariantSet:
    """Compile every variant (each checked by the emulator, as `compile` does), drop those that compile to a
    kernel already seen, and check the rest with nvcc in parallel (a variant nvcc rejects is rejected).
    `progress(label)` is called after each step."""
    model = compile_variant(program, target, kernel_name, Choice(tuple(base_passes)), bindings)
    naive = model.naive
    widths = (1, 2, 4) if vector_width_supported() else ()
    factors = outputs_per_thread(model)
    found = VariantSet(kernel_name, factors,
                       plan_variants(base_passes, factors, uses_y(naive, collect_accesses(naive)), widths,
                                     model.context.schedule))
    seen: dict[str, str] = {}
    kept: list[Variant] = []
    for v in found.variants:
        v.result = model if v.label == "model" else compile_variant(program, target, kernel_name, v.choice, bindings)
        validation = v.result.validation
        if validation is not None and validation.status == "rolled back":
            v.rejected = f"the emulated check failed: {validation.detail}"
        else:
            v.duplicate_of = next((k.label for k in kept if _same_plan(v, k)), None) or \
                seen.setdefault(_identity(v.result), v.label)
            if v.duplicate_of == v.label:
                v.duplicate_of = None
                kept.append(v)
        if progress:
            progress(v.label)
    if nvcc_available():
        unique = found.unique
        with ThreadPoolExecutor(max_workers=4) as pool:
            usages = list(pool.map(lambda v: resource_usage(_kernel_text(program, v), target, include_dirs), unique))
        for v, usage in zip(unique, usages):
            if usage is None:
                v.rejected = "nvcc could not compile it"
            else:
                v.resources = usage.get(kernel_name)
    return found


def _kernel_text(program, variant: Variant) -> str:
    """The kernel alone, after the program's device functions, as nvcc compiles it for its resource usage."""
    headers = [f"#include <{h}>" for h in variant.kernel.includes]
    helpers = [kernel_source(f) for f in program.device_functions.values()]
    return "\n".join([*headers, *helpers, renamed_source(variant.kernel, variant.kernel.name)])
