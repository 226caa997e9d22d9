"""Statement-list helpers of the rewritings that write one output's code several times (the merges; prefetch
prunes with them too): the accumulator's start statements, pruning what a copy no longer uses, and filling a
template's placeholders."""
from __future__ import annotations

import copy

from pycparser import c_ast

from gpgpu_opt.ast_util import transform, walk
from gpgpu_opt.cuda_nodes import Comment
from gpgpu_opt.rewriting import guards as g
from gpgpu_opt.rewriting.cbuild import is_placeholder


def sets_start(stmt: c_ast.Node, acc: c_ast.Decl) -> bool:
    """The accumulator's declaration or an update of it before the loop (`c_acc *= beta;`)."""
    return stmt is acc or isinstance(stmt, c_ast.Assignment) and isinstance(stmt.lvalue, c_ast.ID) \
        and stmt.lvalue.name == acc.name


def without_unused_locals(stmts: list[c_ast.Node]) -> list[c_ast.Node]:
    """Drop declarations nothing uses (the other half of the output's code used them), then ifs and
    blocks left empty."""
    while True:
        root = c_ast.Compound(stmts)
        used = [n.name for n in walk(root) if isinstance(n, c_ast.ID)]
        changed = False

        def prune(n: c_ast.Node):
            nonlocal changed
            if isinstance(n, c_ast.Compound):
                kept = [s for s in n.block_items or [] if not removable(s, used)]
                if len(kept) != len(n.block_items or []):
                    changed = True
                    n.block_items = kept
            return None

        transform(root, prune)
        stmts = root.block_items
        if not changed:
            return stmts


def removable(stmt: c_ast.Node, used: list[str]) -> bool:
    if isinstance(stmt, c_ast.Decl):
        return stmt.name not in used and (stmt.init is None or g.is_pure(stmt.init, allow_memory=True))
    if isinstance(stmt, c_ast.If) and stmt.iffalse is None:
        return not g.items(stmt.iftrue) and g.is_pure(stmt.cond, allow_memory=True)
    return isinstance(stmt, c_ast.Compound) and not stmt.block_items


def filled(items: list[c_ast.Node], parts: dict[str, list[c_ast.Node]]) -> list[c_ast.Node]:
    """The template's statements with each `__part__();` placeholder replaced by its statements."""
    for n in list(walk(c_ast.Compound(items))):
        if isinstance(n, c_ast.Compound):
            n.block_items = [x for s in n.block_items or [] for x in expand(s, parts)]
    return [x for s in items for x in expand(s, parts)]


def expand(stmt: c_ast.Node, parts: dict) -> list[c_ast.Node]:
    if is_placeholder(stmt, "__note__"):
        return [Comment(stmt.args.exprs[0].value.strip('"'))]
    for name, stmts in parts.items():
        if is_placeholder(stmt, name):
            return copy.deepcopy(stmts)
    return [stmt]
