"""The tidy step (rewriting/tidy.py): single-use register copies substituted, guard clauses an enclosing `if`
or loop already implies folded, and what must stay as written."""
from __future__ import annotations

from gpgpu_opt.codegen import kernel_source
from gpgpu_opt.frontend.cuda_c import parse_c
from gpgpu_opt.rewriting.tidy import tidy


def tidied(body: str, params: str = "const float *A, float *C, int n") -> str:
    func = parse_c(f"void k({params}) {{\n{body}\n}}", "<t>").ext[-1]
    tidy(func)
    return kernel_source(func)


def test_a_single_use_copy_of_a_register_reads_the_register():
    text = tidied("float a[4]; float s = 0.0f; for (int r = 0; r < 4; r++) { a[r] = A[r];\n"
                  "const float a_val = a[r]; s += a_val * 2.0f; } C[0] = s;")
    assert "s += a[r] * 2.0f;" in text and "a_val" not in text


def test_a_copy_stays_where_it_converts_is_used_twice_or_reads_memory():
    converting = tidied("double a[2]; a[0] = A[0]; a[1] = A[1]; const float x = a[1]; C[0] = x;")
    assert "const float x = a[1];" in converting
    twice = tidied("float a[2]; a[0] = A[0]; a[1] = A[1]; const float x = a[1]; C[0] = x * x;")
    assert "const float x = a[1];" in twice
    memory = tidied("const float x = A[1]; C[0] = x;")
    assert "const float x = A[1];" in memory     # a load from global memory keeps its place
    written = tidied("float a[2]; a[0] = A[0]; a[1] = A[1]; const float x = a[1]; a[1] = 0.0f; C[0] = x;")
    assert "const float x = a[1];" in written


def test_a_clause_an_enclosing_if_or_loop_implies_is_folded():
    text = tidied("if (0 < n) { const int i = threadIdx.x; const int ok = i < n && 0 < n; C[i] = ok; }")
    assert "const int ok = i < n;" in text
    loop = tidied("for (int k = 0; k < n; k += 16) { const int i = threadIdx.x + k; const int ok = i < n && 0 < n;"
                  " C[i] = ok; }")
    assert "const int ok = i < n;" in loop


def test_a_clause_over_a_local_is_not_a_known_fact():
    text = tidied("int m = n; if (0 < m) { m = 0; const int ok = threadIdx.x < n && 0 < m; C[0] = ok; }")
    assert "threadIdx.x < n && 0 < m" in text
