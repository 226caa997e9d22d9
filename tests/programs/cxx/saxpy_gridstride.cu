// saxpy_gridstride.cu: y = a * x + y with a grid-stride loop, the grid sized from the number of SMs (the
// idiom of modern CUDA code), repeated REPS times.
//
//   ./saxpy_gridstride [n]      prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define REPS 10

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}

int main(int argc, char *argv[])
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    size_t bytes = n * sizeof(float);
    float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        x[i] = 1.0f + (i % 3);
        y[i] = 0.25f * (i % 5);
    }
    float *d_x, *d_y;
    cudaMalloc(&d_x, bytes);
    cudaMalloc(&d_y, bytes);
    cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, y, bytes, cudaMemcpyHostToDevice);

    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    int threads = 256;
    int blocks = 32 * sms;

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    for (int r = 0; r < REPS; r++)
        saxpy<<<blocks, threads>>>(n, 0.5f, d_x, d_y);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; i++) {
        float expect = 0.25f * (i % 5) + REPS * 0.5f * (1.0f + (i % 3));
        if (fabsf(y[i] - expect) > 1e-4f * (1.0f + fabsf(expect)))
            fail++;
        checksum += y[i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_x);
    cudaFree(d_y);
    free(x);
    free(y);
    return fail > 0;
}
