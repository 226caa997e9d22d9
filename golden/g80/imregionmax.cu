/* imregionmax.cu -- regional maxima with a 3x3 window on a pre-padded image, shorthand dialect:
 * C(y,x) = 1 if A(y+1,x+1) >= max of the 3x3 window A(y..y+2, x..x+2), else 0.
 * 2-D thread space, one thread per output pixel: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C). */

#include <cstdio>
#include <cstdlib>
#define WIDTH_A (WIDTH_C+2)
#define WIDTH_C 4096
#define HEIGHT_C 4096
#define globalDimX WIDTH_C
#define globalDimY HEIGHT_C
#define A(y,x) A[(y)*WIDTH_A+(x)]
#define C(y,x) C[(y)*WIDTH_C+(x)]

// gpgpu-opt: launch configuration of the optimized 'imregionmax': blocks of 16x16 threads,
// each covering 16x16 threads of the naive launch (one thread per output).
// The file does not launch 'imregionmax', and the optimized kernel gives the naive results only for the naive
// launches checked here: the helpers refuse any other on stderr and exit with EXIT_FAILURE.
__attribute__((unused)) static void imregionmax_check_launch(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    if (!(global_x == 4096) || !(global_y == 4096)) {
        fprintf(stderr, "gpgpu-opt: the optimized 'imregionmax' cannot serve the naive launch of grid (%u, %u) and block (%u, %u), %ux%u threads: it needs exactly 4096 threads in x (the space the program states) and exactly 4096 threads in y (the space the program states)\n",
                naive_grid.x, naive_grid.y, naive_block.x, naive_block.y,
                naive_grid.x * naive_block.x, naive_grid.y * naive_block.y);
        exit(EXIT_FAILURE);
    }
}

__attribute__((unused)) static dim3 imregionmax_block(dim3 naive_grid, dim3 naive_block)
{
    imregionmax_check_launch(naive_grid, naive_block);
    return dim3(16, 16);
}

__attribute__((unused)) static dim3 imregionmax_grid(dim3 naive_grid, dim3 naive_block)
{
    imregionmax_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 15) / 16, (global_y + 15) / 16);
}

// gpgpu_opt launch block(16, 16) grid((global_x + 15) / 16, (global_y + 15) / 16)
__global__ void imregionmax(float *A, float *C) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int idy = blockIdx.y * blockDim.y + threadIdx.y;
    // coalesce: stage the A reads' footprint in tile_A (18x18: the block's 16x16 outputs and the stencil's
    // reach, 0 up, 2 down, 0 left, 2 right), each element once
    const int row0 = blockIdx.y * 16;
    const int col0 = blockIdx.x * 16;
    __shared__ float tile_A[18][18];
    for (int elem = threadIdx.y * 16 + threadIdx.x; elem < 324; elem += 256) {
        const int row = row0 + elem / 18;
        const int col = col0 + elem % 18;
        tile_A[elem / 18][elem % 18] = A[row * 4098 + col];
    }
    __syncthreads();
    float center = tile_A[threadIdx.y + 1][threadIdx.x + 1];
    float m = -3.0e38f;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            float a = tile_A[threadIdx.y + i][threadIdx.x + j];
            m = fmaxf(m, a);
        }
    C[idy * 4096 + idx] = (center >= m) ? 1.0f : 0.0f;
}
