"""Device buffers held in file-scope pointer variables, for the alias proof (aliasing.py).

Programs often keep their device buffers in globals: `float *feature_d;` at file scope, allocated by
`cudaMalloc((void **)&feature_d, ...)` in one function and passed to a launch in another. Such a variable is
a buffer of its own (a whitelist) when:
- it is declared once, at the top level of the user's files (not in a namespace, a class, a linkage block
  or a template), a plain pointer (`T *v;`, `T *v = NULL;`, or initialised with a new allocation), not
  `extern` (another translation unit may change it), with no storage class but `static`, no attribute and
  no CUDA qualifier (`__device__ T *v` lives on the device, where a kernel may change it);
- every identifier spelled like it, in all the host code as preprocessed, is either
  - a local variable or parameter of that name, or a use of one inside its scope, from the end of its
    declarator to the end of its block or function (never further than C++'s scope; a use outside every
    such scope in a function that declares one, in any block or lambda, is refused all the same), or
  - a use of the file-scope variable that pointer_uses.py reads as 'read' or 'allocated' (`v = NULL`
    included), in a free function or a file-scope initialiser: not in a class (a member of that name
    would hide it), a namespace, or code the parser could not read;
- it is allocated somewhere.
Then it only ever holds NULL or an allocation stored into it by its own allocator call (or returned by an
allocation helper): two such variables, or one and a function's own buffer (buffer_variables.py), never
share an allocation, wherever it is re-allocated, in a loop or not. A swap with another variable, an
assignment from another pointer, its address outside an allocation, a reference, a call that may change it:
each defeats it, with a note naming the use.

Its buffer is named by the variable alone, whatever function or chain of calls reaches it, so that one
variable passed to two parameters of a launch (directly, or through a helper's parameter) is one buffer.

Assumed, as for the rest of the proof: the file with its includes is the whole program (no other
translation unit declares the variable `extern` and changes it).
"""
from __future__ import annotations

from gpgpu_opt.analysis.host_calls import ALLOCATORS
from gpgpu_opt.analysis.pointer_uses import SWAPPED, PointerUse, declares, initialised, why_not_plain_pointer
from gpgpu_opt.frontend.host_syntax import HostSyntax, Node

#: Where a use of the name may resolve to a member or a namespace's variable (declared where the proof does not
#: look: a base class, a system header), not the file-scope one: as a launch argument, another buffer.
_HIDING_SCOPES = {"field_declaration_list": "a class", "namespace_definition": "a namespace"}


class FileScopeBuffers:
    """Which file-scope pointer variables are device buffers of their own (each judged once)."""

    def __init__(self, syntax: HostSyntax):
        self.syntax = syntax
        self._verdicts: dict[str, tuple[str | None, str]] = {}
        self._declarations: dict[str, list[Node]] = {}

    def declared(self, name: str) -> bool:
        """Is `name` declared at the top level of the file (whatever its type)?"""
        return bool(self._top_level_declarations(name))

    def verdict(self, name: str) -> tuple[str | None, str]:
        """The buffer file-scope variable `name` names (the name itself), or None and why not."""
        if name not in self._verdicts:
            self._verdicts[name] = self._verdict_now(name)
        return self._verdicts[name]

    def _top_level_declarations(self, name: str) -> list[Node]:
        """Each name's once (a buffer passed to every launch is asked per launch: all its uses, each time)."""
        if name not in self._declarations:
            self._declarations[name] = [ident for ident in self.syntax.identifiers(name)
                                        if declares(ident) and _at_top_level(ident)]
        return self._declarations[name]

    def _verdict_now(self, name: str) -> tuple[str | None, str]:
        syntax = self.syntax
        declarations = self._top_level_declarations(name)
        if len(declarations) != 1:
            return None, f"is declared {len(declarations)} times at file scope"
        declared = declarations[0]
        why = why_not_plain_pointer(declared, syntax) or self._why_not_plain_declaration(declared)
        if why:
            return None, why
        unread = syntax.unparsed_mentions(name)
        if unread:
            return None, f"is named at line {unread[0]} where the parser does not read it as a variable"
        scopes, why = self._other_declarations(name, declared)
        if why:
            return None, why
        allocated = initialised(declared, syntax)
        others = {ident for ident, _, _ in scopes}
        for use in syntax.identifiers(name):
            if use == declared or use in others or any(start <= use.start_byte and use.end_byte <= end
                                                       for _, start, end in scopes):
                continue  # the declaration itself, or another variable of that name
            how = self._why_not_resolved(use, scopes) or PointerUse(syntax, use).verdict()
            if how == "allocated":
                allocated = True
            elif how.startswith(SWAPPED):
                return None, f"is {how} at {syntax.where(use)} (a file-scope buffer may only be allocated, read " \
                             "or set to NULL)"
            elif how != "read":
                return None, how
        if not allocated:
            return None, f"is a file-scope variable never allocated with {ALLOCATORS[0]}"
        return name, ""

    def _why_not_plain_declaration(self, declared: Node) -> str:
        """Why the file-scope declaration has more than a type, const/volatile, `static` and declarators."""
        declaration = _declaration_of(declared)
        for child in declaration.children:
            field = HostSyntax.field_of(child)
            text = self.syntax.text_of(child)
            if field in ("type", "declarator") or child.type in (",", ";", "comment"):
                continue
            if child.type == "type_qualifier" and text in ("const", "volatile"):
                continue
            if child.type == "storage_class_specifier" and text == "static":
                continue
            return f"is declared with '{text}' at {self.syntax.where(declared)}, which the proof does not model"
        return ""

    def _other_declarations(self, name: str, declared: Node) -> tuple[list[tuple[Node, int, int]], str]:
        """Every other declaration of `name` with the bytes its scope surely covers (no further than the
        language's scope: a use past it is refused where it could be either), or why one is not understood."""
        scopes = []
        for ident in self.syntax.identifiers(name):
            if ident == declared or not declares(ident):
                continue
            scope = _local_scope(ident)
            if scope is None:
                return [], f"is declared again at {self.syntax.where(ident)}, not surely as another local " \
                           "variable or parameter (a block-scope extern, a template parameter, `n * v;` that may " \
                           "be a product...), so some uses of the name may be the file-scope variable"
            scopes.append((ident, *scope))
        return scopes, ""

    def _why_not_resolved(self, use: Node, scopes: list[tuple[Node, int, int]]) -> str:
        """Why `use` may not name the file-scope variable ('' when it surely does)."""
        syntax = self.syntax
        where = syntax.where(use)
        function = syntax.enclosing_function(use)
        if function is not None:
            shadow = next((ident for ident, _, _ in scopes
                           if function.start_byte <= ident.start_byte < function.end_byte), None)
            if shadow is not None:
                return f"is used at {where} in a function that also declares a variable of that name " \
                       f"(at {syntax.where(shadow)})"
            broken = syntax.broken(function)
            if broken is not None:
                return f"is used at {where} in a function the parser could not read (at {syntax.where(broken)})"
        node = use.parent
        while node is not None:
            if node.is_error:
                return f"is named at {where} in code the parser could not read"
            if node.type in _HIDING_SCOPES:
                return f"is used at {where} inside {_HIDING_SCOPES[node.type]}, where a member of that name " \
                       "would hide the file-scope variable"
            node = node.parent
        return ""


def _at_top_level(identifier: Node) -> bool:
    declaration = _declaration_of(identifier)
    return declaration.parent is not None and declaration.parent.type == "translation_unit"


def _declaration_of(identifier: Node) -> Node:
    """The node a declared name's declarators hang from: a declaration, a parameter, a definition..."""
    node = identifier.parent
    while node.parent is not None and node.type.endswith("declarator"):
        node = node.parent
    return node


def _may_be_an_expression(declaration: Node, declarators: set[str]) -> bool:
    """`n * v;` or `n & v;` (no initialiser) is a declaration of v only when n names a type, which the parser
    cannot know: with a variable n it is an expression that uses the file-scope v. A built-in type is
    surely a type."""
    return not _surely_a_type(declaration) and "init_declarator" not in declarators and bool(
        declarators & {"pointer_declarator", "reference_declarator", "parenthesized_declarator"})


def _surely_a_type(declaration: Node) -> bool:
    type_node = declaration.child_by_field_name("type")
    return type_node is not None and type_node.type in ("primitive_type", "sized_type_specifier")


def _local_scope(identifier: Node) -> tuple[int, int] | None:
    """The bytes in which the local variable or parameter `identifier` declares surely hides a file-scope
    variable of that name, or None when it is neither, or a block-scope `extern` (which names the
    file-scope variable itself), or what may be an expression rather than a declaration."""
    node, chain = identifier.parent, set()
    start = identifier.end_byte  # the name is declared past its whole declarator (`T *v[n]`: n is not v)
    while node.type.endswith("declarator"):
        if node.type in ("function_declarator", "abstract_function_declarator"):
            return None  # a function declared in a block
        chain.add(node.type)
        start = node.end_byte if node.type != "init_declarator" else start
        node = node.parent
    holder = node
    if holder.type == "declaration":
        if HostSyntax.enclosing_function(holder) is None or any(
                c.type == "storage_class_specifier" and c.text == b"extern" for c in holder.children):
            return None
        if _may_be_an_expression(holder, chain):
            return None
        # From the end of the declarator to the end of the block (or statement) that holds it: never past
        # the language's scope, which ends with the enclosing block.
        return start, holder.parent.end_byte
    if holder.type in ("parameter_declaration", "optional_parameter_declaration") \
            and holder.parent.type == "parameter_list":
        parameters = holder.parent
        owner = parameters.parent
        if owner.type == "lambda_declarator" and owner.parent.type == "lambda_expression":
            return start, owner.parent.end_byte
        if owner.type == "function_declarator":
            definition = owner
            while definition.parent is not None and definition.type.endswith("declarator") \
                    and HostSyntax.field_of(definition) == "declarator":
                definition = definition.parent
            if definition.type == "function_definition":
                return start, definition.end_byte
            if not _surely_a_type(holder) and "parenthesized_declarator" in chain:
                return None  # `T x(f(v));` declares a function only when f is a type: else f(v) is a call
            return start, parameters.end_byte  # a prototype's parameter
    return None
