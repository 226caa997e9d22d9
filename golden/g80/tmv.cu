/* tmv.cu -- transposed matrix-vector product C = A^T B (A is HEIGHT_A x WIDTH_A), shorthand dialect.
 * 1-D thread space, one thread per column of A: idx in 0..WIDTH_A-1 (globalDimX = WIDTH_A),
 * globalDimY = 1.  idx is predefined by the compiler. */

#include <cstdio>
#include <cstdlib>
#define WIDTH_A 4096
#define HEIGHT_A 4096
#define globalDimX WIDTH_A
#define globalDimY 1
#define A(y,x) A[(y)*WIDTH_A+(x)]

// gpgpu-opt: launch configuration of the optimized 'tmv': blocks of 256x1 threads,
// each covering 256x1 threads of the naive launch (one thread per output).
// The file does not launch 'tmv', and the optimized kernel gives the naive results only for the naive
// launches checked here: the helpers refuse any other on stderr and exit with EXIT_FAILURE.
__attribute__((unused)) static void tmv_check_launch(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    if (!(global_x == 4096) || !(global_y == 1)) {
        fprintf(stderr, "gpgpu-opt: the optimized 'tmv' cannot serve the naive launch of grid (%u, %u) and block (%u, %u), %ux%u threads: it needs exactly 4096 threads in x (the space the program states) and exactly 1 thread in y (the space the program states)\n",
                naive_grid.x, naive_grid.y, naive_block.x, naive_block.y,
                naive_grid.x * naive_block.x, naive_grid.y * naive_block.y);
        exit(EXIT_FAILURE);
    }
}

__attribute__((unused)) static dim3 tmv_block(dim3 naive_grid, dim3 naive_block)
{
    tmv_check_launch(naive_grid, naive_block);
    return dim3(256, 1);
}

__attribute__((unused)) static dim3 tmv_grid(dim3 naive_grid, dim3 naive_block)
{
    tmv_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 255) / 256, global_y);
}

// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, global_y)
__global__ void tmv(float *A, float *B, float *C) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0;
    // merge: 16 blocks of 16x1 threads merged in x: they share tile_B, loaded once per merged block
    __shared__ float tile_B[256];
    // coalesce: 'i' loop unrolled by 256 around the staged tiles
    // prefetch: the first step's loads go to registers (B_next); each step stores them to its tiles and loads
    // the next step's while it computes
    float B_next;
    B_next = (threadIdx.x < 4096) ? B[threadIdx.x] : 0.0f;
    for (int i0 = 0; i0 < 4096; i0 += 256) {
        // coalesce: stage B[i] in tile_B (256: B's segment in this step of 'i')
        tile_B[threadIdx.x] = B_next;
        __syncthreads();
        // prefetch: the next step's loads, in flight during this step's computation
        const int i0_next = i0 + 256;
        if (i0_next < 4096) {
            B_next = (i0_next + threadIdx.x < 4096) ? B[i0_next + threadIdx.x] : 0.0f;
        }
        #pragma unroll
        for (int i = i0; i < i0 + 256; i = i + 1) {
            float a = A[i * 4096 + idx];
            float b = tile_B[i - i0];
            sum += a * b;
        }
        __syncthreads();
    }
    C[idx] = sum;
}
