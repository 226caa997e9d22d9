"""gpgpu-opt: a source-to-source optimizing compiler for naive CUDA kernels."""

__version__ = "0.1.0"
