/* complex_mul.cu -- element-wise product of two complex vectors, c[i] = a[i] * b[i], stored interleaved
 * (re, im) in float arrays of 2n floats: the paper's float2 example (§3.1).
 * 1-D thread space, one thread per complex element: i in 0..n-1. */

#include <cuda_runtime.h>

__global__ void complex_mul(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[2 * i] = a[2 * i] * b[2 * i] - a[2 * i + 1] * b[2 * i + 1];
        c[2 * i + 1] = a[2 * i] * b[2 * i + 1] + a[2 * i + 1] * b[2 * i];
    }
}

/* c = a * b for n complex numbers already on the host, through device buffers of its own. */
void complex_mul_on_device(const float *host_a, const float *host_b, float *host_c, int n)
{
    float *a, *b, *c;
    size_t bytes = 2 * (size_t)n * sizeof(float);
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    cudaMalloc(&c, bytes);
    cudaMemcpy(a, host_a, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(b, host_b, bytes, cudaMemcpyHostToDevice);
    complex_mul<<<(n + 255) / 256, 256>>>(a, b, c, n);
    cudaMemcpy(host_c, c, bytes, cudaMemcpyDeviceToHost);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}
