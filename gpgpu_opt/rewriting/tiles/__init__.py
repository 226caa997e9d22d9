"""Staged shared-memory tiles, the builder that coalesce and block merge share: the tile geometry
(`geometry`), which reads are staged in which tiles for a block (`plan`, its record `staged`), each tile's
cooperative loader (`loader`, `vector_rows`), and the kernel rewritten around the tiles (`rewrite`, `rows`)."""
