"""The nodes the output needs beyond pycparser's C: comments, inline PTX and text kept as written.

They are declared by one small table in the style of pycparser's `_c_ast.cfg` (`Name: [field, child*,
children**]`: a plain field, one child node, a list of child nodes), from which the classes are made, so
that pycparser's NodeVisitor, the walks of ast_util and `copy.deepcopy` see them as they see any node.
The printer (codegen.CudaGenerator) prints each; the emulator runs an InlineAsm through its model of the
instruction (emulator/ptx.py) and refuses a Verbatim statement.
"""
from __future__ import annotations

from pycparser import c_ast

#: The table: each node, its fields, and what it is.
NODES = """
# A `// text` line among a block's statements (pycparser keeps no comments): one per transformation, no meaning.
Comment: [text]

# `asm volatile("template" : outputs : inputs);`: inline PTX, one instruction per statement. `template` is
# the instruction as written (operands `%0`, `%1`, ... numbered outputs first), `volatile` whether it is
# `asm volatile`, `clobbers` a tuple of the clobbered names ("memory").
InlineAsm: [template, outputs**, inputs**, clobbers, volatile]

# One operand of an inline asm statement: `"constraint"(expr)`; an output's constraint starts with `=` or `+`.
AsmOperand: [constraint, expr*]

# A statement printed exactly as `text` (a construct C cannot express and no pass looks into).
Verbatim: [text]
"""


def _parse_table(text: str) -> list[tuple[str, list[str]]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, fields = line.partition(":")
        out.append((name.strip(), [f.strip() for f in fields.strip().strip("[]").split(",") if f.strip()]))
    return out


def _make_node(name: str, fields: list[str]) -> type:
    plain = [f for f in fields if not f.endswith("*")]
    single = [f[:-1] for f in fields if f.endswith("*") and not f.endswith("**")]
    many = [f[:-2] for f in fields if f.endswith("**")]
    order = [f.rstrip("*") for f in fields]

    def __init__(self, *args, coord=None, **kwargs):
        values = dict(zip(order, args))
        values.update(kwargs)
        for f in order:
            setattr(self, f, values.get(f, [] if f in many else None))
        self.coord = coord

    def children(self):
        nodelist = []
        for f in order:
            if f in single and getattr(self, f) is not None:
                nodelist.append((f, getattr(self, f)))
            elif f in many:
                nodelist.extend((f"{f}[{i}]", child) for i, child in enumerate(getattr(self, f) or []))
        return tuple(nodelist)

    def __iter__(self):
        for f in order:
            if f in single and getattr(self, f) is not None:
                yield getattr(self, f)
            elif f in many:
                yield from getattr(self, f) or []

    return type(name, (c_ast.Node,), {"__slots__": (*order, "coord", "__weakref__"), "attr_names": tuple(plain),
                                      "__init__": __init__, "children": children, "__iter__": __iter__,
                                      "__module__": __name__})


_CLASSES = {name: _make_node(name, fields) for name, fields in _parse_table(NODES)}
Comment = _CLASSES["Comment"]
InlineAsm = _CLASSES["InlineAsm"]
AsmOperand = _CLASSES["AsmOperand"]
Verbatim = _CLASSES["Verbatim"]


def asm(template: str, outputs: list[tuple[str, c_ast.Node]], inputs: list[tuple[str, c_ast.Node]],
        volatile: bool = True, clobbers: tuple[str, ...] = ()) -> "InlineAsm":
    """An InlineAsm from (constraint, expression) pairs."""
    return InlineAsm(template, [AsmOperand(c, e) for c, e in outputs], [AsmOperand(c, e) for c, e in inputs],
                     tuple(clobbers), volatile)


__all__ = ["AsmOperand", "Comment", "InlineAsm", "NODES", "Verbatim", "asm"]
