"""tests/nvcc_batch.py: many files in one nvcc run give each file's own result, as a build of it alone would."""
from tests.conftest import requires_nvcc
from tests.nvcc_batch import batch_text, build_device_only

SCALE = """#define FACTOR 2.0f
__global__ void k(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= FACTOR; }
"""
SHIFT = """#define FACTOR 3
__device__ int helper(int v) { return v + FACTOR; }
__global__ void k(int *a) { a[threadIdx.x] = helper(a[threadIdx.x]); }
"""
USES_THE_OTHERS_MACRO = "__global__ void m(float *a) { a[0] = FACTOR; }\n"
USES_THE_OTHERS_HELPER = "__global__ void h(int *a) { a[0] = helper(1); }\n"


def _files(tmp_path, texts):
    paths = []
    for number, text in enumerate(texts):
        path = tmp_path / f"f{number}.cu"
        path.write_text(text)
        paths.append(path)
    return paths


def test_each_file_is_in_a_namespace_of_its_own_and_its_macros_end_with_it(tmp_path):
    a, b = _files(tmp_path, [SCALE, SHIFT])
    text = batch_text([a, b])
    assert text.index("namespace batch_unit_0") < text.index("#undef FACTOR") < text.index("namespace batch_unit_1")
    assert f'#line 1 "{a}"' in text and text.count("#undef FACTOR") == 2


@requires_nvcc
def test_files_with_the_same_names_and_macros_build_together(tmp_path):
    a, b = _files(tmp_path, [SCALE, SHIFT])
    assert build_device_only({a: [], b: [f"-I{tmp_path}"]}, tmp_path) == {a: None, b: None}


@requires_nvcc
def test_a_file_needing_another_files_macro_or_helper_fails_as_it_would_alone(tmp_path):
    good, needs_macro, needs_helper = _files(tmp_path, [SHIFT, USES_THE_OTHERS_MACRO, USES_THE_OTHERS_HELPER])
    results = build_device_only({good: [], needs_macro: [], needs_helper: []}, tmp_path)
    assert results[good] is None
    assert "FACTOR" in results[needs_macro] and str(needs_macro) in results[needs_macro]
    assert "helper" in results[needs_helper]
