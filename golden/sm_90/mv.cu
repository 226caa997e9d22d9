/* mv.cu -- naive matrix-vector product y = A x, A is rows x cols row-major.
 * 1-D launch, one thread per row: x = r (0..rows-1), y = 1; e.g. 256-thread blocks,
 * grid (rows+255)/256. */

// gpgpu-opt: launch configuration of the optimized 'mv': blocks of 64x1 threads,
// each covering 64x1 threads of the naive launch (one thread per output).
static dim3 mv_block(dim3 naive_grid, dim3 naive_block)
{
    return dim3(64, 1);
}

static dim3 mv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 63) / 64, global_y);
}

#pragma gpgpu_opt launch block(64, 1) grid((global_x + 63) / 64, global_y)
__global__ void mv(const float *A, const float *x, float *y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ float tile_A[64][33];
    float sum = 0;
    // coalesce: 'c' loop unrolled by 32 around the staged tiles (the last step may be partial)
    for (int c0 = 0; c0 < cols; c0 += 32) {
        // coalesce: stage A[r * cols + c] in tile_A (64x32: rows of A read by the block in this step of 'c')
        #pragma unroll
        for (int rr = 0; rr < 64; rr += 2)
            tile_A[rr + threadIdx.x / 32][threadIdx.x % 32] = (blockIdx.x * 64 + rr + threadIdx.x / 32 < rows && c0 + threadIdx.x % 32 < cols) ? A[(blockIdx.x * 64 + rr + threadIdx.x / 32) * cols + c0 + threadIdx.x % 32] : 0.0f;
        __syncthreads();
        if (r < rows) {
            for (int c = c0; c < c0 + 32 && c < cols; c++) {
                const float A_val = tile_A[threadIdx.x][c - c0];
                const float x_val = x[c];
                sum += A_val * x_val;
            }
        }
        __syncthreads();
    }
    if (r < rows)
        y[r] = sum;
}
