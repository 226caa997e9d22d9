/* vv.cu -- outer-product accumulate C += A B^T, i.e. C(y,x) += A[y]*B[x], shorthand dialect.
 * 2-D thread space, one thread per C element: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C).  idx/idy are predefined by the compiler. */

#include <cstdio>
#include <cstdlib>
#define WIDTH_C 4096
#define HEIGHT_C 4096
#define globalDimX WIDTH_C
#define globalDimY HEIGHT_C
#define C(y,x) C[(y)*WIDTH_C+(x)]

// gpgpu-opt: launch configuration of the optimized 'vv': blocks of 256x1 threads,
// each covering 256x16 threads of the naive launch (16 outputs per thread).
// The file does not launch 'vv', and the optimized kernel gives the naive results only for the naive
// launches checked here: the helpers refuse any other on stderr and exit with EXIT_FAILURE.
__attribute__((unused)) static void vv_check_launch(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    if (!(global_x == 4096) || !(global_y == 4096)) {
        fprintf(stderr, "gpgpu-opt: the optimized 'vv' cannot serve the naive launch of grid (%u, %u) and block (%u, %u), %ux%u threads: it needs exactly 4096 threads in x (the space the program states) and exactly 4096 threads in y (the space the program states)\n",
                naive_grid.x, naive_grid.y, naive_block.x, naive_block.y,
                naive_grid.x * naive_block.x, naive_grid.y * naive_block.y);
        exit(EXIT_FAILURE);
    }
}

__attribute__((unused)) static dim3 vv_block(dim3 naive_grid, dim3 naive_block)
{
    vv_check_launch(naive_grid, naive_block);
    return dim3(256, 1);
}

__attribute__((unused)) static dim3 vv_grid(dim3 naive_grid, dim3 naive_block)
{
    vv_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 255) / 256, (global_y + 15) / 16);
}

// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, (global_y + 15) / 16)
__global__ void vv(float *A, float *B, float *C) {
    // merge: each thread computes 16 outputs in y, 1 apart; B[idx] read once for all of them
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int idy = blockIdx.y * 16 + threadIdx.y;
    // merge: 16 blocks of 16x1 threads merged in x: they share tile_A, loaded once per merged block
    __shared__ float tile_A[16][1];
    // coalesce: stage A[idy] in tile_A (1: A's segment)
    if (threadIdx.x == 0) {
        #pragma unroll
        for (int r = 0; r < 16; r++)
            tile_A[r][0] = A[idy + r];
    }
    __syncthreads();
    float A_val[16];
    #pragma unroll
    for (int r = 0; r < 16; r++)
        A_val[r] = tile_A[r][0];
    const float B_val = B[idx];
    float C_val[16];
    #pragma unroll
    for (int r = 0; r < 16; r++)
        C_val[r] = C[(idy + r) * 4096 + idx];
    #pragma unroll
    for (int r = 0; r < 16; r++)
        C[(idy + r) * 4096 + idx] = C_val[r] + A_val[r] * B_val;
}
