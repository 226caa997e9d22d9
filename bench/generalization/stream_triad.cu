/* stream_triad.cu -- the STREAM triad a[i] = b[i] + scalar * c[i].
 * 1-D launch, one thread per element: blocks of 256, grid (n + 255) / 256. */
__global__ void stream_triad(float *a, const float *b, const float *c, float scalar, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = b[i] + scalar * c[i];
}
