/* conv.cu -- naive 2-D convolution with a FILTER x FILTER (16x16) filter on a pre-padded input:
 * out[y][x] = sum_{j,i < FILTER} in[y+j][x+i] * filt[j][i]; in is (height+FILTER-1) x (width+FILTER-1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1 (e.g. 16x16 blocks). */

#define FILTER 16

// gpgpu-opt: launch configuration of the optimized 'conv': blocks of 16x16 threads,
// each covering 16x16 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 conv_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(16, 16);
}

__attribute__((unused)) static dim3 conv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 15) / 16, (global_y + 15) / 16);
}

// gpgpu_opt launch block(16, 16) grid((global_x + 15) / 16, (global_y + 15) / 16)
__global__ void conv(const float *in, const float *filt, float *out, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    // coalesce: stage the in reads' footprint in tile_in (31x31: the block's 16x16 outputs and the stencil's
    // reach, 0 up, 15 down, 0 left, 15 right), each element once
    const int row0 = blockIdx.y * 16;
    const int col0 = blockIdx.x * 16;
    __shared__ float tile_in[31][31];
    if (col0 < width && row0 < height)
        for (int elem = threadIdx.y * 16 + threadIdx.x; elem < 961; elem += 256) {
            const int row = row0 + elem / 31;
            const int col = col0 + elem % 31;
            tile_in[elem / 31][elem % 31] = (row < height + 15 && col < width + 15)
                    ? in[row * (width + 15) + col] : 0.0f;
        }
    // coalesce: stage filt[j * 16 + i], the same for every thread, in tile_filt (256 elements), each element
    // once
    __shared__ float tile_filt[256];
    if (col0 < width && row0 < height)
        for (int elem = threadIdx.y * 16 + threadIdx.x; elem < 256; elem += 256)
            tile_filt[elem] = filt[elem];
    __syncthreads();
    if (x < width && y < height) {
        float sum = 0.0f;
        for (int j = 0; j < 16; j++)
            for (int i = 0; i < 16; i++) {
                sum += tile_in[threadIdx.y + j][threadIdx.x + i] * tile_filt[j * 16 + i];
            }
        out[y * width + x] = sum;
    }
}
