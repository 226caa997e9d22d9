/* vv.cu -- outer-product accumulate C += A B^T, i.e. C(y,x) += A[y]*B[x], shorthand dialect.
 * 2-D thread space, one thread per C element: idx in 0..WIDTH_C-1, idy in 0..HEIGHT_C-1
 * (globalDimX = WIDTH_C, globalDimY = HEIGHT_C).  idx/idy are predefined by the compiler. */

#define WIDTH_C 4096
#define HEIGHT_C 4096
#define globalDimX WIDTH_C
#define globalDimY HEIGHT_C
#define C(y,x) C[(y)*WIDTH_C+(x)]

// gpgpu-opt: launch configuration of the optimized 'vv': blocks of 16x1 threads,
// each covering 16x1 threads of the naive launch (one thread per output).
static dim3 vv_block(dim3 naive_grid, dim3 naive_block)
{
    return dim3(16, 1);
}

static dim3 vv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 15) / 16, global_y);
}

#pragma gpgpu_opt launch block(16, 1) grid((global_x + 15) / 16, global_y)
__global__ void vv(float *A, float *B, float *C) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int idy = blockIdx.y * blockDim.y + threadIdx.y;
    __shared__ float tile_A[1];
    // coalesce: stage A[idy] in tile_A (1: A's segment)
    if (threadIdx.x == 0)
        tile_A[0] = A[idy];
    __syncthreads();
    const float A_val = tile_A[0];
    const float B_val = B[idx];
    C[idy * 4096 + idx] += A_val * B_val;
}
