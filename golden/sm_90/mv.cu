/* mv.cu -- naive matrix-vector product y = A x, A is rows x cols row-major.
 * 1-D launch, one thread per row: x = r (0..rows-1), y = 1; e.g. 256-thread blocks,
 * grid (rows+255)/256. */

// gpgpu-opt: launch configuration of the optimized 'mv': blocks of 32x8 threads,
// each covering 8x1 threads of the naive launch (32 threads per output).
__attribute__((unused)) static dim3 mv_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 mv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 7) / 8, global_y);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 7) / 8, global_y)
__global__ void mv(const float *A, const float *x, float *y, int rows, int cols) {
    int r = blockIdx.x * 8 + threadIdx.y;
    float sum = 0;
    // merge: one warp per output; lane threadIdx.x takes one iteration of 'c' in 32 (the row is read
    // coalesced)
    if (r < rows)
        for (int c = threadIdx.x; c < cols; c += 32) {
            sum += A[r * cols + c] * x[c];
        }
    // merge: the lanes' partial sums added by shuffles; lane 0 holds the total
    for (int offset = 16; offset > 0; offset /= 2)
        sum += __shfl_down_sync(0xffffffff, sum, offset);
    if (r < rows && threadIdx.x == 0) {
        y[r] = sum;
    }
}
