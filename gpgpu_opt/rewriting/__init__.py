"""Helpers several passes share to rewrite kernels: parsing and printing code fragments (`staging`),
the guards and thread spaces of a kernel (`guards`), and another thread's view of an expression
(`witness`)."""
