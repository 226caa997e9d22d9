/* transpose.cu -- naive matrix transpose: out (cols x rows) = in^T, in is rows x cols row-major.
 * 2-D launch over the OUTPUT: x in 0..rows-1 (output column), y in 0..cols-1 (output row);
 * writes are coalesced, reads are strided by cols. */

// gpgpu-opt: launch configuration of the optimized 'transpose': blocks of 32x8 threads,
// each covering 32x32 threads of the naive launch (4 outputs per thread).
static dim3 transpose_block(dim3 naive_grid, dim3 naive_block)
{
    return dim3(32, 8);
}

static dim3 transpose_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 31) / 32);
}

#pragma gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 31) / 32)
__global__ void transpose(const float *in, float *out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y0 = blockIdx.y * 32 + threadIdx.y;
    __shared__ float tile_in[32][33];
    // coalesce: stage in[x * cols + y] in tile_in (32x32: rows of in read by the block)
    #pragma unroll
    for (int rr = 0; rr < 32; rr += 8)
        tile_in[rr + threadIdx.y][threadIdx.x] = (blockIdx.x * 32 + rr + threadIdx.y < rows && blockIdx.y * 32 + threadIdx.x < cols) ? in[(blockIdx.x * 32 + rr + threadIdx.y) * cols + blockIdx.y * 32 + threadIdx.x] : 0.0f;
    __syncthreads();
    // coalesce: each thread computes 4 rows of the block's 32x32 outputs, 8 apart
    #pragma unroll
    for (int r = 0; r < 32; r += 8) {
        int y = y0 + r;
        if (x < rows && y < cols)
            out[y * rows + x] = tile_in[threadIdx.x][threadIdx.y + r];
    }
}
