"""What `compile` checks before it writes: each rewritten kernel is emulated against the naive one on a small
case whose sizes do not divide the tiles, with the race check on. A version that fails is dropped for the
newest earlier version (after fewer passes) that passes; at worst the naive kernel is written. A version the
check cannot run on (sizes it cannot know or emulate, a construct the emulator lacks, the emulator's own
failure) counts as failing, unless every pass that changed it is proved without emulation
(PassRecord.proved_without_emulation): then it is kept, reported 'not checked'.

Where the program fixes its sizes (macros) and the whole launch is too large to emulate, the check runs the
blocks that cover two corners of the thread space, the first and the last (where a ragged edge would be),
each corner made of whole blocks of the naive kernel and of every version. A kernel the file does not launch
is also run under one naive launch of blocks that divide no tile, as its launch helpers would serve it.

Where the naive kernel races or starts no block at the ragged case (an unguarded `a[i + k*n]` under the
launch `dim3 Dg(n / 192)`, which starts no block at n = 45 and, given more threads than n, overlaps its own
stores), the check grows the sizes the launch depends on by whole naive blocks, keeping them ragged (the
launch then leaves the last elements undone, and every version must leave them too). A kernel that tests a
pointer parameter for null (`if (bias != nullptr)`) is also run with that pointer null."""
from __future__ import annotations

import math
from dataclasses import dataclass

from gpgpu_opt.analysis import uses_y
from gpgpu_opt.analysis.accesses import collect_accesses
from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.diagnostics import CompileError
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.check.cases import WORK_BUDGET, Case, Region, default_cases, estimated_work, naive_geometry, null_tested_pointers, run_case
from gpgpu_opt.check.launches import odd_launch_check


@dataclass
class Validation:
    status: str                     # 'passed', 'rolled back', 'not checked' (kept: its changes are proved)
    detail: str
    case: Case | None = None
    kept_after: str | None = None   # the pass whose output was kept (None: naive)
    emulated: bool = True           # False: what decided was a check that could not run
    proved_by: tuple[str, ...] = () # 'not checked': the passes that changed the kernel, none resting on the check
    error: BaseException | None = None  # the emulator's own failure, if that is why the check could not run

    def as_dict(self) -> dict:
        d = {"status": self.status, "detail": self.detail}  # no time: reports are compared as golden files
        if self.case is not None:
            d["sizes"] = self.case.sizes
            d["threads"] = list(self.case.global_space)
        if self.status in ("rolled back", "not checked"):
            d["kept"] = self.kept_after or "naive"
        if not self.emulated:
            d["emulated"] = False
        if self.proved_by:
            d["proved_by"] = list(self.proved_by)
        return d


def validate(program, naive: Kernel, versions: list[tuple[str, Kernel]], block: tuple[int, int],
             seed: int = 11, bindings: dict[str, int] | None = None) -> tuple[Kernel, Validation]:
    """`versions` are the kernel after each pass, in order, the naive kernel first; `bindings` the parameters
    `--bind` fixed (the versions are specialized to them, so the case takes them too). Returns the newest
    version that computes what the naive kernel computes on the check's case, and what the check found. A
    version the check cannot run on is only kept when every pass that changed it is proved without emulation
    (PassRecord.proved_without_emulation); else an earlier version is, at worst the naive kernel. A version vectorize
    changed that passes, or one with a path for aligned arrays (Kernel.aligned_path), is also checked where that
    path runs (ALIGNED_MULTIPLE)."""
    found = _validate_ragged(program, naive, versions, block, seed, bindings)
    kernel, validation = found
    kept = next((k for k, (name, _) in enumerate(versions) if name == validation.kept_after and
                 versions[k][1] is kernel), None)
    if validation.status != "passed" or kept is None or \
            not ("vectorize" in _changed_by(versions[:kept + 1]) or kernel.aligned_path):
        return found
    aligned = _aligned_case(program, naive, block, bindings or {}, validation.case)
    if aligned is None:
        return found
    again = _check_at(program, naive, versions[:kept + 1], block, aligned, seed, give_up_if_naive_fails=True)
    if again is None or again[1].status == "passed" and again[0] is kernel:
        validation.detail += f"; and at {_sizes_text(aligned.sizes)}, where rows are aligned (the vector path)"
        return found
    earlier, checked = validate(program, naive, versions[:kept], block, seed, bindings)  # without the failing one
    problem = f"{again[1].detail} (at {_sizes_text(aligned.sizes)}, where rows are aligned: the vector path)"
    return earlier, Validation("rolled back", problem, checked.case, checked.kept_after, checked.emulated,
                               error=checked.error)


#: vectorize takes its vector path only where the rows are aligned: a stride of integer parameters (`a[i + j*n]`)
#: is tested at run time (n % V == 0). The ragged case leaves them unaligned, so a vectorized version is also
#: checked with each free integer size rounded up to a multiple of this (every vector width divides it).
ALIGNED_MULTIPLE = 16


def _aligned_case(program, naive: Kernel, block: tuple[int, int], bindings: dict[str, int], case: Case) -> Case | None:
    """The case at `case`'s sizes with each free integer size rounded up to ALIGNED_MULTIPLE (each bool flag the
    other way); None when that is the same case, cannot be set up, or is past the work budget."""
    sizes = dict(case.sizes)
    for p in naive.scalars:
        value = sizes.get(p.name)
        if p.name not in bindings and isinstance(value, int) and p.base_type == "bool":
            sizes[p.name] = 1 - value   # the flag the ragged case did not try
        elif p.name not in bindings and isinstance(value, int) and p.base_type not in ("float", "double"):
            sizes[p.name] = -(-value // ALIGNED_MULTIPLE) * ALIGNED_MULTIPLE
    if sizes == case.sizes:
        return None
    try:
        aligned = _case(program, naive, block, sizes)
    except CompileError:
        return None
    return aligned if estimated_work(naive, aligned) <= WORK_BUDGET else None


def _validate_ragged(program, naive: Kernel, versions: list[tuple[str, Kernel]], block: tuple[int, int],
                     seed: int, bindings: dict[str, int] | None) -> tuple[Kernel, Validation]:
    """validate at the ragged case, or at grown sizes where the naive launch cannot run at it."""
    try:
        case = _case(program, naive, block, bindings or {})
    except CompileError as err:
        return _without_check(versions, f"not emulated: {err.message}", None)
    found = _check_at(program, naive, versions, block, case, seed, give_up_if_naive_fails=True)
    if found is not None:
        return found
    for grown in _grown_cases(program, naive, block, bindings or {}, case):
        found = _check_at(program, naive, versions, block, grown, seed, give_up_if_naive_fails=True)
        if found is not None:
            kernel, validation = found
            validation.detail += (f" (at {_sizes_text(grown.sizes)}: at {_sizes_text(case.sizes)} the naive "
                                  "launch could not run)")
            return found
    return _check_at(program, naive, versions, block, case, seed, give_up_if_naive_fails=False)


def _check_at(program, naive: Kernel, versions: list[tuple[str, Kernel]], block: tuple[int, int], case: Case,
              seed: int, give_up_if_naive_fails: bool) -> tuple[Kernel, Validation] | None:
    """validate at one case. None when `give_up_if_naive_fails` and the naive kernel races or starts no
    block there (RETRIED_FAILURES: sizes its launch does not serve, which other sizes may)."""
    work = estimated_work(naive, case)
    regions, where, unrunnable = None, "", {}
    if work > WORK_BUDGET:
        per_thread = work / math.prod(case.global_space)
        fixed = {name for name, k in versions if k.launch is not None and k.launch.fixed_grid}
        regions = corner_regions(case, block, [k for name, k in versions if name not in fixed])
        work = per_thread * sum((x1 - x0) * (y1 - y0) for (x0, x1), (y0, y1) in regions or [])
        if regions is None or work > WORK_BUDGET:
            return _without_check(versions, f"not emulated: the sizes the program fixes ({_describe(case)}) are too "
                                            "large to emulate; check a smaller build with `gpgpu-opt verify -D "
                                            "NAME=VALUE`", case)
        unrunnable = {name: f"not emulated: the sizes the program fixes ({_describe(case)}) are too large to "
                            "emulate whole, and its fixed grid ties no block to a corner" for name in fixed}
        where = " in the blocks at two corners of the thread space"
    first_problem, emulated, emulator_error = None, True, None
    for k in range(len(versions) - 1, -1, -1):
        name, kernel = versions[k]
        why, result = unrunnable.get(name), None
        if why is None:
            try:
                result = run_case(naive, kernel, block, case, seed, program.device_functions, regions=regions)
                odd = odd_launch_check(program, naive, kernel, block, case, seed) if result.ok and regions is None \
                    else None  # no launch in the file: also a naive launch of blocks that divide no tile
                result = odd if odd is not None and not odd.ok else result
                result = _with_null_pointers(program, naive, kernel, block, case, seed, regions, result)
            except CompileError as err:  # the case cannot be set up (an array it cannot size)
                why = f"not emulated: {err.message}"
            except Exception as err:  # noqa: BLE001 - an emulator bug must not become a crash or a silent pass
                why = f"the emulator failed: {type(err).__name__}: {err}"
                emulator_error = emulator_error or err
            else:
                if result.naive_failed:  # the check cannot run, whatever the version
                    if give_up_if_naive_fails and result.error.startswith(RETRIED_FAILURES):
                        return None
                    why = f"not emulated: {result.error}"
        if why is None and result.ok:
            if first_problem is None:
                where = where or f" on {result.elements} elements"
                return kernel, Validation("passed", f"matches the naive kernel{where}, no race", case, name)
            return kernel, Validation("rolled back", first_problem, case, name, emulated, error=emulator_error)
        if why is not None:
            proved = _proved_changes(versions[:k + 1])
            if proved is not None:
                if first_problem is not None:
                    return kernel, Validation("rolled back", first_problem, case, name, emulated,
                                              error=emulator_error)
                return kernel, Validation("not checked", f"{why}; kept: its changes are proved without emulation "
                                                         f"({', '.join(proved) or 'none'})", case, name, False,
                                          tuple(proved), emulator_error)
            if first_problem is None:
                first_problem, emulated = f"after {name}: the check could not run ({why})", False
            continue
        if first_problem is None:
            first_problem = f"after {name}: {result.error or result.mismatches[0]}"
    return naive, Validation("rolled back", first_problem or "", case, None, emulated, error=emulator_error)




def _with_null_pointers(program, naive: Kernel, kernel: Kernel, block: tuple[int, int], case: Case, seed: int,
                        regions, result):
    """A kernel that tests a pointer parameter against null (`if (bias != 0)`) is also run with that pointer
    null, one at a time: the first failing result, else `result`. A run where the naive kernel itself cannot
    take the null pointer (it also reads through it unguarded) is not a launch the program makes."""
    for null in null_tested_pointers(naive) if result.ok else ():
        with_null = run_case(naive, kernel, block, case, seed, program.device_functions, regions=regions,
                             null_pointers=frozenset({null}))
        if not with_null.ok and not with_null.naive_failed:
            return with_null
    return result


def _without_check(versions: list[tuple[str, Kernel]], why: str, case: Case | None) -> tuple[Kernel, Validation]:
    """No version can be checked: the newest whose changes are all proved without emulation is kept."""
    for k in range(len(versions) - 1, -1, -1):
        proved = _proved_changes(versions[:k + 1])
        if proved is None:
            continue
        name, kernel = versions[k]
        if k == len(versions) - 1:
            return kernel, Validation("not checked", f"{why}; kept: its changes are proved without emulation "
                                                     f"({', '.join(proved) or 'none'})", case, name, False,
                                      tuple(proved))
        changed = ", ".join(_changed_by(versions))
        return kernel, Validation("rolled back", f"the check could not run ({why}); {changed} rest on it", case,
                                  None if name == "naive" else name, False)
    raise AssertionError("the naive kernel needs no proof")


def _proved_changes(versions: list[tuple[str, Kernel]]) -> list[str] | None:
    """The passes that changed the kernel along `versions` when each is proved without emulation, else None."""
    from gpgpu_opt.passes import proved_without_emulation

    changed = _changed_by(versions)
    proved = proved_without_emulation()
    return changed if all(name in proved for name in changed) else None


def _changed_by(versions: list[tuple[str, Kernel]]) -> list[str]:
    """The passes whose version differs from the one before (its text or its launch). Each version's text is
    generated once (the same kernel object, by id, as `versions` holds them all meanwhile)."""
    forms: dict[int, tuple] = {}

    def form(kernel: Kernel):
        if id(kernel) not in forms:
            forms[id(kernel)] = kernel_source(kernel.funcdef), kernel.launch
        return forms[id(kernel)]

    return [name for (_, before), (name, after) in zip(versions, versions[1:]) if form(before) != form(after)]


#: Naive failures that other sizes may avoid: a race between threads past the end of a size parameter and
#: its elements (`a[i + k*n]` with more threads than n), a grid `n / 192` that is 0 at small n.
RETRIED_FAILURES = ("the naive kernel races", "naive kernel: its launch at these sizes starts no block")
#: The ragged sizes are grown by these multiples of the naive block (they stay ragged: the residue is kept);
#: two blocks at least, so that a version's block index is exercised too.
GROWTH = (2, 4, 8)


def _grown_cases(program, naive: Kernel, block: tuple[int, int], bindings: dict[str, int], case: Case):
    """Cases at larger sizes the naive launch may run race-free at, for a kernel that races or starts no
    block at the ragged case: the integer parameters the launch's grid depends on (all free ones when it
    depends on none) grow by whole naive blocks, so their residue stays ragged and the program's own
    launch expression still decides the thread space. Only cases within the work budget."""
    from gpgpu_opt.launch.sites import naive_launch

    free = [p.name for p in naive.scalars if p.name not in bindings and isinstance(case.sizes.get(p.name), int)
            and p.base_type not in ("float", "double")]
    step = math.lcm(*block)

    def grid_at(sizes):
        found = naive_launch(program, naive, sizes)
        return None if found is None else found.grid

    moving = [name for name in free if grid_at(case.sizes) != grid_at({**case.sizes, name: case.sizes[name] + step})]
    for factor in GROWTH if free else ():   # nothing to grow: the program fixes every size
        sizes = {**case.sizes, **{name: case.sizes[name] + factor * step for name in moving or free}}
        try:
            grown = _case(program, naive, block, sizes)
        except CompileError:
            return
        if estimated_work(naive, grown) <= WORK_BUDGET:
            yield grown


def _sizes_text(sizes: dict) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(sizes.items()))


def _case(program, naive: Kernel, block: tuple[int, int], bindings: dict[str, int]) -> Case:
    """The ragged case of `verify`. A kernel with no guard and no stated thread space only works for a launch
    of whole blocks, so any number of naive blocks is a launch the program could make: take two in x (the
    passes keep their blocks dividing the naive one, so this divides theirs too)."""
    try:
        return default_cases(naive, program, bindings, None)[-1]
    except CompileError as unknown_space:
        space = (2 * block[0], block[1] if uses_y(naive, collect_accesses(naive)) else 1)
        try:
            return default_cases(naive, program, bindings, space)[-1]
        except CompileError:
            raise unknown_space from None


def corner_regions(case: Case, block: tuple[int, int], versions: list[Kernel]) -> list[Region] | None:
    """The first and the last corner of the thread space, each as small as whole blocks of every version
    allow; None when a version's blocks do not map to parts of the thread space (a fixed grid)."""
    if any(k.launch is not None and k.launch.fixed_grid for k in versions):
        return None
    naive_block = naive_geometry(block, case)[0][:2]  # the block the emulation runs the naive kernel with
    spans = []
    for axis in (0, 1):
        step = math.lcm(naive_block[axis], *[k.launch.outputs_per_block[axis] for k in versions if k.launch])
        extent = case.global_space[axis]
        last = (extent - 1) // step * step
        spans.append(((0, min(step, extent)), (last, extent)))
    first, final = zip(*spans)
    return list(dict.fromkeys([tuple(first), tuple(final)]))


def _describe(case: Case) -> str:
    return f"{case.global_space[0]} x {case.global_space[1]} threads"


__all__ = ["validate", "Validation"]
