/* conv.cu -- naive 2-D convolution with a FILTER x FILTER (16x16) filter on a pre-padded input:
 * out[y][x] = sum_{j,i < FILTER} in[y+j][x+i] * filt[j][i]; in is (height+FILTER-1) x (width+FILTER-1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1 (e.g. 16x16 blocks). */

#define FILTER 16

// gpgpu-opt: launch configuration of the optimized 'conv': blocks of 256x1 threads,
// each covering 256x1 threads of the naive launch (one thread per output).
static dim3 conv_block(dim3 naive_grid, dim3 naive_block)
{
    return dim3(256, 1);
}

static dim3 conv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 255) / 256, global_y);
}

#pragma gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, global_y)
__global__ void conv(const float *in, const float *filt, float *out, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    // merge: 16 blocks of 16x1 threads merged in x: they share tile_filt, loaded once per merged block
    __shared__ float tile_filt[16];
    float sum = 0.0f;
    // prefetch: the first step's loads go to registers (filt_next); each step stores them to its tiles and loads the next step's while it computes
    float filt_next;
    if (threadIdx.x < 16)
        filt_next = (blockIdx.x * 256 < width && y < height && threadIdx.x < 16) ? filt[threadIdx.x] : 0.0f;
    for (int j = 0; j < 16; j++) {
        // coalesce: the 16 iterations of 'i' read one staged step
        // coalesce: stage filt[j * 16 + i] in tile_filt (16: filt's segment in this step of 'i')
        if (threadIdx.x < 16)
            tile_filt[threadIdx.x] = filt_next;
        __syncthreads();
        // prefetch: the next step's loads, in flight during this step's computation
        const int j_next = j + 1;
        if (j_next < 16) {
            if (threadIdx.x < 16)
                filt_next = (blockIdx.x * 256 < width && y < height && threadIdx.x < 16) ? filt[j_next * 16 + threadIdx.x] : 0.0f;
        }
        if (x < width && y < height) {
            #pragma unroll
            for (int i = 0; i < 16; i++) {
                const float in_val = in[(y + j) * (width + 16 - 1) + (x + i)];
                const float filt_val = tile_filt[i];
                sum += in_val * filt_val;
            }
        }
        __syncthreads();
    }
    if (x < width && y < height)
        out[y * width + x] = sum;
}
