/* transpose.cu -- naive matrix transpose: out (cols x rows) = in^T, in is rows x cols row-major.
 * 2-D launch over the OUTPUT: x in 0..rows-1 (output column), y in 0..cols-1 (output row);
 * writes are coalesced, reads are strided by cols. */

// gpgpu-opt: launch configuration of the optimized 'transpose': blocks of 16x16 threads,
// each covering 16x16 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 transpose_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(16, 16);
}

__attribute__((unused)) static dim3 transpose_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 15) / 16, (global_y + 15) / 16);
}

// gpgpu_opt launch block(16, 16) grid((global_x + 15) / 16, (global_y + 15) / 16)
__global__ void transpose(const float *in, float *out, int rows, int cols) {
    // partition: blocks take their tiles in diagonal order, so that the blocks running at once read different
    // DRAM partitions
    const unsigned int block_id = blockIdx.x + gridDim.x * blockIdx.y;
    const unsigned int block_y = block_id % gridDim.y;
    const unsigned int block_x = (block_id / gridDim.y + block_y) % gridDim.x;
    int x = block_x * blockDim.x + threadIdx.x;
    int y = block_y * blockDim.y + threadIdx.y;
    __shared__ float tile_in[16][17];
    // coalesce: stage in[x * cols + y] in tile_in (16x16: rows of in read by the block)
    tile_in[threadIdx.y][threadIdx.x] = (block_x * 16 + threadIdx.y < rows
                                         && block_y * 16 + threadIdx.x < cols)
            ? in[(block_x * 16 + threadIdx.y) * cols + block_y * 16 + threadIdx.x] : 0.0f;
    __syncthreads();
    if (x < rows && y < cols)
        out[y * rows + x] = tile_in[threadIdx.x][threadIdx.y];
}
