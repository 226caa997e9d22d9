/* conv.cu -- naive 2-D convolution with a FILTER x FILTER (16x16) filter on a pre-padded input:
 * out[y][x] = sum_{j,i < FILTER} in[y+j][x+i] * filt[j][i]; in is (height+FILTER-1) x (width+FILTER-1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1 (e.g. 16x16 blocks). */

#define FILTER 16

// gpgpu-opt: launch configuration of the optimized 'conv': blocks of 32x8 threads,
// each covering 32x8 threads of the naive launch (one thread per output).
static dim3 conv_block(dim3 naive_grid, dim3 naive_block)
{
    return dim3(32, 8);
}

static dim3 conv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 31) / 32, (global_y + 7) / 8);
}

#pragma gpgpu_opt launch block(32, 8) grid((global_x + 31) / 32, (global_y + 7) / 8)
__global__ void conv(const float *in, const float *filt, float *out, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    // coalesce: stage the in reads' footprint in tile_in (23x47: the block's 32x8 outputs and the stencil's reach, 0 up, 15 down, 0 left, 15 right), each element once
    const int row0 = blockIdx.y * 8;
    const int col0 = blockIdx.x * 32;
    __shared__ float tile_in[23][47];
    if (col0 < width && row0 < height)
        for (int elem = threadIdx.y * 32 + threadIdx.x; elem < 1081; elem += 256) {
            const int row = row0 + elem / 47;
            const int col = col0 + elem % 47;
            tile_in[elem / 47][elem % 47] = (row < height + 15 && col < width + 15) ? in[row * (width + 15) + col] : 0.0f;
        }
    __syncthreads();
    if (x < width && y < height) {
        float sum = 0.0f;
        for (int j = 0; j < 16; j++)
            for (int i = 0; i < 16; i++) {
                const float in_val = tile_in[threadIdx.y + j][threadIdx.x + i];
                const float filt_val = filt[j * 16 + i];
                sum += in_val * filt_val;
            }
        out[y * width + x] = sum;
    }
}
