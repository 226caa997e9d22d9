/* reduction.cu -- naive sum reduction: out[b] = sum of the inputs handled by block b (host or a
 * second launch adds the per-block results).  1-D launch: x = i over all threads
 * (gridDim.x*blockDim.x), y = 1; thread i sums in[i + k*stride], k < segSize, into partial[i],
 * then an in-place tree over partial[] inside each block.  partial has gridDim.x*blockDim.x floats. */

__global__ void reduction(const float *in, float *partial, float *out, int n, int segSize)
{
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;

    /* Phase 1: each thread sums its strided segment. */
    float sum = 0.0f;
    for (int k = 0; k < segSize; k++) {
        int j = i + k * stride;
        if (j < n)
            sum += in[j];
    }
    partial[i] = sum;
    __syncthreads();

    /* Phase 2: in-place tree reduction of this block's partial sums in global memory. */
    for (int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0 && tid + s < blockDim.x)
            partial[i] += partial[i + s];
        __syncthreads();
    }

    if (tid == 0)
        out[blockIdx.x] = partial[i];
}
