/* reduction.cu -- naive sum reduction: out[b] = sum of the inputs handled by block b (host or a
 * second launch adds the per-block results).  1-D launch: x = i over all threads
 * (gridDim.x*blockDim.x), y = 1; thread i sums in[i + k*stride], k < segSize, into partial[i],
 * then an in-place tree over partial[] inside each block.  partial has gridDim.x*blockDim.x floats. */

#include <cstdio>
#include <cstdlib>
// gpgpu-opt: launch configuration of the optimized 'reduction': blocks of 256x1 threads,
// each covering 256x1 threads of the naive launch (one thread per output).
// The file does not launch 'reduction', and the optimized kernel gives the naive results only for the naive
// launches checked here: the helpers refuse any other on stderr and exit with EXIT_FAILURE.
__attribute__((unused)) static void reduction_check_launch(dim3 naive_grid, dim3 naive_block)
{
    if (!(naive_block.x == 256 && naive_block.y == 1)) {
        fprintf(stderr, "gpgpu-opt: the optimized 'reduction' cannot serve the naive launch of grid (%u, %u) and block (%u, %u), %ux%u threads: it needs naive blocks of 256x1 threads (its meaning depends on the block)\n",
                naive_grid.x, naive_grid.y, naive_block.x, naive_block.y,
                naive_grid.x * naive_block.x, naive_grid.y * naive_block.y);
        exit(EXIT_FAILURE);
    }
}

__attribute__((unused)) static dim3 reduction_block(dim3 naive_grid, dim3 naive_block)
{
    reduction_check_launch(naive_grid, naive_block);
    return dim3(256, 1);
}

__attribute__((unused)) static dim3 reduction_grid(dim3 naive_grid, dim3 naive_block)
{
    reduction_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 255) / 256, global_y);
}

// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, global_y)
__global__ void reduction(const float *in, float *partial, float *out, int n, int segSize) {
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    float sum = 0.0f;
    // merge: 8 iterations' loads in flight per thread (the sum still adds them in order)
    #pragma unroll 8
    for (int k = 0; k < segSize; k++) {
        int j = i + k * stride;
        if (j < n)
            sum += in[j];
    }
    // merge: the tree in registers, threads paired as in the naive tree (bit-exact); partial[i] stored once,
    // when final
    const int lane = threadIdx.x % 32;
    for (int s = 1; s < 32; s *= 2) {
        float other = __shfl_down_sync(0xffffffff, sum, s);
        if (lane % (2 * s) == s)
            partial[i] = sum;
        if (lane % (2 * s) == 0)
            sum += other;
    }
    __shared__ float warp_sum[8];
    if (lane == 0)
        warp_sum[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x < 8) {
        sum = warp_sum[lane];
        for (int s = 1; s < 8; s *= 2) {
            float other = __shfl_down_sync(0xff, sum, s, 8);
            if (lane % (2 * s) == s)
                partial[blockIdx.x * blockDim.x + 32 * lane] = sum;
            if (lane % (2 * s) == 0)
                sum += other;
        }
    }
    if (tid == 0) {
        partial[i] = sum;
        out[blockIdx.x] = sum;
    }
}
