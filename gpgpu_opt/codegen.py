"""Printing c_ast back as CUDA: pycparser's generator with CUDA's spellings restored."""
from __future__ import annotations

from pycparser import c_ast, c_generator

from gpgpu_opt.cuda_nodes import AsmOperand, InlineAsm


class CudaGenerator(c_generator.CGenerator):
    def __init__(self, cuda_spellings: bool = True):
        super().__init__(reduce_parentheses=True)
        self.cuda_spellings = cuda_spellings

    def visit_Decl(self, n, no_type=False):
        if not self.cuda_spellings and ("__shared__" in n.storage or n.funcspec):
            n = c_ast.Decl(n.name, n.quals, n.align, [s for s in n.storage if s != "__shared__"],
                           [f for f in n.funcspec if not f.startswith("__")], n.type, n.init, n.bitsize, n.coord)
        return super().visit_Decl(n, no_type)

    def visit_Alignas(self, n):
        text = super().visit_Alignas(n)
        return text.replace("_Alignas", "__align__", 1) if self.cuda_spellings else text

    def visit_Comment(self, n):
        """Printed as a blank line when CUDA spellings are off (the re-parse of check.sanity), so only put it
        among a Compound's items."""
        return f"// {n.text}" if self.cuda_spellings else ""

    def visit_Verbatim(self, n):
        return n.text

    def visit_InlineAsm(self, n):
        """`asm volatile("..." : outputs : inputs);`, one instruction. Without CUDA spellings (the re-parse of
        check.sanity, which reads C), the call `__asm_statement("...", &out, ..., in, ...)`: each operand still
        read and written where it was."""
        if not self.cuda_spellings:
            operands = [f"&{self._visit_expr(o.expr)}" for o in n.outputs] + [self._visit_expr(o.expr) for o in n.inputs]
            return f"__asm_statement({', '.join([_c_string(n.template), *operands])});"
        parts = [_c_string(n.template), self._operands(n.outputs), self._operands(n.inputs)]
        if n.clobbers:
            parts.append(", ".join(_c_string(c) for c in n.clobbers))
        while parts[-1] == "" and len(parts) > 1:
            parts.pop()
        return f"asm{' volatile' if n.volatile else ''}({' : '.join(parts)});"

    def visit_AsmOperand(self, n):
        return f"{_c_string(n.constraint)}({self.visit(n.expr)})"

    def _operands(self, operands) -> str:
        return ", ".join(self.visit(o) for o in operands)

    def visit_TernaryOp(self, n):
        def operand(e):
            text = self._visit_expr(e)
            return text if isinstance(e, (c_ast.ID, c_ast.Constant, c_ast.ArrayRef, c_ast.StructRef,
                                          c_ast.FuncCall)) else f"({text})"
        return f"{operand(n.cond)} ? {operand(n.iftrue)} : {operand(n.iffalse)}"

    def _generate_stmt(self, n, add_indent=False):
        """pycparser indents only the first line of an unbraced body, so a loop nested in an unbraced loop
        printed its own body at the wrong depth; indent the whole statement instead. A block keeps the
        enclosing statement's indent (its `{` joins that line)."""
        if add_indent and not isinstance(n, c_ast.Compound):
            self.indent_level += 2
            try:
                return super()._generate_stmt(n, add_indent=False)
            finally:
                self.indent_level -= 2
        return super()._generate_stmt(n, add_indent=False)

    def visit_If(self, n):
        """`else if` on one line, as people write a chain (pycparser nests each `if` a level deeper)."""
        if not isinstance(n.iffalse, c_ast.If):
            return super().visit_If(n)
        head = f"if ({self.visit(n.cond)})\n" + self._generate_stmt(n.iftrue, add_indent=True)
        return head + self._make_indent() + "else " + self.visit_If(n.iffalse)

    def visit_PtrDecl(self, n):
        return self._generate_type(n, emit_declname=False)

    def _generate_type(self, n, modifiers=None, emit_declname=True, **options):
        text = super()._generate_type(n, modifiers or [], emit_declname, **options)
        if self.cuda_spellings:
            # `float *__restrict__ p`, as people write it (and as a requalified signature reads)
            text = text.replace("* restrict ", "*__restrict__ ").replace("*restrict ", "*__restrict__ ")
            text = text.replace(" restrict ", " __restrict__ ")
        return text


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_cuda(node: c_ast.Node) -> str:
    return CudaGenerator().visit(node)


def format_cuda(text: str) -> str:
    """pycparser prints braces on their own lines with 2-space indents; print the usual CUDA style:
    K&R braces, 4-space indents, no blank lines of its own."""
    out: list[str] = []
    for raw in text.rstrip().split("\n"):
        stripped = raw.strip()
        if not stripped:
            continue
        line = " " * (2 * (len(raw) - len(raw.lstrip(" ")))) + stripped
        previous = out[-1] if out else ""
        if stripped == "{" and previous.strip() and not previous.rstrip().endswith((";", "}")) \
                and not previous.lstrip().startswith("#"):
            out[-1] = previous.rstrip() + " {"
            continue
        # `} else` only when the brace closes the if's own block (not a loop nested in an unbraced if)
        if stripped.startswith("else") and previous.strip() == "}" and _indent(previous) == _indent(line):
            out[-1] = previous.rstrip() + " " + stripped
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def kernel_source(func: c_ast.FuncDef) -> str:
    return format_cuda(to_cuda(func))
