"""Transformation passes, one module each, registered by name: `run(kernel, ctx) -> kernel`.

A pass that cannot prove a transformation safe returns the kernel unchanged and records why with
`ctx.log.skip(...)`; the pipeline rolls back a pass that raises or breaks the kernel's sanity checks.
"""
from __future__ import annotations

import functools
import importlib
from typing import Callable

from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.context import PassContext

PassFunction = Callable[[Kernel, PassContext], Kernel]

#: The paper's order (vectorize before coalesce; merge, prefetch, partition after), after the two passes
#: every other one builds on: pointer qualifiers from the alias facts, then the normal form.
PIPELINE_ORDER = ["restrict", "normalize", "vectorize", "coalesce", "merge", "prefetch", "partition"]
_FOUNDATION = ["restrict", "normalize"]
_MODULES = {"restrict": "gpgpu_opt.passes.restrict", "normalize": "gpgpu_opt.passes.normalize",
            "coalesce": "gpgpu_opt.passes.coalesce", "merge": "gpgpu_opt.passes.merge",
            "vectorize": "gpgpu_opt.passes.vectorize", "prefetch": "gpgpu_opt.passes.prefetch",
            "partition": "gpgpu_opt.passes.partition"}

#: Questions a pass asks a later one before it runs (pass -> later pass -> its `claim(kernel, ctx, info)`: why
#: the later pass will take the kernel, or None), wired here so that no pass package imports another.
_CLAIMS = {"coalesce": {"merge": "gpgpu_opt.passes.merge.claims"}}

#: Passes whose safety does not rest on compile's emulated check: what they change is proved by an analysis
#: the emulator could not confirm anyway (restrict: the alias proof; the emulator gives every pointer its own
#: buffer). A kernel changed only by these is written even where the check cannot run. Keep it minimal.
PROVED_WITHOUT_EMULATION = frozenset({"restrict"})


class PassList(list):
    """The passes a compile runs, in order, and `named`: those the user named in `--passes` (a pass that the
    target does not need by default, such as partition on a GPU that hashes addresses, runs when named)."""

    def __init__(self, passes=(), named=frozenset()):
        super().__init__(passes)
        self.named = frozenset(named)


def registered_passes() -> dict[str, PassFunction]:
    passes = {}
    for name in PIPELINE_ORDER:
        module_name = _MODULES.get(name)
        if module_name is None:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name == module_name:
                continue
            raise
        passes[name] = module.run
    for name, asked in _CLAIMS.items():
        later = {other: importlib.import_module(module_name).claim for other, module_name in asked.items()
                 if other in passes}
        if name in passes and later:
            passes[name] = functools.partial(passes[name], later=later)
    return passes


def parse_pass_list(text: str | None) -> PassList:
    """`--passes` value: 'none', a comma list, or None for the default pipeline. Order follows the
    paper's pipeline; restrict and normalize always run first when any other pass runs. A pass left out
    of the list does not run; the ones in it are also `named` (the default pipeline names none)."""
    available = registered_passes()
    if text is None:
        return PassList(p for p in PIPELINE_ORDER if p in available)
    if text.strip() == "none":
        return PassList()
    wanted = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PIPELINE_ORDER]
    if unknown:
        raise ValueError(f"unknown pass '{unknown[0]}' (passes: {', '.join(PIPELINE_ORDER)})")
    missing = [p for p in wanted if p not in available]
    if missing:
        raise ValueError(f"pass '{missing[0]}' is not implemented yet (available: {', '.join(available)})")
    named = frozenset(wanted)
    if wanted:
        wanted += [p for p in _FOUNDATION if p not in wanted]
    return PassList((p for p in PIPELINE_ORDER if p in wanted), named)
