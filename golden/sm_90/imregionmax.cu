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

// gpgpu-opt: launch configuration of the optimized 'imregionmax': blocks of 32x8 threads,
// each covering 128x32 threads of the naive launch (16 outputs per thread).
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
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 imregionmax_grid(dim3 naive_grid, dim3 naive_block)
{
    imregionmax_check_launch(naive_grid, naive_block);
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 127) / 128, (global_y + 31) / 32);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 127) / 128, (global_y + 31) / 32)
__global__ void imregionmax(float *A, float *C) {
    // stencil window: each thread computes 4 x 4 outputs from a register window of A; 2 float2 loads per row,
    // the neighbouring columns from the neighbouring lanes (__shfl_up/down_sync)
    const int x0 = (blockIdx.x * 32 + threadIdx.x) * 4;
    const int y0 = (blockIdx.y * 8 + threadIdx.y) * 4;
    float A_win[6][6];
    #pragma unroll
    for (int i2 = 0; i2 < 6; i2++) {
        const int row = y0 + i2;
        const int row_read = row < 4098;
        if (row_read && x0 + 3 < 4098 && (((size_t) (A + row * 4098 + x0)) & 7) == 0) {
            const float2 pair0 = *((const float2 *) (&A[row * 4098 + x0]));
            A_win[i2][0] = pair0.x;
            A_win[i2][1] = pair0.y;
            const float2 pair2 = *((const float2 *) (&A[row * 4098 + x0 + 2]));
            A_win[i2][2] = pair2.x;
            A_win[i2][3] = pair2.y;
        } else {
            #pragma unroll
            for (int e = 0; e < 4; e++)
                A_win[i2][e] = (row_read && x0 + e < 4098) ? A[row * 4098 + x0 + e] : 0;
        }
        A_win[i2][4] = (threadIdx.x == 31 && row_read && x0 + 4 < 4098) ? A[row * 4098 + x0 + 4] : 0;
        A_win[i2][5] = (threadIdx.x == 31 && row_read && x0 + 5 < 4098) ? A[row * 4098 + x0 + 5] : 0;
    }
    #pragma unroll
    for (int i2 = 0; i2 < 6; i2++) {
        const float from_right1 = __shfl_down_sync(0xffffffffu, A_win[i2][0], 1);
        const float from_right2 = __shfl_down_sync(0xffffffffu, A_win[i2][1], 1);
        if (threadIdx.x != 31) {
            A_win[i2][4] = from_right1;
            A_win[i2][5] = from_right2;
        }
    }
    // the copies' stores widened: each row of C one float4 store where aligned (else element by element)
    #pragma unroll
    for (int r = 0; r < 4; r++) {
        float C_row[4];
        #pragma unroll
        for (int v = 0; v < 4; v++) {
            float center = A_win[r + 1][v + 1];
            float m = -3.0e38f;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) {
                    float a = A_win[r + i][v + j];
                    m = fmaxf(m, a);
                }
            C_row[v] = (center >= m) ? 1.0f : 0.0f;
        }
        if ((((size_t) C) & 15) == 0) {
            *((float4 *) (&C[(y0 + r) * 4096 + x0])) = make_float4(C_row[0], C_row[1], C_row[2], C_row[3]);
        } else if ((((size_t) C) & 7) == 0) {
            *((float2 *) (&C[(y0 + r) * 4096 + x0])) = make_float2(C_row[0], C_row[1]);
            *((float2 *) (&C[(y0 + r) * 4096 + x0 + 2])) = make_float2(C_row[2], C_row[3]);
        } else {
            #pragma unroll
            for (int v = 0; v < 4; v++)
                C[(y0 + r) * 4096 + x0 + v] = C_row[v];
        }
    }
}
