#!/bin/sh
# Writes gen/ from kernels/ and programs/ with this checkout's gpgpu-opt (run from the repository root).
set -e
py=${PYTHON:-python}
for f in bench/stencil3d/programs/*.cu; do
    $py -m gpgpu_opt compile "$f" --target sm_90 -o bench/stencil3d/gen/prog_$(basename "$f")
done
for f in bench/stencil3d/kernels/*.cu; do
    $py -m gpgpu_opt compile "$f" --target sm_90 --restrict -o bench/stencil3d/gen/kern_$(basename "$f")
done
