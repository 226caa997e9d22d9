// half_axpy.cu: y = alpha * x + y on __half data, the naive kernel as a user writes it, and a timing loop:
// the check run first (from fresh inputs: a checksum of y's bits), then RUNS timed launches (CUDA events,
// L2 flushed before each by a 256 MB memset, median). Compiled as written and through gpgpu-opt at each
// vector width, the binaries' checksums must agree (bench/half8/run.sh).
//
//   ./half_axpy N [RUNS]      prints "checksum C" and "median_ms T"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void haxpy(int n, __half alpha, const __half *x, __half *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __hadd(__hmul(alpha, x[i]), y[i]);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    int runs = argc > 2 ? atoi(argv[2]) : 50;
    std::vector<__half> x(n), y(n);
    unsigned long long state = 12345;
    for (int i = 0; i < n; i++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = __float2half((float)((state >> 40) % 2001) / 1000.0f - 1.0f);
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        y[i] = __float2half((float)((state >> 40) % 2001) / 1000.0f - 1.0f);
    }
    __half *d_x, *d_y;
    char *flush;
    const size_t flush_bytes = 256u << 20;
    cudaMalloc(&d_x, n * sizeof(__half));
    cudaMalloc(&d_y, n * sizeof(__half));
    cudaMalloc(&flush, flush_bytes);
    cudaMemcpy(d_x, x.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, y.data(), n * sizeof(__half), cudaMemcpyHostToDevice);
    const __half alpha = __float2half(0.75f);

    haxpy<<<(n + 255) / 256, 256>>>(n, alpha, d_x, d_y);
    cudaMemcpy(y.data(), d_y, n * sizeof(__half), cudaMemcpyDeviceToHost);
    unsigned long long checksum = 0;
    for (int i = 0; i < n; i++)
        checksum = checksum * 31 + __half_as_ushort(y[i]);

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> ms(runs);
    for (int r = -3; r < runs; r++) {
        cudaMemset(flush, r & 0xFF, flush_bytes);
        cudaEventRecord(start);
        haxpy<<<(n + 255) / 256, 256>>>(n, alpha, d_x, d_y);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        if (r >= 0)
            cudaEventElapsedTime(&ms[r], start, stop);
    }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
        return 2;
    }
    std::sort(ms.begin(), ms.end());
    printf("checksum %llu\nmedian_ms %.5f\n", checksum, ms[runs / 2]);
    return 0;
}
