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

// gpgpu-opt: launch configuration of the optimized 'vv': blocks of 16x16 threads,
// each covering 64x256 threads of the naive launch (64 outputs per thread).
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
    return dim3(16, 16);
}

__attribute__((unused)) static dim3 vv_grid(dim3 naive_grid, dim3 naive_block)
{
    vv_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 63) / 64, (global_y + 255) / 256);
}

// gpgpu_opt launch block(16, 16) grid((global_x + 63) / 64, (global_y + 255) / 256)
__global__ void vv(float *A, float *B, float *C) {
    // merge: each thread computes 16 outputs in y, 16 apart; B read once for all of them
    // vectorize: each thread handles 4 consecutive x, one 4-wide vector access per array; unaligned or ragged
    // groups take the scalar path
    const int idx = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    const int idy = blockIdx.y * 256 + threadIdx.y;
    float A_val[16];
    #pragma unroll
    for (int r = 0; r < 16; r++)
        A_val[r] = A[idy + 16 * r];
    if ((((size_t) B) & 15) == 0 && (((size_t) C) & 15) == 0) {
        const float4 B_val = ((const float4 *) B)[idx / 4];
        float4 C_old[16];
        #pragma unroll
        for (int r = 0; r < 16; r++)
            C_old[r] = ((float4 *) (C + (idy + 16 * r) * 4096))[idx / 4];
        #pragma unroll
        for (int r = 0; r < 16; r++)
            ((float4 *) (C + (idy + 16 * r) * 4096))[idx / 4] = make_float4(C_old[r].x + A_val[r] * B_val.x,
                    C_old[r].y + A_val[r] * B_val.y, C_old[r].z + A_val[r] * B_val.z,
                    C_old[r].w + A_val[r] * B_val.w);
    } else {
        for (int k = 0; k < 4; k++) {
            const float B_val = B[idx + k];
            float C_val[16];
            #pragma unroll
            for (int r = 0; r < 16; r++)
                C_val[r] = C[(idy + 16 * r) * 4096 + (idx + k)];
            #pragma unroll
            for (int r = 0; r < 16; r++)
                C[(idy + 16 * r) * 4096 + (idx + k)] = C_val[r] + A_val[r] * B_val;
        }
    }
}
