/* vv.cu -- outer-product accumulate C += A B^T, i.e. C(y,x) += A[y]*B[x], shorthand dialect.
 * 2-D thread space, one thread per C element: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C).  idx/idy are predefined by the compiler. */

#define WIDTH_C 4096
#define HEIGHT_C 4096
#define globalDimX WIDTH_C
#define globalDimY HEIGHT_C
#define C(y,x) C[(y)*WIDTH_C+(x)]

// gpgpu-opt: launch configuration of the optimized 'vv': blocks of 32x8 threads,
// each covering 32x32 threads of the naive launch (4 outputs per thread).
static dim3 vv_block(dim3 naive_grid, dim3 naive_block)
{
    return dim3(32, 8);
}

static dim3 vv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 31) / 32);
}

#pragma gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 31) / 32)
__global__ void vv(float *A, float *B, float *C) {
    // merge: each thread computes 4 outputs in y, 8 apart; B[idx] read once for all of them
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int idy = blockIdx.y * 32 + threadIdx.y;
    float A_val[4];
    #pragma unroll
    for (int r = 0; r < 4; r++)
        A_val[r] = A[idy + 8 * r];
    const float B_val = B[idx];
    float C_val[4];
    #pragma unroll
    for (int r = 0; r < 4; r++)
        C_val[r] = C[(idy + 8 * r) * 4096 + idx];
    #pragma unroll
    for (int r = 0; r < 4; r++)
        C[(idy + 8 * r) * 4096 + idx] = C_val[r] + A_val[r] * B_val;
}
