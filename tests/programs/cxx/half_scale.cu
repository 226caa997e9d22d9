// half_scale.cu: y = alpha * x + y on __half data (storage and arithmetic in half precision, cuda_fp16.h
// intrinsics), next to the float reference kernel that computes the same in single precision.
//
//   ./half_scale [n]            prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void haxpy(int n, __half alpha, const __half *x, __half *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __hadd(__hmul(alpha, x[i]), y[i]);
}

__global__ void saxpy_ref(int n, float alpha, const __half *x, const __half *y, float *r)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        r[i] = alpha * __half2float(x[i]) + __half2float(y[i]);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    __half *x = (__half *)malloc(n * sizeof(__half));
    __half *y = (__half *)malloc(n * sizeof(__half));
    float *r = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        x[i] = __float2half((float)(i % 64) / 16.0f);
        y[i] = __float2half((float)(i % 9) - 4.0f);
    }
    __half *d_x, *d_y;
    float *d_r;
    cudaMalloc(&d_x, n * sizeof(__half));
    cudaMalloc(&d_y, n * sizeof(__half));
    cudaMalloc(&d_r, n * sizeof(float));
    cudaMemcpy(d_x, x, n * sizeof(__half), cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, y, n * sizeof(__half), cudaMemcpyHostToDevice);

    const float alpha = 0.5f;
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    saxpy_ref<<<(n + 255) / 256, 256>>>(n, alpha, d_x, d_y, d_r);
    haxpy<<<(n + 255) / 256, 256>>>(n, __float2half(alpha), d_x, d_y);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(y, d_y, n * sizeof(__half), cudaMemcpyDeviceToHost);
    cudaMemcpy(r, d_r, n * sizeof(float), cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; i++) {
        float got = __half2float(y[i]);
        if (fabsf(got - r[i]) > 1e-2f * (1.0f + fabsf(r[i])))
            fail++;
        checksum += got;
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_r);
    free(x);
    free(y);
    free(r);
    return fail > 0;
}
