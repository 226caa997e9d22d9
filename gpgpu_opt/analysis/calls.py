"""Which calls a pass may treat like arithmetic: builtins and `__device__` helpers whose result depends on
their arguments only.

A pure call reads and writes no memory and does not depend on the thread or block it runs in, so it may
be evaluated again, earlier, or by a differently shaped block. A helper is pure when it takes no pointer,
touches only its parameters and locals (no global or shared variable, no array but its own local arrays,
no dereference, no static or shared declaration, no thread or block index) and calls only pure functions;
recursion counts as impure (the analysis does not try to prove it terminates).
"""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.frontend.cuda_c import PRELUDE_NAMES
from gpgpu_opt.frontend.environment import BOOL_LITERALS
from gpgpu_opt.frontend.math_api import memory_effect

#: Builtins that touch memory or other threads: atomics, barriers, fences, warp shuffles and votes. The
#: Math API table says which of its functions touch memory: the cache-hinted loads and stores (`__ldg`,
#: `__stcs`) and the functions with out-parameters (`sincosf`).
_IMPURE_BUILTINS = ("atomic", "__sync", "__threadfence", "__shfl", "__ballot", "__all_sync", "__any_sync")
_INDICES = {"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"}
_LOCAL_STORAGE = {"register", "auto"}

PURE_BUILTINS = frozenset(n for n in PRELUDE_NAMES if not n.startswith(_IMPURE_BUILTINS) and not memory_effect(n))
#: The loads that are pure reads: `__ldg(&a[i])` reads a[i] through the read-only cache, which promises that
#: nothing writes it while the kernel runs, so it is the value `a[i]` reads (normalize reads it so, and the
#: access analysis sees the read of `a` either way). The other cache hints say how the access happens.
PURE_LOADS = frozenset({"__ldg"})


def why_impure(name: str, helpers: dict[str, c_ast.FuncDef]) -> str | None:
    """None when a call to `name` is pure, else why not ("sq takes a pointer parameter 'p'")."""
    return _Purity(helpers).why(name)


def pure_calls(helpers: dict[str, c_ast.FuncDef]) -> frozenset[str]:
    """The builtins and the helpers of `helpers` that are pure."""
    purity = _Purity(helpers)
    return (PURE_BUILTINS - set(helpers)) | {name for name in helpers if purity.why(name) is None}


class _Purity:
    def __init__(self, helpers: dict[str, c_ast.FuncDef]):
        self.helpers = helpers
        self.verdicts: dict[str, str | None] = {}
        self.in_progress: list[str] = []

    def why(self, name: str) -> str | None:
        if name in PURE_BUILTINS and name not in self.helpers:   # the program's own `y0` is its function
            return None
        if name in self.helpers:
            return self._helper_verdict(name)
        if memory_effect(name) in ("load", "store"):
            return f"{name} is a {memory_effect(name)} of global memory"
        if memory_effect(name) == "clock":
            return f"{name} reads the SM's clock"
        if memory_effect(name) == "trap":
            return f"{name} stops the kernel where it fails"
        if memory_effect(name):
            return f"{name} stores through its pointer arguments"
        if name in PRELUDE_NAMES:
            return f"{name} touches memory or other threads"
        return f"{name} is not a function gpgpu-opt can look into"

    def _helper_verdict(self, name: str) -> str | None:
        if name not in self.verdicts:
            self.in_progress.append(name)
            self.verdicts[name] = self._helper(name, self.helpers[name])
            self.in_progress.pop()
        return self.verdicts[name]

    def _helper(self, name: str, func: c_ast.FuncDef) -> str | None:
        params = func.decl.type.args.params if func.decl.type.args is not None else []
        scope = set()
        for p in params:
            if isinstance(p, c_ast.Decl):
                if isinstance(p.type, (c_ast.PtrDecl, c_ast.ArrayDecl)):
                    return f"{name} takes a pointer parameter '{p.name}'"
                scope.add(p.name)
        local_arrays: set[str] = set()
        return self._statement(name, func.body, scope, local_arrays)

    def _statement(self, name: str, node: c_ast.Node, scope: set[str], arrays: set[str]) -> str | None:
        """Why `node` is impure, visiting in order so that each use sees the declarations before it
        (a block or a `for` header opens a scope: a local may shadow a global of the same name)."""
        if isinstance(node, (c_ast.Compound, c_ast.For)):
            scope, arrays = set(scope), set(arrays)
        if isinstance(node, c_ast.Decl):
            why = self._declaration(name, node)
            if why:
                return why
            if node.init is not None:
                why = self._statement(name, node.init, scope, arrays)
                if why:
                    return why
            scope.add(node.name)
            if isinstance(node.type, c_ast.ArrayDecl):
                arrays.add(node.name)
            else:
                arrays.discard(node.name)
            return None
        if isinstance(node, c_ast.FuncCall):
            return self._call(name, node, scope, arrays)
        written = _written(node)
        if isinstance(written, c_ast.ID) and written.name not in scope:
            return f"{name} writes the global variable {written.name}"
        if isinstance(written, c_ast.ArrayRef) and _global_array(written, arrays):
            return f"{name} writes {_global_array(written, arrays)}"
        if isinstance(node, c_ast.ArrayRef) and _global_array(node, arrays):
            return f"{name} reads {_global_array(node, arrays)}"
        if isinstance(node, c_ast.UnaryOp) and node.op == "*" or isinstance(node, c_ast.StructRef) \
                and node.type == "->":
            return f"{name} dereferences a pointer"
        if isinstance(node, c_ast.ID) and node.name not in scope and node.name not in BOOL_LITERALS:
            if node.name in _INDICES:
                return f"{name} uses {node.name}"
            return f"{name} uses the global variable {node.name}"
        if isinstance(node, c_ast.StructRef):
            return self._statement(name, node.name, scope, arrays)   # the field is not a variable
        for _, child in node.children():
            why = self._statement(name, child, scope, arrays)
            if why:
                return why
        return None

    def _call(self, name: str, call: c_ast.FuncCall, scope: set[str], arrays: set[str]) -> str | None:
        if not isinstance(call.name, c_ast.ID):
            return f"{name} calls through a function pointer"
        callee = call.name.name
        if callee in self.in_progress:
            return f"{name} is recursive" if callee == name else f"{name} calls {callee} recursively"
        why = self.why(callee)
        if why:
            return f"{name} calls {callee} ({why})"
        return self._statement(name, call.args, scope, arrays) if call.args is not None else None

    @staticmethod
    def _declaration(name: str, decl: c_ast.Decl) -> str | None:
        storage = set(decl.storage or []) - _LOCAL_STORAGE
        if "__shared__" in storage:
            return f"{name} declares shared memory '{decl.name}'"
        if storage:
            return f"{name} declares the {' '.join(sorted(storage))} variable '{decl.name}'"
        if isinstance(decl.type, c_ast.PtrDecl):
            return f"{name} declares the pointer '{decl.name}'"
        return None


def _written(node: c_ast.Node) -> c_ast.Node | None:
    """The target of an assignment or increment."""
    if isinstance(node, c_ast.Assignment):
        return node.lvalue
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        return node.expr
    return None


def _global_array(ref: c_ast.ArrayRef, local_arrays: set[str]) -> str | None:
    """'global array g' when `ref` indexes anything but one of the helper's own arrays."""
    base = ref.name
    while isinstance(base, c_ast.ArrayRef):       # c[i][j]
        base = base.name
    if isinstance(base, c_ast.ID):
        return None if base.name in local_arrays else f"global array {base.name}"
    return "memory through a computed address"
