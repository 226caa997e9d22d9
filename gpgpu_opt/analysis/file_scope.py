"""What a kernel does with the file-scope `__constant__`/`__device__` variables it uses.

The passes model global memory as the kernel's pointer parameters. A `__constant__` variable cannot be
written by a kernel, so reading it is like reading a local table: any pass may duplicate or move the read.
A `__device__` variable is global memory that a kernel may store to by name, which no pass tracks: a
kernel that may store to one is left as written (a whitelist: only plain reads, `a[i]` or `s`, in the
kernel's own body count as reads)."""
from __future__ import annotations

from pycparser import c_ast

from gpgpu_opt.ast_util import call_name, ids_in, walk


def _root(node) -> c_ast.Node:
    """The variable under subscripts, members and parentheses (`d_a[i][j].x` -> `d_a`)."""
    while isinstance(node, (c_ast.ArrayRef, c_ast.StructRef)):
        node = node.name
    return node


def may_write_device_variable(kernel, device_functions: dict[str, c_ast.FuncDef]) -> str | None:
    """Why the kernel may store to a `__device__` variable (None: it only reads them by name)."""
    names = {n for n, v in kernel.file_variables.items() if v.space == "device"}
    if not names:
        return None
    for name, helper in _helpers(kernel.funcdef, device_functions):
        used = ids_in(helper.body) & names
        if used:
            return (f"its helper '{name}' uses the __device__ variable '{sorted(used)[0]}', global memory the "
                    "passes do not model")
    plain_reads: set[int] = set()
    for node in walk(kernel.body):
        if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID):
            plain_reads.add(id(node.name))
    for node in walk(kernel.body):
        target = None
        if isinstance(node, c_ast.Assignment):
            target = node.lvalue
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--", "&"):
            target = node.expr
        elif isinstance(node, c_ast.FuncCall) and node.args is not None:
            for arg in node.args.exprs:
                root = _root(arg)
                if isinstance(root, c_ast.ID) and root.name in names and (root is arg or not _is_scalar_read(arg)):
                    return f"the __device__ variable '{root.name}' is passed to a call"
        if target is not None:
            root = _root(target)
            if isinstance(root, c_ast.ID) and root.name in names:
                return (f"it stores to (or takes the address of) the __device__ variable '{root.name}', global "
                        "memory the passes do not model")
        if isinstance(node, c_ast.ID) and node.name in names and kernel.file_variables[node.name].is_array \
                and id(node) not in plain_reads:
            return f"it uses the __device__ array '{node.name}' as a pointer"
    return None


def _is_scalar_read(arg) -> bool:
    """`f(d_a[i])`: an element's value, not the array."""
    return isinstance(arg, c_ast.ArrayRef)


def _helpers(func: c_ast.FuncDef, device_functions: dict[str, c_ast.FuncDef]):
    """(name, FuncDef) of every device function `func` calls, directly or not."""
    seen: set[str] = set()
    pending = [func]
    while pending:
        f = pending.pop()
        for node in walk(f.body):
            name = call_name(node)
            if name in device_functions and name not in seen:
                seen.add(name)
                pending.append(device_functions[name])
                yield name, device_functions[name]


def collect_file_scope_reads(kernel) -> list:
    """The kernel's reads of file-scope arrays (subscripted), as Accesses (kind `const-mem` or
    `device-mem`) with `extra["uniform"]`: the subscript is the same for every thread of a warp (no
    threadIdx in it), so constant memory broadcasts it. For the analysis report only; the passes never see
    these accesses: memory the kernel cannot store to is read like a local table (a kernel that may store
    to a __device__ variable is left as written)."""
    from gpgpu_opt.analysis.accesses import AccessCollector

    class _Collector(AccessCollector):
        def __init__(self, kernel):
            super().__init__(kernel)
            self.file_reads = []

        def _record(self, node, mode):
            subscripts, root = [], node
            while isinstance(root, c_ast.ArrayRef):
                subscripts.insert(0, root.subscript)
                root = root.name
            name = root.name if isinstance(root, c_ast.ID) else None
            if mode == "read" and name in self.kernel.file_variables and name not in self.pointer_aliases:
                self.file_reads.append(_file_access(self, node, self.kernel.file_variables[name], subscripts))

    collector = _Collector(kernel)
    collector.visit(kernel.body)
    return collector.file_reads


def _file_access(collector, node, variable, subscripts):
    from gpgpu_opt.analysis.accesses import Access, element_bytes
    from gpgpu_opt.analysis.symbolic import TID, NotAffine, is_opaque, to_sympy
    from gpgpu_opt.diagnostics import Location

    text = "][".join(collector.printer.visit(s) for s in subscripts)
    access = Access(variable.name, "read", node, text, None, list(collector.loops),
                    element_bytes(" ".join(variable.type_names)), Location.of(node), collector.guard_depth > 0,
                    kind="const-mem" if variable.space == "constant" else "device-mem")
    dims = variable.dims or ()
    try:
        if collector.unanalysable_loops or len(subscripts) != len(dims) or not dims:
            raise NotAffine("not a whole-element subscript")
        flat = to_sympy(subscripts[0], collector.env, collector.types)
        for sub, dim in zip(subscripts[1:], dims[1:]):
            flat = flat * dim + to_sympy(sub, collector.env, collector.types)
        access.analysis_index = flat
    except NotAffine as why:
        access.why_unresolved = str(why)
    index = access.analysis_index
    access.extra["uniform"] = index is not None and not any(is_opaque(s) for s in index.free_symbols) \
        and not index.free_symbols & set(TID.values())
    return access
