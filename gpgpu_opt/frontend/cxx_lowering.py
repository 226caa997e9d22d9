"""Lowering the C++ of one CUDA function to C, where the construct has a C meaning.

pycparser (the IR's parser) reads C. A kernel of a CUDA C++ program is mostly C with some C++ spellings of
C things; this module reads the function with tree-sitter's CUDA grammar and rewrites those nodes' byte
ranges to their C meaning, keeping every line break, so pycparser's coordinates still point into the
user's file:

- `static_cast<T>(e)`, `reinterpret_cast<T>(e)`, `const_cast<T>(e)` and the functional cast `float(e)`
  become the C cast `((T)(e))`;
- `nullptr` becomes `0`; `constexpr` on a local declaration becomes `const`;
- `std::sqrt`, `::fminf`, `std::min` (CUDA math and min/max names) become the unqualified names;
- C++ attributes `[[...]]` are dropped;
- `auto x = init;` takes init's type where it is certain (a literal, a cast, a scalar parameter or local,
  `threadIdx`/`blockIdx`/`blockDim`/`gridDim` arithmetic, which is unsigned int, see `cxx_types`);
- the cooperative-groups block `cg::thread_block b = cg::this_thread_block();`, used only to synchronize
  (`cg::sync(b)`, `b.sync()`), is the block barrier: the declaration is dropped and each sync becomes
  `__syncthreads()`;
- on request (a `__device__` helper), a reference parameter `float& d` is read as the value parameter
  `float  d` (the `&` blanked): the C text then has the helper's body, which only `frontend.inline` may use,
  inlining it where the reference is bound to the caller's variable (`reference_parameters` names them).

The check is a whitelist: a node of a type C kernels are made of passes as it is; any other (a reference,
a lambda, a class, `new`, `this`, a template, a qualified name that is not a math function, an `auto`
whose type is not certain...) makes the function pass through, named with its line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter
import tree_sitter_cuda

from gpgpu_opt.frontend.cxx_types import ExpressionTypes

_LANGUAGE = tree_sitter.Language(tree_sitter_cuda.language())
Node = tree_sitter.Node

#: Node types plain C kernels are made of (tree-sitter-cuda's names), passed as they are.
C_NODE_TYPES = frozenset("""
    translation_unit function_definition function_declarator parameter_list parameter_declaration
    optional_parameter_declaration abstract_pointer_declarator abstract_array_declarator
    abstract_function_declarator abstract_parenthesized_declarator pointer_declarator array_declarator
    parenthesized_declarator init_declarator declaration type_definition type_descriptor primitive_type
    sized_type_specifier type_identifier type_qualifier storage_class_specifier struct_specifier
    union_specifier enum_specifier enumerator_list enumerator field_declaration_list field_declaration
    bitfield_clause launch_bounds ms_pointer_modifier ms_restrict_modifier ms_unaligned_ptr_modifier
    compound_statement expression_statement if_statement else_clause condition_clause for_statement
    while_statement do_statement switch_statement case_statement break_statement continue_statement
    return_statement goto_statement labeled_statement statement_identifier attributed_statement
    assignment_expression binary_expression unary_expression update_expression pointer_expression
    call_expression argument_list subscript_expression subscript_argument_list field_expression
    field_identifier identifier number_literal char_literal character string_literal string_content
    escape_sequence concatenated_string parenthesized_expression conditional_expression cast_expression
    sizeof_expression comma_expression initializer_list initializer_pair field_designator
    subscript_designator compound_literal_expression comment null true false
    preproc_call preproc_directive preproc_arg preproc_if preproc_ifdef preproc_else preproc_elif
    preproc_def preproc_function_def preproc_params
    attribute_declaration
""".split())

#: What a C++ node is called in a note (the node type's words otherwise).
_CONSTRUCT_NAMES = {
    "reference_declarator": "reference", "abstract_reference_declarator": "reference",
    "lambda_expression": "lambda", "new_expression": "new", "delete_expression": "delete", "this": "this",
    "try_statement": "try", "throw_statement": "throw", "class_specifier": "class",
    "placeholder_type_specifier": "auto", "for_range_loop": "range-based for", "template_type": "template type",
    "template_function": "template function", "template_method": "template method",
    "operator_name": "operator overload", "operator_cast": "conversion operator", "decltype": "decltype",
    "using_declaration": "using", "alias_declaration": "using alias", "namespace_definition": "namespace",
    "qualified_identifier": "qualified name", "static_assert_declaration": "static_assert",
    "structured_binding_declarator": "structured binding", "kernel_call_syntax": "kernel launch in device code",
    "gnu_asm_expression": "inline asm", "user_defined_literal": "user-defined literal",
    "raw_string_literal": "raw string", "field_initializer_list": "constructor initializer",
}

_CXX_CASTS = {"static_cast", "reinterpret_cast", "const_cast"}
#: C++ keywords that may hang from a node C also has (`if constexpr`): not C, wherever they are.
_CXX_KEYWORDS = frozenset("""constexpr consteval constinit typename template operator :: co_await co_return
    co_yield noexcept throw mutable virtual explicit friend decltype static_assert requires concept""".split())


def _math_names() -> tuple[frozenset[str], frozenset[str]]:
    """(names `std::` may qualify, names `::` may qualify): CUDA's math functions and min/max, as the
    prelude declares them. `abs` stays qualified: `std::abs(float)` is not the prelude's `int abs(int)`."""
    from gpgpu_opt.frontend import cuda_c
    from gpgpu_opt.frontend.math_api import CMATH_NAMES

    std = {n for n in CMATH_NAMES if not n.startswith("_")} | {"fma", "fmaf", "min", "max"}
    return frozenset(std), frozenset((std | set(cuda_c.PRELUDE_NAMES)) - {"abs"})


@dataclass(frozen=True)
class Unsupported:
    """A C++ construct without a C meaning here; `row` counts lines from the function's first."""
    construct: str
    row: int


@dataclass(frozen=True)
class Lowering:
    text: str                          # the function as C (the input itself when nothing was C++)
    unsupported: Unsupported | None    # why the function must pass through, if it must
    changed: bool                      # did a C++ spelling become C?


class _Refused(Exception):
    def __init__(self, construct: str, node: Node):
        super().__init__(construct)
        self.unsupported = Unsupported(construct, node.start_point.row)


def to_bytes(text: str) -> bytes:
    """The text as the parser reads it; bytes that were not UTF-8 (read as surrogates) come back as they were."""
    return text.encode(errors="surrogateescape")


def parse_cxx(text: str) -> tree_sitter.Tree:
    return tree_sitter.Parser(_LANGUAGE).parse(to_bytes(text))


_GROUPS_ALIAS = re.compile(r"\bnamespace\s+(\w+)\s*=\s*(?:::\s*)?cooperative_groups\s*;")


def cooperative_groups_names(file_text: str) -> frozenset[str]:
    """The names the file gives the `cooperative_groups` namespace (itself and `namespace cg = ...;`)."""
    return frozenset({"cooperative_groups", *_GROUPS_ALIAS.findall(file_text)})


def lower_function(text: str, groups: frozenset[str] = frozenset({"cooperative_groups"}),
                   references: bool = False) -> Lowering | None:
    """The function `text` (one definition, C++ allowed) lowered to C; `groups`: the names of the
    cooperative_groups namespace; `references`: lower its lvalue reference parameters to value parameters
    (see the module doc). None when the parser could not read it (an ERROR node): the caller then
    decides as it did without a syntax tree."""
    tree = parse_cxx(text)
    if tree.root_node.has_error:
        return None
    lowerer = _Lowerer(to_bytes(text), tree.root_node, groups, references)
    try:
        lowered = lowerer.render(tree.root_node)
    except _Refused as refused:
        return Lowering(text, refused.unsupported, False)
    return Lowering(lowered, None, lowered != text)


def reference_parameters(text: str) -> tuple[str, ...]:
    """The names of the lvalue reference parameters (`float& d`, `const float3 &v`) of the function `text`."""
    tree = parse_cxx(text)
    source = to_bytes(text)
    return tuple(source[p.start_byte:p.end_byte].decode(errors="surrogateescape")
                 for p in map(_reference_parameter_name, _parameters(tree.root_node)) if p is not None)


def _parameters(root: Node) -> list[Node]:
    """The parameter declarations of the function `root` defines (none when it is not one definition)."""
    function = next((c for c in root.named_children if c.type == "function_definition"), None)
    declarator = function.child_by_field_name("declarator") if function is not None else None
    params = declarator.child_by_field_name("parameters") if declarator is not None \
        and declarator.type == "function_declarator" else None
    return [p for p in params.named_children if p.type == "parameter_declaration"] if params is not None else []


def _reference_parameter_name(param: Node) -> Node | None:
    """The name of the parameter `param` when it is `T& name` (an lvalue reference to a named parameter)."""
    declarator = param.child_by_field_name("declarator")
    if declarator is None or declarator.type != "reference_declarator" or len(declarator.children) != 2:
        return None
    amp, name = declarator.children
    return name if amp.type == "&" and name.type == "identifier" else None


class _Lowerer:
    def __init__(self, source: bytes, root: Node, groups: frozenset[str], references: bool = False):
        self.source = source
        self.groups = groups
        #: the reference declarators of the parameters to lower (when asked to)
        self.references = {p.child_by_field_name("declarator").start_byte for p in _parameters(root)
                           if _reference_parameter_name(p) is not None} if references else set()
        self.blocks: set[str] = set()  # cooperative-groups handles of the thread block
        self.std_names, self.global_names = _math_names()
        self.types = ExpressionTypes(self.text_of)
        self.types.declare_function(root)

    def text_of(self, node: Node) -> str:
        return self.source[node.start_byte:node.end_byte].decode(errors="surrogateescape")

    def render(self, node: Node) -> str:
        """The node's text with its C++ children lowered (the text between children kept as written)."""
        special = self._lowered(node)
        if special is not None:
            return special
        if node.is_named and node.type not in C_NODE_TYPES:
            raise _Refused(self._construct(node), node)
        if not node.is_named and node.type in _CXX_KEYWORDS:  # `if constexpr`, `noexcept` in a C node
            raise _Refused(f"{node.parent.type.split('_')[0]} {node.type}" if node.type == "constexpr" else node.type,
                           node)
        if not node.children:
            return self.text_of(node)
        out, at = [], node.start_byte
        for child in node.children:
            out.append(self.source[at:child.start_byte].decode(errors="surrogateescape"))
            out.append(self.render(child))
            at = child.end_byte
        out.append(self.source[at:node.end_byte].decode(errors="surrogateescape"))
        return "".join(out)

    # -- the rewrites ------------------------------------------------------------------------------------

    def _lowered(self, node: Node) -> str | None:
        kind = node.type
        if kind == "reference_declarator" and node.start_byte in self.references:
            return " " + self.text_of(node)[1:]   # `&d` -> ` d`
        if kind == "call_expression":
            return self._block_sync(node) or self._cast_call(node)
        if kind == "declaration" and self._block_declaration(node):
            return _blank(self.text_of(node))
        if kind == "identifier" and self.text_of(node) in self.blocks:
            raise _Refused(f"the thread block '{self.text_of(node)}' used other than to synchronize", node)
        if kind == "null" and self.text_of(node) == "nullptr":
            return "0"
        if kind == "type_qualifier" and self.text_of(node) == "constexpr":
            if not _is_local_declaration(node.parent):
                raise _Refused("constexpr function", node)
            return "const    "  # as wide as `constexpr`
        if kind == "qualified_identifier":
            return self._unqualified(node)
        if kind == "attribute_declaration":
            return _blank(self.text_of(node))
        if kind == "declaration" and any(c.type == "placeholder_type_specifier" for c in node.children):
            return self._auto_declaration(node)
        return None

    def _cast_call(self, call: Node) -> str | None:
        function, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        if function is None or args is None:
            return None
        values = [a for a in args.named_children if a.type != "comment"]
        if function.type == "template_function":
            name = function.child_by_field_name("name")
            if name is None or self.text_of(name) not in _CXX_CASTS:
                return None  # refused as a template function
            type_args = function.child_by_field_name("arguments").named_children
            if len(type_args) != 1 or type_args[0].type != "type_descriptor" or len(values) != 1:
                raise _Refused(f"{self.text_of(name)} of this form", call)
            return f"(({self.render(type_args[0])}){self.render(args)})"
        if function.type in ("primitive_type", "sized_type_specifier"):
            if len(values) != 1:
                raise _Refused(f"functional cast with {len(values)} arguments", call)
            return f"(({self.text_of(function)}){self.render(args)})"
        return None

    def _groups_name(self, node: Node | None, name: str) -> bool:
        """Is `node` the qualified name `<cooperative_groups>::name`?"""
        if node is None or node.type != "qualified_identifier":
            return False
        scope = node.child_by_field_name("scope")
        named = node.child_by_field_name("name")
        return scope is not None and named is not None and self.text_of(scope) in self.groups and \
            self.text_of(named) == name

    def _block_declaration(self, declaration: Node) -> bool:
        """`cg::thread_block b = cg::this_thread_block();` (then `b` names the block)."""
        declarators = declaration.children_by_field_name("declarator")
        if not self._groups_name(declaration.child_by_field_name("type"), "thread_block") or \
                len(declarators) != 1 or declarators[0].type != "init_declarator" or \
                any(c.type in ("type_qualifier", "storage_class_specifier") for c in declaration.children):
            return False
        name, value = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("value")
        if name is None or name.type != "identifier" or value is None or value.type != "call_expression" or \
                not self._groups_name(value.child_by_field_name("function"), "this_thread_block") or \
                value.child_by_field_name("arguments").named_children:
            return False
        self.blocks.add(self.text_of(name))
        return True

    def _block_sync(self, call: Node) -> str | None:
        """`cg::sync(b)` or `b.sync()` of the thread block: `__syncthreads()`."""
        function, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        values = [a for a in args.named_children if a.type != "comment"] if args is not None else None
        if self._groups_name(function, "sync") and values is not None and len(values) == 1 and \
                values[0].type == "identifier" and self.text_of(values[0]) in self.blocks:
            return "__syncthreads()"
        if function is not None and function.type == "field_expression" and values == [] and \
                self.text_of(function.child_by_field_name("operator")) == "." and \
                self.text_of(function.child_by_field_name("field")) == "sync" and \
                self.text_of(function.child_by_field_name("argument")) in self.blocks:
            return "__syncthreads()"
        return None

    def _unqualified(self, node: Node) -> str:
        scope, name = node.child_by_field_name("scope"), node.child_by_field_name("name")
        spelled = self.text_of(node)
        if name is None or name.type != "identifier":
            raise _Refused(f"qualified name '{spelled}'", node)
        allowed = self.global_names if scope is None else \
            self.std_names if scope.type == "namespace_identifier" and self.text_of(scope) == "std" else ()
        if self.text_of(name) not in allowed:
            raise _Refused(f"qualified name '{spelled}'", node)
        return self.text_of(name)

    def _auto_declaration(self, declaration: Node) -> str:
        """`auto x = init;` with the type of init, where that is certain."""
        declarators = declaration.children_by_field_name("declarator")
        auto = next(c for c in declaration.children if c.type == "placeholder_type_specifier")
        if len(declarators) != 1 or declarators[0].type != "init_declarator" or \
                self.text_of(auto) != "auto":
            raise _Refused("auto", auto)
        name = declarators[0].child_by_field_name("declarator")
        value = declarators[0].child_by_field_name("value")
        if name is None or name.type != "identifier" or value is None:
            raise _Refused("auto", auto)
        self.render(value)  # refuses what the value holds of C++ (a lambda) by its name
        found = self.types.of(value)
        if found is None:
            raise _Refused(f"auto (the type of '{_one_line(self.text_of(value))}' is not certain here)", auto)
        self.types.declare(self.text_of(name), found, declaration)
        out, at = [], declaration.start_byte
        for child in declaration.children:
            out.append(self.source[at:child.start_byte].decode(errors="surrogateescape"))
            out.append(found if child == auto else self.render(child))
            at = child.end_byte
        return "".join(out)

    def _construct(self, node: Node) -> str:
        if node.type in ("template_function", "template_type", "template_method"):
            return f"template '{_one_line(self.text_of(node))}'"
        return _CONSTRUCT_NAMES.get(node.type, node.type.replace("_", " "))


def _is_local_declaration(node: Node | None) -> bool:
    return node is not None and node.type == "declaration" and node.parent is not None \
        and node.parent.type in ("compound_statement", "for_statement")


def _blank(text: str) -> str:
    """Spaces for `text`, its line breaks kept."""
    return re.sub(r"[^\n]", " ", text)


def _one_line(text: str) -> str:
    return " ".join(text.split())
