/* complex_mul.cu -- element-wise product of two complex vectors, c[i] = a[i] * b[i], stored interleaved
 * (re, im) in float arrays of 2n floats: the paper's float2 example (§3.1).
 * 1-D thread space, one thread per complex element: i in 0..n-1. */

#include <cuda_runtime.h>

__global__ void complex_mul(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ c,
                            int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        // vectorize: a read, b read and c written as float2 pairs, one access for two elements, .x the lower
        const float2 a2 = ((const float2 *) a)[i];
        const float2 b2 = ((const float2 *) b)[i];
        const float c_x = a2.x * b2.x - a2.y * b2.y;
        ((float2 *) c)[i] = make_float2(c_x, a2.x * b2.y + a2.y * b2.x);
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
