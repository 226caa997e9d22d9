"""frontend/host_syntax.py: where a name is mentioned outside the parsed identifiers (a preprocessor line,
text the parser could not read). An include directive names a file: `cuda_fp16.h` mentions no `h`."""
from gpgpu_opt.frontend.host_syntax import HostSyntax

HOST = """#include <cuda_fp16.h>
#include "kernels.h" // the kernels
#define LAUNCH_H h
void run(int n) { h<<<1, 1>>>(n); }
"""


def test_an_include_names_a_file_not_an_identifier():
    lines = HostSyntax(HOST).unparsed_mentions("h")
    assert 1 not in lines           # <cuda_fp16.h>
    assert 3 in lines               # a macro that expands to the kernel's name
    assert 2 in lines               # a comment after the directive: not read, so counted (conservative)
