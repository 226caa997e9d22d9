/* transpose.cu -- naive matrix transpose: out (cols x rows) = in^T, in is rows x cols row-major.
 * 2-D launch over the OUTPUT: x in 0..rows-1 (output column), y in 0..cols-1 (output row);
 * writes are coalesced, reads are strided by cols. */

// gpgpu-opt: launch configuration of the optimized 'transpose': blocks of 64x8 threads,
// each covering 64x64 threads of the naive launch (8 outputs per thread).
__attribute__((unused)) static dim3 transpose_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(64, 8);
}

__attribute__((unused)) static dim3 transpose_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 63) / 64, (global_y + 63) / 64);
}

// gpgpu_opt launch block(64, 8) grid((global_x + 63) / 64, (global_y + 63) / 64)
__global__ void transpose(const float *in, float *out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y0 = blockIdx.y * 64 + threadIdx.y;
    __shared__ float tile_in[64][65];
    // coalesce: stage in[x * cols + y] in tile_in (64x64: rows of in read by the block)
    // 16-byte loads, 4 elements of a row per thread, where the naive threads read the block's whole tile and
    // its rows start 16-byte aligned; otherwise element by element
    if (cols % 4 == 0 && (((size_t) in) & 15) == 0 && blockIdx.x * 64 + 63 < rows
        && blockIdx.y * 64 + 63 < cols) {
        const int tid = threadIdx.y * 64 + threadIdx.x;
        const int vrow = tid / 16;
        const int vcol = tid % 16 * 4;
        #pragma unroll
        for (int rr = 0; rr < 64; rr += 32) {
            const float4 v = *((const float4 *) (&in[(blockIdx.x * 64 + rr + vrow) * cols + blockIdx.y * 64 + vcol]));
            tile_in[rr + vrow][vcol] = v.x;
            tile_in[rr + vrow][vcol + 1] = v.y;
            tile_in[rr + vrow][vcol + 2] = v.z;
            tile_in[rr + vrow][vcol + 3] = v.w;
        }
    } else {
        #pragma unroll
        for (int rr = 0; rr < 64; rr += 8)
            tile_in[rr + threadIdx.y][threadIdx.x] = (blockIdx.x * 64 + rr + threadIdx.y < rows
                                                      && blockIdx.y * 64 + threadIdx.x < cols)
                    ? in[(blockIdx.x * 64 + rr + threadIdx.y) * cols + blockIdx.y * 64 + threadIdx.x] : 0.0f;
    }
    __syncthreads();
    // coalesce: each thread computes 8 rows of the block's 64x64 outputs, 8 apart
    #pragma unroll
    for (int r = 0; r < 64; r += 8) {
        int y = y0 + r;
        if (x < rows && y < cols)
            out[y * rows + x] = tile_in[threadIdx.x][threadIdx.y + r];
    }
}
