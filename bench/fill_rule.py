"""Where widening starts to gain: each body of bench/fill_rule/bodies.cu, naive against widened by 2 and by 4.

    python bench/fill_rule.py DIR          # here: compiles the bodies with gpgpu-opt, writes DIR/fillbench.cu
    bash DIR/run.sh                        # on the GPU machine: builds it with nvcc and prints the table

Each body runs at 16K to 8M elements, blocks of 256 naive threads; the widened launch has 2x or 4x fewer. For each
time: 5 warm-ups, then the median of 60 launches timed with CUDA events, L2 flushed before each (a 256 MB write
outside the timed region). The table sets launch_dispatch.min_threads_widened.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BODIES = Path(__file__).resolve().parent / "fill_rule" / "bodies.cu"

#: Each body: the arguments of its launch in the harness, and whether it has a 4-wide vector type (doubles do not).
LAUNCHES = {
    "scale": ("(n, 2.0f, x, y)", True), "saxpy": ("(n, 2.0f, x, y, z)", True), "soa5": ("(n, x, y, z, w)", True),
    "chain": ("(n, x, y, z)", True), "extract": ("(n, x)", True), "compress": ("(n, y)", True),
    "chain2": ("(n, x, y)", True), "chain4": ("(n, x, y, z)", True), "dscale": ("(n, 2.0, dx, dy)", False),
    "time_step": ("(1, n, x, y, z, w)", True),
}

HARNESS = r"""
static float *flush_buffer;
static const size_t flush_floats = 64u << 20;

__global__ void flush_l2(float *buffer, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) buffer[i] += 1.0f;
}

template <class Launch> float median_us(Launch launch)
{
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> times;
    for (int r = 0; r < 5; r++) launch();
    for (int r = 0; r < 60; r++) {
        flush_l2<<<(flush_floats + 255) / 256, 256>>>(flush_buffer, flush_floats);
        cudaEventRecord(start);
        launch();
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms;
        cudaEventElapsedTime(&ms, start, stop);
        times.push_back(ms * 1000);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

int main()
{
    const int max_n = 1 << 23;
    const size_t bytes = 5ull * max_n * sizeof(float);
    float *x, *y, *z, *w;
    cudaMalloc(&x, bytes); cudaMalloc(&y, bytes); cudaMalloc(&z, bytes); cudaMalloc(&w, bytes);
    cudaMalloc(&flush_buffer, flush_floats * sizeof(float));
    double *dx = (double *)z, *dy = (double *)w;
    std::vector<float> host(5ull * max_n);
    for (float &v : host) v = 1.0f + rand() / (float)RAND_MAX;
    for (float *d : {x, y, z, w}) cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice);
    printf("%-9s %9s | %8s %8s %8s | %6s %6s\n", "body", "n", "naive us", "w2 us", "w4 us", "w2 x", "w4 x");
    for (int n = 1 << 14; n <= max_n; n *= 2) {
        const int g1 = (n + 255) / 256, g2 = (n + 511) / 512, g4 = (n + 1023) / 1024;
#define ROW(NAME, ARGS, GRID4) { \
            float naive = median_us([&] { NAME##_naive<<<g1, 256>>> ARGS; }); \
            float w2 = median_us([&] { NAME##_w2<<<g2, 256>>> ARGS; }); \
            float w4 = median_us([&] { NAME##_w4<<<GRID4, 256>>> ARGS; }); \
            printf("%-9s %9d | %8.2f %8.2f %8.2f | %6.2f %6.2f\n", #NAME, n, naive, w2, w4, naive / w2, naive / w4); }
{rows}
    }
    cudaError_t status = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(status));
    return status != cudaSuccess;
}
"""


def kernels_of(text: str) -> str:
    """The kernels of a compiled file: from its first kernel (or launch line) up to main."""
    starts = [i for i in (text.find("// gpgpu_opt launch"), text.find("__global__")) if i >= 0]
    body = text[min(starts):text.index("int main")]
    return re.sub(r"// gpgpu_opt launch[^\n]*\n", "", body)


def renamed(text: str, suffix: str) -> str:
    for name in LAUNCHES:
        text = re.sub(rf"\b{name}\(", f"{name}_{suffix}(", text)
    return text


def compiled(width: int, out: Path) -> str:
    target = out / f"bodies_w{width}.cu"
    done = subprocess.run([sys.executable, "-m", "gpgpu_opt", "compile", str(BODIES), "--target", "sm_90",
                           "--vector-width", str(width), "-o", str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stderr)
    return target.read_text()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    naive = BODIES.read_text()
    rows = "\n".join(f"        ROW({name}, {args}, {'g4' if has4 else 'g1'})" for name, (args, has4) in LAUNCHES.items())
    source = ("#include <cstdio>\n#include <cstdlib>\n#include <vector>\n#include <algorithm>\n"
              "#include <cuda_runtime.h>\n"
              + renamed(kernels_of(naive), "naive") + renamed(kernels_of(compiled(4, out)), "w4")
              + renamed(kernels_of(compiled(2, out)), "w2") + HARNESS.replace("{rows}", rows))
    (out / "fillbench.cu").write_text(source)
    (out / "run.sh").write_text('set -e\ncd "$(dirname "$0")"\n'
                                "nvcc -O3 -arch=sm_90 -std=c++17 -o fillbench fillbench.cu\n./fillbench\n")
    print(f"wrote {out / 'fillbench.cu'}; run: bash {out / 'run.sh'}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/fill_rule.py DIR")
    main(Path(sys.argv[1]))
