"""Checking what the compiler writes: the sanity checks run after every pass (`sanity`), the emulated
comparison of naive and optimized kernels (`inputs`, `extents`, `cases`), the launches it tries (`launches`),
compile's own check before it writes (`validate`) and the `verify` command (`command`)."""
