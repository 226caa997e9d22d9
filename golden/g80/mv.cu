/* mv.cu -- naive matrix-vector product y = A x, A is rows x cols row-major.
 * 1-D launch, one thread per row: x = r (0..rows-1), y = 1; e.g. 256-thread blocks,
 * grid (rows+255)/256. */

// gpgpu-opt: launch configuration of the optimized 'mv': blocks of 32x1 threads,
// each covering 32x1 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 mv_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 1);
}

__attribute__((unused)) static dim3 mv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, global_y);
}

// gpgpu_opt launch block(32, 1) grid((global_x + 31) / 32, global_y)
__global__ void mv(const float *A, const float *x, float *y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    // merge: 2 blocks of 16x1 threads merged in x: they share tile_x, loaded once per merged block
    __shared__ float tile_A[32][17];
    __shared__ float tile_x[16];
    float sum = 0;
    // coalesce: 'c' loop unrolled by 16 around the staged tiles (the last step may be partial)
    // partition: block b starts the 'c0' loop at step b (wrapping around), so that the blocks running at once
    // read different DRAM partitions
    const int c0_steps = (cols + 15) / 16;
    // prefetch: the first step's loads go to registers (A_next, x_next); each step stores them to its tiles
    // and loads the next step's while it computes
    float A_next[16];
    float x_next;
    if (0 < c0_steps) {
        const int c0 = blockIdx.x % c0_steps * 16;
        #pragma unroll
        for (int rr = 0; rr < 32; rr += 2)
            A_next[rr / 2] = (blockIdx.x * 32 + rr + threadIdx.x / 16 < rows && c0 + threadIdx.x % 16 < cols)
                    ? A[(blockIdx.x * 32 + rr + threadIdx.x / 16) * cols + c0 + threadIdx.x % 16] : 0.0f;
        if (threadIdx.x < 16)
            x_next = (blockIdx.x * 32 < rows && c0 + threadIdx.x < cols) ? x[c0 + threadIdx.x] : 0.0f;
    }
    for (int c0_step = 0; c0_step < c0_steps; c0_step++) {
        const int c0 = (c0_step + blockIdx.x) % c0_steps * 16;
        // coalesce: stage A[r * cols + c] in tile_A (32x16: rows of A read by the block in this step of 'c')
        // coalesce: stage x[c] in tile_x (16: x's segment in this step of 'c')
        #pragma unroll
        for (int rr = 0; rr < 32; rr += 2)
            tile_A[rr + threadIdx.x / 16][threadIdx.x % 16] = A_next[rr / 2];
        if (threadIdx.x < 16)
            tile_x[threadIdx.x] = x_next;
        __syncthreads();
        // prefetch: the next step's loads, in flight during this step's computation
        const int c0_step_next = c0_step + 1;
        if (c0_step_next < c0_steps) {
            const int c0_next = (c0_step_next + blockIdx.x) % c0_steps * 16;
            #pragma unroll
            for (int rr = 0; rr < 32; rr += 2)
                A_next[rr / 2] = (blockIdx.x * 32 + rr + threadIdx.x / 16 < rows
                                  && c0_next + threadIdx.x % 16 < cols)
                        ? A[(blockIdx.x * 32 + rr + threadIdx.x / 16) * cols + c0_next + threadIdx.x % 16]
                        : 0.0f;
            if (threadIdx.x < 16)
                x_next = (blockIdx.x * 32 < rows && c0_next + threadIdx.x < cols) ? x[c0_next + threadIdx.x]
                        : 0.0f;
        }
        if (r < rows) {
            for (int c = c0; c < c0 + 16 && c < cols; c++) {
                sum += tile_A[threadIdx.x][c - c0] * tile_x[c - c0];
            }
        }
        __syncthreads();
    }
    if (r < rows)
        y[r] = sum;
}
