"""Helpers several passes share to rewrite kernels: the C-building kit (`cbuild`: `Unsupported`, small c_ast
constructors, parsing and printing code fragments), staged shared-memory tiles (`tiles`), the guards and
thread spaces of a kernel (`guards`), the per-kernel facts a rewriting reads (`kernel_info`), and another
thread's view of an expression (`witness`)."""
