/* histogram256.cu -- a 256-bin histogram of bytes, every thread adding its byte with a global atomicAdd.
 * 1-D launch, one thread per byte; bins must be zeroed first. */
__global__ void histogram256(const unsigned char *data, unsigned int *bins, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&bins[data[i]], 1u);
}
