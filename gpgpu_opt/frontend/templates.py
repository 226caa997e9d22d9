"""Template kernels, optimized per instantiation the program uses, and every function's C++ lowered.

A template `__global__` function is instantiated by the launch sites that name its arguments
(`k<float, 256><<<g, b>>>(...)`) and by explicit instantiations (`template __global__ void k<float,
256>(float *, int);`). Each instantiation becomes a kernel of its own: the arguments (scalar and vector
types, integer constants) are substituted into the function's text, which is then lowered and parsed like
any kernel. Its name is a C identifier (`k__float_256`), which its launch sites are given too, so that the
passes, launch helpers and notes treat it as an ordinary kernel. An optimized instantiation is written
back as an explicit specialization right after the primary template (`template <> __global__ void
k<float, 256>(...)`), which every use of `k<float, 256>` then calls.

A template passes through, with a note, where that would not be sound or not possible: a launch without
template arguments (which instantiation it deduces is not read here), a use of the name that is neither a
launch, a declaration nor an explicit instantiation (a function pointer, the user's own specialization),
a use before the template's definition (a specialization must come before it), or arguments that are not
plain types and integer constants.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gpgpu_opt.frontend import scanner
from gpgpu_opt.frontend.cuda_c import PRELUDE_NAMES
from gpgpu_opt.frontend.cxx_lowering import Node, cooperative_groups_names, lower_function, parse_cxx, to_bytes
from gpgpu_opt.frontend.cxx_types import INTEGER_TYPES as _INTEGER_TYPES, canonical
from gpgpu_opt.host_expr import evaluate_int
from gpgpu_opt.kernel import TemplateInstance


@dataclass(frozen=True)
class FunctionUnit:
    """A function's text to parse as C (its lines where the user's are) and the instantiation it is; for
    the user's own specialization, where it is in the file as written and preprocessed."""
    text: str
    instance: TemplateInstance | None = None
    definition: scanner.FunctionDefinition | None = None
    pp_definition: scanner.FunctionDefinition | None = None


@dataclass
class Units:
    units: list[FunctionUnit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # why something passed through


@dataclass(frozen=True)
class _Use:
    """Template arguments written at a launch site or an explicit instantiation."""
    args: list[str]
    line: int
    start: int
    site: scanner.LaunchSite | None = None


class TemplateUses:
    """How the file's text (as written) uses each name: launches, explicit instantiations, other mentions."""

    def __init__(self, text: str, tokens: list[scanner.Token], launch_sites: list[scanner.LaunchSite],
                 macros: dict[str, str], expanded: str):
        self.text, self.tokens, self.sites = text, tokens, launch_sites
        # what an integer template argument may name: macros, and the integer constants the program declares
        self.macros = {**_integer_constants(expanded), **macros}
        self.expanded = expanded
        self.groups = cooperative_groups_names(text)
        self._declarations = _template_statements(tokens)
        self._specializations = _specializations(tokens)
        self._pp_specializations = _specializations(scanner.tokenize(expanded))

    def specializations(self, name: str) -> list[tuple[_Specialization, _Specialization]] | str:
        """The user's explicit specializations `template <> __global__ ... name<args>(...) {...}`, each as
        written and preprocessed; or why they cannot be paired (an #if keeps some of them out)."""
        written = [s for s in self._specializations if s.definition.name == name]
        expanded = [s for s in self._pp_specializations if s.definition.name == name]
        if len(written) != len(expanded):
            return "has specializations the preprocessor keeps out"
        return list(zip(written, expanded))

    def uses(self, name: str, definition: scanner.FunctionDefinition) -> tuple[list[_Use], list[str]]:
        """The instantiating uses of template `name`, and why it cannot be instantiated (empty: it can)."""
        uses, problems = [], []
        at_sites = set()
        for site in self.sites:
            if site.kernel != name:
                continue
            at_sites.add(site.start)
            if site.template_args is None:
                problems.append(f"is a template launched at line {site.line} without template arguments "
                                f"(deduced)")
            else:
                uses.append(_Use(site.template_args, site.line, site.start, site))
        for start, end, explicit in self._declarations:
            args = _explicit_arguments(self.tokens, start, end, name) if explicit else None
            if args is not None:
                uses.append(_Use(args, self.tokens[start].line, self.tokens[start].start))
        for tok in self.tokens:
            if tok.kind != "ident" or tok.text != name or tok.start in at_sites or \
                    definition.start <= tok.start < definition.end:
                continue
            if any(spec.definition.start <= tok.start < spec.definition.end for spec in self._specializations):
                continue  # the user's own specialization: an instantiation of its own
            if not any(self.tokens[s].start <= tok.start < self.tokens[e].end for s, e, _ in self._declarations):
                problems.append(f"is a template named at line {tok.line} other than in a launch, a declaration "
                                f"or an explicit instantiation")
        return uses, problems[:1]


_CONSTANT = re.compile(r"\b(?:static\s+)?(?:const|constexpr)\s+(?:(?:unsigned|signed|long|short|int|size_t)\s+)*"
                       r"(?:int|long|short|size_t|unsigned)\s+([A-Za-z_]\w*)\s*=\s*([^;,{}()]+|\([^;{}]*\))\s*;")
_DECLARED = re.compile(r"\b(?:int|long|short|size_t|unsigned|auto|float|double|char|bool)\s+\**\s*([A-Za-z_]\w*)")


def _integer_constants(expanded: str) -> dict[str, str]:
    """Names declared once in the program, as an integer constant (`const int BLOCK = 256;`, in a host function
    too), with their initializers: a template argument is a constant expression, so where `k<BLOCK>` names
    such a name it names that constant. A name declared more than once (another function's own) is left out."""
    declared: dict[str, int] = {}
    for m in _DECLARED.finditer(expanded):
        declared[m.group(1)] = declared.get(m.group(1), 0) + 1
    return {m.group(1): m.group(2).strip() for m in _CONSTANT.finditer(expanded) if declared.get(m.group(1)) == 1}


def _template_statements(tokens: list[scanner.Token]) -> list[tuple[int, int, bool]]:
    """(first, last token, explicit instantiation?) of each `template ...;` statement that defines nothing:
    explicit instantiations `template void k<float>(float *);` (also `extern template`) and declarations
    `template <typename T> __global__ void k(T *);`. A `template <>` specialization is not one of them."""
    found = []
    for i, tok in enumerate(tokens):
        if tok.text != "template" or i + 1 >= len(tokens):
            continue
        explicit = tokens[i + 1].text != "<"
        if not explicit and i + 2 < len(tokens) and tokens[i + 2].text == ">":
            continue  # template <>: an explicit specialization
        end = i + 1
        while end < len(tokens) and tokens[end].text not in (";", "{", "}"):
            end += 1
        if end < len(tokens) and tokens[end].text == ";":
            start = i - 1 if explicit and i and tokens[i - 1].text == "extern" else i
            found.append((start, end, explicit and start == i))
    return found


@dataclass(frozen=True)
class _Specialization:
    definition: scanner.FunctionDefinition   # named by the template, spanning `template <> ... }`
    args: list[str]


def _specializations(tokens: list[scanner.Token]) -> list[_Specialization]:
    """Each definition `template <> ... __global__ ... name<args>(...) {...}` in `tokens`."""
    found = []
    for i in range(len(tokens) - 3):
        if [t.text for t in tokens[i:i + 3]] != ["template", "<", ">"]:
            continue
        j, name_at = i + 3, None
        while j < len(tokens) and tokens[j].text not in ("{", ";"):
            if tokens[j].text == "<" and tokens[j - 1].kind == "ident" and name_at is None:
                close = scanner.matching(tokens, j, "<", ">")
                if close != -1 and close + 1 < len(tokens) and tokens[close + 1].text == "(":
                    name_at, args_close = j - 1, close
            j += 1
        words = {t.text for t in tokens[i:j]}
        if j >= len(tokens) or tokens[j].text != "{" or name_at is None or "__global__" not in words:
            continue
        end = scanner.matching(tokens, j, "{", "}")
        if end == -1:
            continue
        first = tokens[i]
        definition = scanner.FunctionDefinition(tokens[name_at].text, frozenset({"__global__"}), first.start,
                                                tokens[j].start, tokens[end].end, first.line, first.column)
        args = [] if args_close == name_at + 2 else _split(tokens, name_at + 2, args_close)
        found.append(_Specialization(definition, args))
    return found


def _explicit_arguments(tokens: list[scanner.Token], start: int, end: int, name: str) -> list[str] | None:
    for k in range(start, end):
        if tokens[k].text == name and k + 1 < end and tokens[k + 1].text == "<":
            close = scanner.matching(tokens[:end], k + 1, "<", ">")
            if close == -1:
                return None
            return [] if close == k + 2 else _split(tokens, k + 2, close)
    return None


def _split(tokens: list[scanner.Token], first: int, close: int) -> list[str]:
    parts, depth, current = [], 0, []
    for tok in tokens[first:close]:
        depth += tok.text in ("(", "[", "{", "<")
        depth -= tok.text in (")", "]", "}", ">")
        if tok.text == "," and depth == 0:
            parts.append(" ".join(current))
            current = []
        else:
            current.append(tok.text)
    parts.append(" ".join(current))
    return parts


# -- one function's units ------------------------------------------------------------------------------


def function_units(definition: scanner.FunctionDefinition, text: str, uses: TemplateUses) -> Units:
    """The C texts to parse for the function `text` (its preprocessed definition): one for a function,
    one per instantiation for a template kernel; and a note for each that passes through."""
    if re.match(r"\s*template\b", text):
        return _template_units(definition, text, uses)
    lowered = _lower(definition, text, uses.groups)
    if _refused(lowered):
        return Units(notes=[f"'{definition.name}' {lowered}; passed through unchanged"])
    return Units([FunctionUnit(lowered)])


def _lower(definition: scanner.FunctionDefinition, text: str, groups: frozenset[str]) -> str:
    """The lowered text, or (a str too, told apart by `_Refusal`) why the function passes through."""
    lowering = lower_function(text, groups, references=not definition.is_kernel)  # helpers: frontend.inline
    if lowering is None:  # the C++ grammar could not read it: pycparser may (a macro it cannot see)
        if definition.cxx_constructs:
            return _Refusal(f"uses C++ ({', '.join(definition.cxx_constructs)})")
        return text
    if lowering.unsupported is not None:
        u = lowering.unsupported
        return _Refusal(f"uses C++ ({u.construct}, line {definition.line + u.row})")
    return lowering.text


class _Refusal(str):
    """Why a function passes through (a str, as the lowered text is)."""


def _refused(result: str) -> bool:
    return isinstance(result, _Refusal)


@dataclass(frozen=True)
class _Parameter:
    name: str
    is_type: bool
    default: str | None
    type: str | None = None     # a value parameter's integer type, canonical (`unsigned int N`)


def _template_units(definition: scanner.FunctionDefinition, text: str, uses: TemplateUses) -> Units:
    name = definition.name
    if not definition.is_kernel:
        return Units(notes=[f"'{name}' is a template __device__ function; passed through unchanged"])
    parsed = _template_parameters(text)
    if isinstance(parsed, str):
        return Units(notes=[f"'{name}' is a template with {parsed}; passed through unchanged"])
    parameters, function = parsed
    found, problems = uses.uses(name, definition)
    specializations = _written_specializations(name, parameters, uses)
    if isinstance(specializations, str):
        problems.append(specializations)
    if problems:
        return Units(notes=[f"'{name}' {problems[0]}; passed through unchanged"])
    found += [_Use(spec.args, spec.definition.line, spec.definition.start) for spec, _ in specializations.values()]
    if not found:
        return Units(notes=[f"'{name}' is a template that no launch or explicit instantiation of this file "
                            f"instantiates; passed through unchanged"])
    result, done, unread = Units(), {}, set()
    for use in found:
        args = _arguments(parameters, use.args, uses.macros)
        if isinstance(args, str):
            if tuple(use.args) not in unread:  # one note for arguments written alike at several launches
                unread.add(tuple(use.args))
                result.notes.append(f"'{name}<{', '.join(use.args)}>' (line {use.line}): {args}; passed through")
            continue
        instance = _instance(name, args)
        if instance not in done:
            done[instance] = _instance_unit(instance, definition, text, function, parameters, args, uses,
                                            specializations.get(instance), use, result.notes)
            if done[instance] is not None:
                result.units.append(done[instance])
        if use.site is not None and done[instance] is not None:
            use.site.kernel = instance.identifier
    return result


def _instance_unit(instance: TemplateInstance, definition, text, function, parameters, args, uses: TemplateUses,
                   specialization, use: _Use, notes: list[str]) -> FunctionUnit | None:
    """The unit of one instantiation: the user's specialization of it if there is one, else the template
    with its arguments; None (and a note) where it passes through."""
    if specialization is not None:
        written, expanded = specialization
        spec_text = uses.expanded[expanded.definition.start:expanded.definition.end]
        spec_function = _template_parameters(spec_text)
        if isinstance(spec_function, str):
            notes.append(f"'{instance.spelled}' (line {written.definition.line}) is a specialization with "
                         f"{spec_function}; passed through unchanged")
            return None
        lowered = _lower(written.definition, _substituted(spec_text, spec_function[1], [], [], instance), uses.groups)
        instance = replace(instance, written=True)
        unit = FunctionUnit(lowered, instance, written.definition, expanded.definition)
    elif use.start < definition.end:
        notes.append(f"'{instance.spelled}' is used at line {use.line}, before the template's definition, where "
                     f"no specialization can follow it; passed through")
        return None
    else:
        lowered = _lower(definition, _substituted(text, function, parameters, args, instance), uses.groups)
        unit = FunctionUnit(lowered, instance)
    if _refused(lowered):
        notes.append(f"'{instance.spelled}' {lowered}; passed through unchanged")
        return None
    return unit


def _written_specializations(name: str, parameters: list[_Parameter], uses: TemplateUses) -> dict | str:
    """The user's specializations of template `name`, by the instantiation they are."""
    pairs = uses.specializations(name)
    if isinstance(pairs, str):
        return pairs
    found = {}
    for written, expanded in pairs:
        args = _arguments(parameters, written.args, uses.macros)
        if isinstance(args, str):
            return f"has a specialization at line {written.definition.line} whose arguments are not read ({args})"
        found[_instance(name, args)] = (written, expanded)
    return found


def _template_parameters(text: str) -> tuple[list[_Parameter], Node] | str:
    """The template's parameters and its function_definition node, or what it has that is not read."""
    tree = parse_cxx(text)
    declaration = next((c for c in tree.root_node.named_children if c.type == "template_declaration"), None)
    if tree.root_node.has_error or declaration is None:
        return "a declaration the C++ grammar cannot read"
    function = next((c for c in declaration.named_children if c.type == "function_definition"), None)
    parameter_list = declaration.child_by_field_name("parameters")
    if function is None or parameter_list is None:
        return "no function definition"
    source = to_bytes(text)

    def text_of(node: Node | None) -> str | None:
        return None if node is None else source[node.start_byte:node.end_byte].decode(errors="surrogateescape")

    parameters = []
    for p in parameter_list.named_children:
        if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
            ident = next((c for c in p.named_children if c.type == "type_identifier"), None)
            if ident is None:
                return "an unnamed type parameter"
            parameters.append(_Parameter(text_of(ident), True, text_of(p.child_by_field_name("default_type"))))
        elif p.type in ("parameter_declaration", "optional_parameter_declaration"):
            declarator = p.child_by_field_name("declarator")
            type_ = canonical(text_of(p.child_by_field_name("type")) or "")
            if declarator is None or declarator.type != "identifier" or type_ not in _INTEGER_TYPES:
                return f"the parameter '{text_of(p)}'"
            parameters.append(_Parameter(text_of(declarator), False, text_of(p.child_by_field_name("default_value")),
                                         type_))
        elif p.type != "comment":
            return f"the parameter '{text_of(p)}'"
    return parameters, function


_VECTOR_TYPES = frozenset(n for n in PRELUDE_NAMES
                          if re.fullmatch(r"u?(float|double|int|uint|char|uchar|short)[234]", n))


def _arguments(parameters: list[_Parameter], written: list[str], macros: dict[str, str]) -> list[str] | str:
    """Each parameter's argument (a canonical type, or an integer), or why the arguments are not read."""
    if len(written) > len(parameters):
        return f"{len(written)} template arguments for {len(parameters)} parameters"
    args = []
    for k, parameter in enumerate(parameters):
        arg = written[k] if k < len(written) else parameter.default
        if arg is None:
            return f"no argument for '{parameter.name}'"
        if parameter.is_type:
            spelled = _expanded(arg, macros)
            type_ = canonical(spelled) or (spelled if spelled in _VECTOR_TYPES else None)
            if type_ is None or "const" in spelled.split():
                return f"the type argument '{arg}' is not a scalar or vector type"
            args.append(type_)
        else:
            value = evaluate_int(arg, macros)
            if value is None:
                return f"the argument '{arg}' of '{parameter.name}' is not an integer constant"
            args.append(str(value))
    return args


def _expanded(arg: str, macros: dict[str, str]) -> str:
    """A type argument with object-like macros expanded (`REAL` -> `float`)."""
    spelled = " ".join(arg.split())
    for _ in range(16):
        words = [macros.get(w, w) for w in spelled.split()]
        new = " ".join(" ".join(words).split())
        if new == spelled:
            break
        spelled = new
    return spelled


def _instance(name: str, args: list[str]) -> TemplateInstance:
    tag = "_".join(re.sub(r"\W+", "_", a.replace("-", "m")) for a in args)
    return TemplateInstance(name, tuple(args), f"{name}__{tag}")


def _called(node: Node) -> bool:
    parent = node.parent
    return parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node


def _substituted(text: str, function: Node, parameters: list[_Parameter], args: list[str],
                 instance: TemplateInstance) -> str:
    """The template's text as the instantiation: the `template <...>` header blanked (its lines kept), each
    parameter replaced by its argument, and the function named by the instance's identifier."""
    source = to_bytes(text)
    # a value is a constant of its parameter's type: `i - N` with `unsigned int N` is unsigned arithmetic
    values = {p.name: (a if p.is_type else f"(({p.type}){a})") for p, a in zip(parameters, args)}
    types = {p.name for p in parameters if p.is_type}
    edits = [(0, function.start_byte, re.sub(rb"[^\n]", b" ", source[:function.start_byte]))]
    declarator = function.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    own_name = declarator.child_by_field_name("declarator") if declarator is not None else None
    stack = [function]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        spelled = source[node.start_byte:node.end_byte].decode(errors="surrogateescape")
        if node == own_name:
            edits.append((node.start_byte, node.end_byte, instance.identifier.encode()))
        elif node.type in ("identifier", "type_identifier") and spelled in values:
            value = values[spelled]
            if spelled in types and _called(node):  # `T(x)`, a functional cast: `(unsigned int)(x)`, C's
                value = f"({value})"
            edits.append((node.start_byte, node.end_byte, value.encode()))
    for start, end, new in sorted(edits, reverse=True):
        source = source[:start] + new + source[end:]
    return source.decode(errors="surrogateescape")


# -- writing instantiations back ------------------------------------------------------------------------


def specialization_edits(results, kernel_text) -> list[tuple[int, int, str]]:
    """For each template with transformed instantiations: their explicit specializations, inserted right
    after the primary template (or in place of the user's specialization of that instantiation).
    `kernel_text(result)` prints a kernel (pipeline's printer)."""
    by_template: dict[tuple[int, int], list[str]] = {}
    edits = []
    for result in results:
        instance = result.naive.instance
        if instance is None or not result.transformed:
            continue  # an instantiation nothing changed is the primary template's (or the user's), as written
        printed = _specialization(kernel_text(_with_primary_signature(result)), instance)
        if instance.written:  # the user's own specialization, replaced where it is
            edits.append((*result.naive.source_span, printed))
        else:
            by_template.setdefault(result.naive.source_span, []).append(printed)
    return edits + [(end, end, "".join(f"\n\n{text}" for text in texts)) for (_, end), texts in by_template.items()]


def _specialization(printed: str, instance: TemplateInstance) -> str:
    """`template <> __global__ ... k<float, 256>(...)` from the kernel printed under its identifier."""
    name = re.search(rf"\b{re.escape(instance.identifier)}\s*\(", printed)
    qualifier = re.search(r"^(?!#).*?\b__global__\b", printed, re.M)
    if name is None or qualifier is None or qualifier.start() > name.start():
        raise ValueError(f"cannot find the declaration of '{instance.identifier}' in its printed text")
    printed = printed[:name.start()] + f"{instance.spelled}(" + printed[name.end():]
    line_start = printed.rfind("\n", 0, qualifier.start()) + 1
    return printed[:line_start] + "template <> " + printed[line_start:]


def _with_primary_signature(result):
    """The result, its kernel's parameters declared as the naive instantiation's (the primary template's after
    substitution): a specialization must match the primary template, and nvcc's host stubs for it need the
    same qualifiers too (`__restrict__` included). A pass may have made a read-only pointee `const` or a
    pointer `__restrict__` (what the program's launches proved); dropping that changes no result."""
    import copy
    from dataclasses import replace

    optimized = result.optimized.copy()
    naive_args = result.naive.funcdef.decl.type.args
    args = optimized.funcdef.decl.type.args
    if naive_args is not None and args is not None and \
            [p.name for p in naive_args.params] == [p.name for p in args.params]:
        args.params = copy.deepcopy(naive_args.params)
    return replace(result, optimized=optimized)
