"""The driver behind `gpgpu-opt verify`: compile, emulate naive and optimized, print a short report."""
from __future__ import annotations

from gpgpu_opt.diagnostics import CompileError, Diagnostics
from gpgpu_opt.frontend import load_program
from gpgpu_opt.host_expr import split_top_level
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.host_expr import evaluate_int
from gpgpu_opt.launch.sites import launch_lines
from gpgpu_opt.launch.contract import guarded_axes, launch_assumptions
from gpgpu_opt.passes import parse_pass_list
from gpgpu_opt.pipeline import CompileOptions, compile_program, default_block
from gpgpu_opt.check.cases import default_cases, run_case
from gpgpu_opt.check.launches import check_launch, describe, launch_cases


def parse_sizes(values: list[str] | None) -> dict[str, int | float]:
    """`--size n=64 --size alpha=1.5`: integers, or floats for float parameters."""
    out: dict[str, int | float] = {}
    for v in values or []:
        name, _, value = v.partition("=")
        try:
            out[name.strip()] = int(value, 0)
        except ValueError:
            try:
                out[name.strip()] = float(value)
            except ValueError:
                raise CompileError(f"--size expects NAME=NUMBER, got '{v}'") from None
    return out


def parse_extents(values: list[str] | None) -> dict[str, int]:
    """`--extent src=4096`: array sizes in elements."""
    out = {}
    for name, value in parse_sizes(values).items():
        if not isinstance(value, int) or value < 1:
            raise CompileError(f"--extent expects NAME=N with N a positive integer, got '{name}={value}'")
        out[name] = value
    return out


def parse_shape(option: str, text: str | None) -> tuple[int, ...] | None:
    """`--block 32,8` -> (32, 8)."""
    if text is None:
        return None
    try:
        parts = tuple(int(v, 0) for v in text.split(","))
    except ValueError:
        parts = ()
    if not 1 <= len(parts) <= 3 or min(parts) < 1:
        raise CompileError(f"{option} expects X[,Y[,Z]] with positive integers, got '{text}'")
    return parts


def hand_written_launch(hand, case, path: str, kernel: Kernel):
    """The launch of a kernel of a hand-optimized file (or of an output of `compile`): the line
    `// gpgpu_opt launch block(BX, BY) grid(GX, GY)` (or `#pragma gpgpu_opt launch ...`) that comes before it,
    with no other kernel between them; None where there is none (a kernel left as written, launched as
    the naive one is)."""
    text = hand.text_of(kernel.source_file)
    start = kernel.source_span[0]
    previous_end = max((k.source_span[1] for k in hand.kernels
                        if k.source_file == kernel.source_file and k.source_span[1] <= start), default=0)
    before = [line for line in launch_lines(text) if previous_end <= line[0] < start]
    if not before:
        return None
    _, block_text, grid_text = before[-1]
    values = dict(hand.macros)
    values.update({k: str(v) for k, v in case.sizes.items()})
    values["global_x"], values["global_y"] = str(case.global_space[0]), str(case.global_space[1])
    block = [evaluate_int(p, values) for p in block_text.split(",")]
    grid = [evaluate_int(p, values) for p in split_top_level(grid_text)]
    if None in block or None in grid:
        raise CompileError(f"{path}: cannot evaluate the launch line 'block({block_text}) grid({grid_text})'")
    return (block[0], block[1] if len(block) > 1 else 1), (grid[0], grid[1] if len(grid) > 1 else 1)


def run_verify(program, target, passes, sizes, global_space, seed, against, diagnostics: Diagnostics,
               bindings, defines, include_dirs, block=None, grid=None, extents=None, merge_request=None,
               vector_width=None, matmul_precision: str = "ieee") -> bool:
    """Compare every kernel at each case; `block`/`grid` give the naive launch (else the program's launch
    sites tell it), `extents` the sizes of arrays their subscripts do not tell (gathers). A run that compares
    nothing (every kernel passed through, or skipped by --against) fails: a PASS must mean a comparison."""
    pass_names = parse_pass_list(passes)
    options = CompileOptions.of(target, pass_names, bindings, merge_request=merge_request, vector_width=vector_width,
                                matmul_precision=matmul_precision)
    result = compile_program(program, options, diagnostics)
    program = result.program  # as the passes saw it: grid-stride loops canonicalized, their launches re-sized
    hand = load_program(against, defines, include_dirs, diagnostics, target=target, to_emulate=True) if against else None
    all_ok, compared = True, 0
    print(f"verify {program.path} (target {target.name}; {'against ' + against if against else 'passes: ' + (', '.join(pass_names) or 'none')})")
    for kr in result.kernels:
        naive: Kernel = kr.naive
        optimized = kr.optimized
        if hand is not None:
            try:
                optimized = hand.kernel(naive.name)
            except KeyError:
                continue
        fallback_block = default_block(program, naive)  # when neither the program nor --block tells
        contract = launch_assumptions(program, naive, optimized, kr.context.facts.naive_block) if hand is None else None
        cases = default_cases(naive, program, sizes, global_space, block, grid, extents)
        for k, case in enumerate(cases):
            if contract is not None:  # no launch in the file: launch as the helpers would, or see them refuse
                outcome = check_launch(naive, optimized, contract, fallback_block, case, seed + k,
                                       program.device_functions)
                all_ok &= _print_outcome(naive.name, outcome)
                compared += outcome.result is not None
                continue
            launch = hand_written_launch(hand, case, against, optimized) if hand is not None else None
            res = run_case(naive, optimized, fallback_block, case, seed + k, program.device_functions, launch=launch)
            all_ok &= _print_result(naive.name, res)
            compared += 1
        if contract is not None:
            fuzzed_ok, fuzzed_compared = _fuzz_launches(program, kr, contract, fallback_block, cases[-1],
                                                        seed + len(cases))
            all_ok &= fuzzed_ok
            compared += fuzzed_compared
    for name in program.passed_through:
        print(f"  {name:<14} passed through unchanged: not compared")
    if not compared:
        print("FAIL: nothing compared (no kernel of the file could be emulated)")
        return False
    print("PASS" if all_ok else "FAIL")
    return all_ok


def _fuzz_launches(program, kr, contract, fallback_block, base, seed) -> tuple[bool, int]:
    """Other naive launches of a kernel the file does not launch (verify_launches.py): all ok, and how many
    were compared (the others were refused by the helpers, or skipped)."""
    ok, compared = True, 0
    guarded = guarded_axes(kr.naive, program)
    for k, case in enumerate(launch_cases(kr.naive, program, base, contract, guarded)):
        outcome = check_launch(kr.naive, kr.optimized, contract, fallback_block, case, seed + k,
                               program.device_functions)
        ok &= _print_outcome(kr.naive.name, outcome, fuzzed=True)
        compared += outcome.result is not None
    return ok, compared


def _print_outcome(name: str, outcome, fuzzed: bool = False) -> bool:
    """A refused launch is reported, not a failure; so is a fuzzed launch the naive kernel itself cannot run
    (the rule covers only launches under which it is valid), but not the program's or the options' launch."""
    if outcome.result is not None:
        return _print_result(name, outcome.result, f"  ({describe(outcome)})")
    if outcome.refusal:
        print(f"  {name:<14} {describe(outcome)}: refused by the launch helpers\n    {outcome.refusal}")
        return True
    print(f"  {name:<14} {describe(outcome)}: {'skipped' if fuzzed else 'FAIL'}\n    {outcome.naive_invalid}")
    return fuzzed


def _print_result(name: str, res, where: str = "") -> bool:
    case = res.case
    sizes_text = ", ".join(f"{n}={v}" for n, v in case.sizes.items()) or "-"
    status = "ok" if res.ok else "FAIL"
    print(f"  {name:<14} sizes {sizes_text:<28} threads {case.global_space[0]}x{case.global_space[1]:<6} "
          f"{res.elements:>8} elements  max rel err {res.max_rel_error:.2e}  {res.seconds:6.2f}s  {status}{where}")
    for line in ([res.error] if res.error else []) + res.mismatches:
        print(f"    {line}")
    return res.ok
