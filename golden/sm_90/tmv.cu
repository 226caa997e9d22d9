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

// gpgpu-opt: launch configuration of the optimized 'tmv': blocks of 32x16 threads,
// each covering 32x1 threads of the naive launch (16 threads per output).
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
    return dim3(32, 16);
}

__attribute__((unused)) static dim3 tmv_grid(dim3 naive_grid, dim3 naive_block)
{
    tmv_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, global_y);
}

// gpgpu_opt launch block(32, 16) grid((global_x + 31) / 32, global_y)
__global__ void tmv(float *A, float *B, float *C) {
    __shared__ float partial_sum[16][32];
    const int idx = blockIdx.x * 32 + threadIdx.x;
    float sum = 0;
    // merge: 16 threads per output; threadIdx.y takes one iteration of 'i' in 16
    for (int i = threadIdx.y; i < 4096; i += 16) {
        float a = A[i * 4096 + idx];
        float b = B[i];
        sum += a * b;
    }
    // merge: the 16 partial sums added through shared memory by threadIdx.y == 0
    partial_sum[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0) {
        for (int part = 1; part < 16; part++)
            sum += partial_sum[part][threadIdx.x];
        C[idx] = sum;
    }
}
