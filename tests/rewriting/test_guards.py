"""rewriting/guards.py alone: negating and splitting conditions, purity, early returns, where an access sits
(frames), which declarations move out of a guard and how, and the Sinker that makes the statements on the
way to a staged loop block-uniform (the module docstring's example, checked as text)."""
import pytest
from pycparser import c_ast

from gpgpu_opt.ast_util import ids_in, walk
from gpgpu_opt.rewriting import guards
from gpgpu_opt.rewriting.cbuild import Unsupported, parse_expr, parse_statements, text

THREAD_DEPENDENT = {"row", "col", "threadIdx"}


def _uniform(expr) -> bool:
    return not (ids_in(expr) & THREAD_DEPENDENT)


def _body(source: str) -> c_ast.Compound:
    return c_ast.Compound(parse_statements(source))


def _lines(stmts) -> list[str]:
    """The statements as the generator writes them in a block (a bare statement has no ';'), one a line."""
    lines = [line.strip() for line in text(c_ast.Compound(list(stmts))).splitlines() if line.strip()]
    assert lines[0] == "{" and lines[-1] == "}"
    return lines[1:-1]


@pytest.mark.parametrize("cond, negated", [
    ("x < n", "x >= n"),
    ("x == 0", "x != 0"),
    ("x < n && y >= m", "x >= n || y < m"),
    ("x < n || !(y > m)", "x >= n && y > m"),
    ("!done", "done"),
    ("flag", "!flag"),
])
def test_negate_writes_the_negation_as_a_person_would(cond, negated):
    original = parse_expr(cond)
    before = text(original)
    assert text(guards.negate(original)) == negated
    assert text(original) == before          # the input is not modified


def test_clauses_split_conjunctions_only():
    assert [text(c) for c in guards.clauses(parse_expr("a < n && (b < m && c) && d"))] == ["a < n", "b < m", "c", "d"]
    assert [text(c) for c in guards.clauses(parse_expr("a < n || b < m"))] == ["a < n || b < m"]


@pytest.mark.parametrize("expr, pure, pure_with_memory", [
    ("x + 1 < n", True, True),
    ("A[i] > 0", False, True),
    ("*p > 0", False, True),
    ("f(x) > 0", False, False),
    ("(x = 3) > 0", False, False),
    ("x++ < n", False, False),
])
def test_is_pure(expr, pure, pure_with_memory):
    node = parse_expr(expr)
    assert guards.is_pure(node) is pure
    assert guards.is_pure(node, allow_memory=True) is pure_with_memory


def test_an_early_return_becomes_a_guard_around_the_rest():
    body = _body("int i = threadIdx.x; if (i >= n) return; out[i] = 1; if (i == 0) return; out[0] = 2;")
    assert guards.normalize_early_returns(body)
    assert _lines(body.block_items) == ["int i = threadIdx.x;", "if (i < n)", "{", "out[i] = 1;",
                                        "if (i != 0)", "{", "out[0] = 2;", "}", "}"]


def test_an_early_return_with_a_value_or_an_impure_test_stays():
    body = _body("int i = threadIdx.x; if (f(i)) return; out[i] = 1;")
    assert not guards.normalize_early_returns(body)
    assert len(body.block_items) == 3


def test_has_jumps_and_items():
    assert guards.has_jumps(_body("for (;;) { if (x) break; }"))
    assert not guards.has_jumps(_body("for (int k = 0; k < n; k++) s += k;"))
    (single,) = parse_statements("s += 1;")
    assert guards.items(None) == [] and guards.items(single) == [single]
    assert len(guards.items(_body("a = 1; b = 2;"))) == 2


def _find(root, kind, predicate=lambda n: True):
    return next(n for n in walk(root) if isinstance(n, kind) and predicate(n))


def test_frames_name_each_enclosing_statement_and_the_else_condition_is_negated():
    body = _body("if (x < n) { for (int k = 0; k < m; k++) { s += A[k]; } } else { t = B[x]; }")
    parents = guards.parents_of(body)
    a_read = _find(body, c_ast.ArrayRef, lambda n: n.name.name == "A")
    assert [f.kind for f in guards.frames_to(a_read, parents, body)] == ["if", "block", "for", "block"]
    b_read = _find(body, c_ast.ArrayRef, lambda n: n.name.name == "B")
    frames = guards.frames_to(b_read, parents, body)
    assert [f.kind for f in frames] == ["else", "block"]
    assert text(guards.frame_condition(frames[0])) == "x >= n" and guards.frame_condition(frames[1]) is None


@pytest.mark.parametrize("source, why", [
    ("s = (x < n) ? A[x] : 0;", "inside \\?:"),
    ("s = x < n && A[x] > 0;", "right of &&"),
    ("while (x < n) s += A[x];", "while statement"),
    ("for (int k = A[0]; k < n; k++) s += k;", "loop header"),
])
def test_frames_refuse_an_access_that_does_not_run_whenever_its_statement_does(source, why):
    body = _body(source)
    access = _find(body, c_ast.ArrayRef)
    with pytest.raises(Unsupported, match=why):
        guards.frames_to(access, guards.parents_of(body), body)


def test_path_to_an_access_outside_the_body_is_refused():
    body, stray = _body("s = 1;"), parse_expr("A[0]")
    with pytest.raises(Unsupported, match="not inside the kernel body"):
        guards.path_to(stray, guards.parents_of(body), body)


def test_loop_var_reads_declared_and_assigned_iterators():
    declared, assigned, other = parse_statements("for (int k = 2; k < n; k++) ; for (j = 0; j < n; j++) ; "
                                                 "for (;;) ;")
    name, start, in_header = guards.loop_var(declared)
    assert (name, text(start), in_header) == ("k", "2", True)
    name, start, in_header = guards.loop_var(assigned)
    assert (name, text(start), in_header) == ("j", "0", False)
    assert guards.loop_var(other) == (None, None, False)


def test_a_declaration_leaves_its_guard_whole_when_its_initializer_is_pure():
    (decl,) = parse_statements("int j = i + 1;")
    assert guards.hoist_declaration(decl) == (decl, None)


def test_a_declaration_that_reads_memory_leaves_its_guard_split_and_loses_const():
    (decl,) = parse_statements("const float v = A[i];")
    bare, assign = guards.hoist_declaration(decl)
    assert text(bare).strip() == "float v" and text(assign) == "v = A[i]"
    (array,) = parse_statements("float w[2] = {A[i], A[i + 1]};")
    with pytest.raises(Unsupported, match="cannot move the declaration of 'w'"):
        guards.hoist_declaration(array)


def test_guarded_wraps_statements_in_the_conjunction_of_the_guards():
    stmts = parse_statements("C[i] = s;")
    wrapped = guards.guarded(stmts, [parse_expr("row < n"), parse_expr("col < n")])
    assert _lines([wrapped]) == ["if (row < n && col < n)", "C[i] = s;"]
    declared = guards.guarded(parse_statements("int t = 1;"), [parse_expr("row < n")])
    assert isinstance(declared.iftrue, c_ast.Compound)     # a declaration alone is not a statement in C


def test_the_sinker_moves_a_thread_dependent_guard_into_the_statements_it_covered():
    """The module docstring's example: the guard around a staged loop sinks into the statements around it
    and into the loop (here a marker saying which guards the loop's staged form was given)."""
    body = _body("if (row < n && col < n) { float sum = 0; for (int k = 0; k < n; k++) sum += A[row * n + k]; "
                 "C[row * n + col] = sum; }")
    guard = body.block_items[0]
    loop = _find(body, c_ast.For)
    given = []

    def staged(guard_conditions):
        given.append([text(g) for g in guard_conditions])
        return parse_statements("staged_loop();")

    sinker = guards.Sinker({id(loop): staged}, {id(guard), id(loop)}, _uniform)
    out = sinker.rewrite(list(body.block_items), [])
    assert given == [["row < n && col < n"]]
    assert _lines(out) == ["float sum = 0;", "staged_loop();", "if (row < n && col < n)", "C[row * n + col] = sum;"]


def test_the_sinker_keeps_a_uniform_if_and_negates_for_the_else_branch():
    body = _body("if (n > 64) { for (int k = 0; k < n; k++) s += A[k]; } "
                 "if (col < n) { t = 1; } else { for (int k = 0; k < n; k++) s += B[k]; }")
    first, second = body.block_items
    loop_a = _find(first, c_ast.For)
    loop_b = _find(second.iffalse, c_ast.For)
    given = {}

    def anchor(name):
        def staged(guard_conditions):
            given[name] = [text(g) for g in guard_conditions]
            return parse_statements(f"{name}();")
        return staged

    sinker = guards.Sinker({id(loop_a): anchor("a"), id(loop_b): anchor("b")},
                           {id(first), id(loop_a), id(second), id(loop_b)}, _uniform)
    out = sinker.rewrite(list(body.block_items), [])
    assert given == {"a": [], "b": ["col >= n"]}
    assert _lines(out) == ["if (n > 64)", "{", "a();", "}", "if (col < n)", "t = 1;", "b();"]


def test_check_sinkable_refuses_a_guard_whose_variables_the_guarded_statements_change():
    body = _body("if (col < n) { for (int k = 0; k < n; k++) s += A[k]; col = 0; }")
    loop = _find(body, c_ast.For)
    path = guards.path_to(loop, guards.parents_of(body), body)
    with pytest.raises(Unsupported, match="variables change inside the guarded statements"):
        guards.check_sinkable(path, _uniform, _uniform, {})
    fine = _body("if (col < n) { for (int k = 0; k < n; k++) s += A[k]; }")
    loop = _find(fine, c_ast.For)
    guards.check_sinkable(guards.path_to(loop, guards.parents_of(fine), fine), _uniform, _uniform, {})


@pytest.mark.parametrize("source, why", [
    ("if (col < n) { t = 1; } else { for (int k = 0; k < n; k++) s += A[k]; }", "else branch"),
    ("if (A[col] > 0) { for (int k = 0; k < n; k++) s += A[k]; }", "side effects or reads memory"),
    ("for (int j = 0; j < col; j++) { for (int k = 0; k < n; k++) s += A[k]; }", "bounds differ"),
    ("while (n > 0) { for (int k = 0; k < n; k++) s += A[k]; }", "while statement"),
])
def test_check_sinkable_refuses_what_cannot_be_made_block_uniform(source, why):
    body = _body(source)
    loop = _find(body, c_ast.For, lambda f: f.init.decls[0].name == "k")
    path = guards.path_to(loop, guards.parents_of(body), body)
    with pytest.raises(Unsupported, match=why):
        guards.check_sinkable(path, _uniform, _uniform, {})
