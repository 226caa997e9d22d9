"""The edits of the user's text that canonicalize a grid-stride loop, so that the kernel keeps its
formatting, comments and macros: `for (INIT; COND; STEP) BODY` -> `INIT; if (COND) BODY` (the loop ends
the kernel; `{ INIT; if (COND) BODY }` where its index shadows a local of the same name), and the declaration of a stride local that only the step read goes.
The loop is found by its place among the kernel's `for` tokens, which must match the syntax tree's loops
one to one (a loop made by a macro does not): else nothing is edited."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import walk
from gpgpu_opt.frontend import scanner
from gpgpu_opt.kernel import Kernel
from gpgpu_opt.passes.grid_stride.loop import GridStride

_STATEMENTS = (c_ast.If, c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch, c_ast.Compound, c_ast.Label)


class TextError(Exception):
    """The kernel's text does not show the loop as the syntax tree does (a macro): the loop is kept."""


def canonical_kernel_edits(text: str, kernel: Kernel, found: GridStride) -> list[tuple[int, int, str]]:
    start, end = kernel.source_span
    tokens = [t for t in scanner.tokenize(text) if start <= t.start and t.end <= end]
    fors = [k for k, t in enumerate(tokens) if t.kind == "ident" and t.text == "for"]
    if len(fors) != sum(isinstance(n, c_ast.For) for n in walk(kernel.body)):
        raise TextError("a macro in the kernel hides or makes a loop, so its text cannot be edited safely")
    k = fors[found.ordinal]
    if k + 1 >= len(tokens) or tokens[k + 1].text != "(":
        raise TextError("the loop's header is not written out in the kernel's text")
    close = scanner.matching(tokens, k + 1, "(", ")")
    semis = _top_level(tokens, k + 2, close, ";")
    if len(semis) != 2:
        raise TextError("the loop's header is not written out in the kernel's text")
    init = _init(text[tokens[k + 1].end:tokens[semis[0]].start].strip(), found)
    start_local = found.start_local if found.start_local and _uses(tokens, found.start_local) == 2 else None
    if start_local and not found.wide:
        # `int i = tid;` with tid read nowhere else: i starts at the global index itself, the form the passes
        # read (a second local of the thread's index hides the index from them), and tid's declaration goes.
        init = f"{found.index_type} {found.var} = blockIdx.x * blockDim.x + threadIdx.x"
    cond = text[tokens[semis[0]].end:tokens[semis[1]].start].strip()
    body_end = _statement_end(tokens, close + 1, found)
    if _declared_before(kernel, found):
        # The loop's index shadows a local of the same name: braces keep the two apart, as the loop's scope did.
        edits = [(tokens[k].start, tokens[close].end, f"{{ {init}; if ({cond})"), (body_end, body_end, " }")]
    else:
        # The loop ends the kernel, so its index may live to the end: the plain form the passes read.
        edits = [(tokens[k].start, tokens[close].end, f"{init + ';' if init else ''}\n    if ({cond})")]
    for local in (found.stride_local, start_local if isinstance(found.loop.init, c_ast.DeclList) else None):
        if local:
            edits.append(_declaration(tokens, k, local))
    return edits


def _uses(tokens, name: str) -> int:
    return sum(t.kind == "ident" and t.text == name for t in tokens)


def _init(written: str, found: GridStride) -> str:
    """The canonical index's initialization. A 64-bit index (`size_t i`) starts at the global index computed
    in its own type: with one thread per element the grid may pass 2^32 threads, where the 32-bit
    `blockIdx.x * blockDim.x` the loop started from would wrap (the loop's `i += stride` did not)."""
    if not found.wide:
        return written
    start = f"({found.index_type})blockIdx.x * blockDim.x + threadIdx.x"
    return f"{found.index_type} {found.var} = {start}" if isinstance(found.loop.init, c_ast.DeclList) \
        else f"{found.var} = {start}"


def _declared_before(kernel: Kernel, found: GridStride) -> bool:
    """Does the loop's header declare a name that the kernel's preamble declares too?"""
    if not isinstance(found.loop.init, c_ast.DeclList):
        return False
    names = {d.name for d in found.loop.init.decls}
    return any(isinstance(n, c_ast.Decl) and n.name in names for n in kernel.body.block_items or []
               if n is not found.loop)


def _top_level(tokens, first: int, stop: int, what: str) -> list[int]:
    depth, found = 0, []
    for j in range(first, stop):
        t = tokens[j].text
        depth += t in "([{" and len(t) == 1
        depth -= t in ")]}" and len(t) == 1
        if depth == 0 and t == what:
            found.append(j)
    return found


def _statement_end(tokens, first: int, found: GridStride) -> int:
    """Offset just past the loop's body: a block's `}`, or a plain statement's `;`."""
    if first >= len(tokens):
        raise TextError("the loop's body is not in the kernel's text")
    if tokens[first].text == "{":
        if not isinstance(found.loop.stmt, c_ast.Compound):
            raise TextError("the loop's body is not written as the syntax tree has it")
        return tokens[scanner.matching(tokens, first, "{", "}")].end
    if isinstance(found.loop.stmt, _STATEMENTS):
        raise TextError("the loop's body is a statement without braces that holds others")
    semis = _top_level(tokens, first, len(tokens), ";")
    if not semis:
        raise TextError("the loop's body has no end in the kernel's text")
    return tokens[semis[0]].end


def _declaration(tokens, loop_token: int, name: str) -> tuple[int, int, str]:
    """The edit that deletes `int stride = blockDim.x * gridDim.x;` (its only reader, the step, is gone), or
    the local `tid` the index started from (the index starts at the global index itself now)."""
    uses = [j for j, t in enumerate(tokens) if t.kind == "ident" and t.text == name]
    if len(uses) != 2 or uses[0] > loop_token or tokens[uses[0] + 1].text != "=":
        raise TextError(f"the local '{name}' is used or declared other than once each")
    first = uses[0]
    while first > 0 and tokens[first - 1].text not in (";", "{", "}"):
        first -= 1
    semis = _top_level(tokens, uses[0], loop_token, ";")
    if not semis or _top_level(tokens, first, semis[0], ","):
        raise TextError(f"the local '{name}' is declared with other variables")
    return tokens[first].start, tokens[semis[0]].end, ""


__all__ = ["TextError", "canonical_kernel_edits"]
