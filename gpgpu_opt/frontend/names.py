"""Name resolution: every identifier a kernel uses must be declared, except the original compiler's
shorthand (`idx idy tidx tidy bidx bidy blockDimX ...`), which is defined for the kernel as real locals."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.diagnostics import CompileError, Location

#: The original compiler's predefined names, as the CUDA they stand for.
SHORTHAND = {
    "idx": "blockIdx.x * blockDim.x + threadIdx.x",
    "idy": "blockIdx.y * blockDim.y + threadIdx.y",
    "tidx": "threadIdx.x",
    "tidy": "threadIdx.y",
    "bidx": "blockIdx.x",
    "bidy": "blockIdx.y",
    "blockDimX": "blockDim.x",
    "blockDimY": "blockDim.y",
    "gridDimX": "gridDim.x",
    "gridDimY": "gridDim.y",
    "globalDimX": "gridDim.x * blockDim.x",
    "globalDimY": "gridDim.y * blockDim.y",
    "COALESCED_NUM": "16",
}


class _Scopes(c_ast.NodeVisitor):
    """Walks a function, tracking block scopes, and records identifiers used before any declaration."""

    def __init__(self, known: set[str]):
        self.scopes: list[set[str]] = [set(known)]
        self.undeclared: list[c_ast.ID] = []

    def declared(self, name: str) -> bool:
        return any(name in s for s in self.scopes)

    def visit_FuncDef(self, node: c_ast.FuncDef):
        self.scopes[0].add(node.decl.name)
        self.scopes.append(set())
        params = node.decl.type.args.params if node.decl.type.args else []
        for p in params:
            if isinstance(p, c_ast.Decl) and p.name:
                self.scopes[-1].add(p.name)
        self.visit(node.body)
        self.scopes.pop()

    def visit_Compound(self, node):
        self.scopes.append(set())
        self.generic_visit(node)
        self.scopes.pop()

    def visit_For(self, node):
        self.scopes.append(set())
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Decl(self, node: c_ast.Decl):
        for dim in _array_dims(node.type):
            self.visit(dim)
        if node.init is not None:
            self.visit(node.init)
        if node.name:
            self.scopes[-1].add(node.name)

    def visit_StructRef(self, node):
        self.visit(node.name)  # the field is a member name, not a variable

    def visit_ID(self, node: c_ast.ID):
        if not self.declared(node.name):
            self.undeclared.append(node)

    def visit_Label(self, node):
        self.visit(node.stmt)

    def visit_Goto(self, node):
        pass


def _array_dims(type_node):
    while isinstance(type_node, (c_ast.ArrayDecl, c_ast.PtrDecl)):
        if isinstance(type_node, c_ast.ArrayDecl) and type_node.dim is not None:
            yield type_node.dim
        type_node = type_node.type


def resolve_names(func: c_ast.FuncDef, known: set[str], constants: dict[str, str],
                  parse_expr) -> list[str]:
    """Check that `func` uses only declared names. Shorthand names and `gValue` constants that it uses
    become `const int` locals at the top of its body. Returns the names so defined."""
    walker = _Scopes(known)
    walker.visit(func)
    defined: list[str] = []
    for node in walker.undeclared:
        name = node.name
        if name in defined:
            continue
        if name in SHORTHAND or name in constants:
            defined.append(name)
            continue
        raise CompileError(f"use of undeclared identifier '{name}'", Location.of(node))
    prologue = []
    for name in sorted(defined, key=lambda n: list(SHORTHAND).index(n) if n in SHORTHAND else 99):
        value = SHORTHAND.get(name, constants.get(name))
        prologue.append(c_ast.Decl(name, ["const"], [], [], [],
                                   c_ast.TypeDecl(name, ["const"], None, c_ast.IdentifierType(["int"])),
                                   parse_expr(value), None))
    func.body.block_items = prologue + list(func.body.block_items or [])
    return defined
