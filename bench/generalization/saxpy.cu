/* saxpy.cu -- y = alpha * x + y in place, the BLAS level-1 update.
 * 1-D launch, one thread per element. */
__global__ void saxpy(int n, float alpha, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = alpha * x[i] + y[i];
}
