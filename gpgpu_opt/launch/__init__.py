"""Launches: the host variables a launch site sees (`host_scopes`), reading launch sites (`sites`), one
cached view of a program's host side (`host_view`), launches that choose a kernel by size at run time
(`dispatch`), what a rewritten kernel assumes of a launch not in the file (`contract`) and writing the new
launches (`lowering`)."""
