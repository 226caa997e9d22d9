"""Printing c_ast back as CUDA: pycparser's generator with CUDA's spellings restored."""
from __future__ import annotations

from pycparser import c_ast, c_generator


class Comment(c_ast.Node):
    """A `// text` line among a block's statements (pycparser keeps no comments). Passes insert one per
    transformation; it has no children and no meaning. Printed as a blank line when CUDA spellings are
    off (the re-parse in gpgpu_opt.checks), so only put it among a Compound's items."""
    __slots__ = ("text", "coord", "__weakref__")
    attr_names = ("text",)

    def __init__(self, text: str, coord=None):
        self.text = text
        self.coord = coord

    def children(self):
        return ()

    def __iter__(self):
        return iter(())


class CudaGenerator(c_generator.CGenerator):
    def __init__(self, cuda_spellings: bool = True):
        super().__init__(reduce_parentheses=True)
        self.cuda_spellings = cuda_spellings

    def visit_Decl(self, n, no_type=False):
        if not self.cuda_spellings and ("__shared__" in n.storage or n.funcspec):
            n = c_ast.Decl(n.name, n.quals, n.align, [s for s in n.storage if s != "__shared__"],
                           [f for f in n.funcspec if not f.startswith("__")], n.type, n.init, n.bitsize, n.coord)
        return super().visit_Decl(n, no_type)

    def visit_Comment(self, n):
        return f"// {n.text}" if self.cuda_spellings else ""

    def visit_TernaryOp(self, n):
        def operand(e):
            text = self._visit_expr(e)
            return text if isinstance(e, (c_ast.ID, c_ast.Constant, c_ast.ArrayRef, c_ast.StructRef,
                                          c_ast.FuncCall)) else f"({text})"
        return f"{operand(n.cond)} ? {operand(n.iftrue)} : {operand(n.iffalse)}"

    def visit_PtrDecl(self, n):
        return self._generate_type(n, emit_declname=False)

    def _generate_type(self, n, modifiers=None, emit_declname=True, **options):
        text = super()._generate_type(n, modifiers or [], emit_declname, **options)
        if self.cuda_spellings:
            text = text.replace("* restrict ", "* __restrict__ ").replace("*restrict ", "*__restrict__ ")
            text = text.replace(" restrict ", " __restrict__ ")
        return text


def to_cuda(node: c_ast.Node) -> str:
    return CudaGenerator().visit(node)


def format_cuda(text: str) -> str:
    """pycparser prints braces on their own lines with 2-space indents; print the usual CUDA style:
    K&R braces, 4-space indents, no blank line before a closing brace."""
    out: list[str] = []
    for raw in text.rstrip().split("\n"):
        stripped = raw.strip()
        indent = len(raw) - len(raw.lstrip(" "))
        line = " " * (2 * indent) + stripped
        if stripped == "{" and out and out[-1].strip() and not out[-1].rstrip().endswith(";") \
                and not out[-1].lstrip().startswith("#"):
            out[-1] = out[-1].rstrip() + " {"
            continue
        if stripped.startswith("else") and out and out[-1].strip() == "}":
            out[-1] = out[-1].rstrip() + " " + stripped
            continue
        if stripped == "}" or stripped.startswith("} "):
            while out and not out[-1].strip():
                out.pop()
        if stripped:  # pycparser's blank lines after blocks are not the user's; drop them
            out.append(line)
    return "\n".join(out) + "\n"


def kernel_source(func: c_ast.FuncDef) -> str:
    return format_cuda(to_cuda(func))
