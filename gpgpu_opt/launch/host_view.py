"""One view of a program's host side, read once per program: each launch question about a kernel (its
launch sites evaluated, which buffers its launches pass, whether every launch can be read) is computed the
first time it is asked and answered from here after that.

Without it every question re-derived its answer from the host code: the pipeline, the launch contract,
the aliasing and alignment analyses and the z-axis check each asked `naive_launch` and `read_launches`
again for the same kernel. The answers depend only on the program's text (its files, macros and launch
sites) and on the kernel's name and parameters, so a program keeps one view; a program re-read from new
text (grid_stride's canonical form) is a new Program and gets a view of its own."""
from __future__ import annotations

from collections import Counter
from typing import Callable, TypeVar

from gpgpu_opt.kernel import Kernel

T = TypeVar("T")

#: The attribute under which a program keeps its view (Program is a plain dataclass: not hashable, so a
#: weak dictionary cannot key on it).
_ATTRIBUTE = "_host_view"


class HostView:
    """The host side of one program: answers by question and kernel, each computed once."""

    def __init__(self, program):
        self._read = _what_is_read(program)
        self._answers: dict[tuple, object] = {}
        #: Question -> how many times it was computed (not answered from the view): one per kernel asked.
        self.computed: Counter[str] = Counter()

    def answer(self, question: str, kernel: Kernel, compute: Callable[[], T]) -> T:
        """`compute()`'s value for `question` about `kernel`, computed the first time only."""
        key = (question, kernel_key(kernel))
        if key not in self._answers:
            self.computed[question] += 1
            self._answers[key] = compute()
        return self._answers[key]

    def once(self, question: str, compute: Callable[[], T]) -> T:
        """`compute()`'s value for a question about the whole program, computed the first time only."""
        key = (question,)
        if key not in self._answers:
            self.computed[question] += 1
            self._answers[key] = compute()
        return self._answers[key]

    def describes(self, program) -> bool:
        """Is this the view of `program` as it is now (the same objects for everything the answers read)?"""
        return all(now is then for now, then in zip(_what_is_read(program), self._read))


def _what_is_read(program) -> tuple:
    """What the launch questions read of a program: its files, launch sites, macros, -D and -I."""
    return (program.text, program.files, program.launch_sites, program.macros, program.defines,
            program.include_dirs)


def kernel_key(kernel: Kernel) -> tuple:
    """What a launch question reads of a kernel: its name, the template it instantiates, and its
    parameters (names, pointer or not, element types), so two kernels that differ there never share."""
    template = kernel.instance.template_name if kernel.instance is not None else None
    return (kernel.name, template, tuple((p.name, p.is_pointer, p.base_type) for p in kernel.params))


def view_of(program) -> HostView:
    """The program's host view, made on the first question (and again if the program's text was replaced)."""
    view = program.__dict__.get(_ATTRIBUTE)
    if view is None or not view.describes(program):
        view = HostView(program)
        program.__dict__[_ATTRIBUTE] = view
    return view
