"""The CUDA front end: preprocessing, scanning the file, parsing kernels into c_ast."""
from gpgpu_opt.frontend.program import Program, load_program, parse_expression

__all__ = ["Program", "load_program", "parse_expression"]
