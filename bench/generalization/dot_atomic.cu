/* dot_atomic.cu -- result += sum_i x[i] * y[i], each thread adding its product with atomicAdd.
 * 1-D launch, one thread per element; *result must be zeroed first. */
__global__ void dot_atomic(const float *x, const float *y, float *result, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(result, x[i] * y[i]);
}
