/* conv.cu -- naive 2-D convolution with a FILTER x FILTER (16x16) filter on a pre-padded input:
 * out[y][x] = sum_{j,i < FILTER} in[y+j][x+i] * filt[j][i]; in is (height+FILTER-1) x (width+FILTER-1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1 (e.g. 16x16 blocks). */

#define FILTER 16

// gpgpu-opt: launch configuration of the optimized 'conv': blocks of 16x8 threads,
// each covering 128x64 threads of the naive launch (64 outputs per thread).
__attribute__((unused)) static dim3 conv_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(16, 8);
}

__attribute__((unused)) static dim3 conv_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 127) / 128, (global_y + 63) / 64);
}

// gpgpu_opt launch block(16, 8) grid((global_x + 127) / 128, (global_y + 63) / 64)
__global__ __launch_bounds__(128, 4) void conv(const float *in, const float *filt, float *out, int width,
                                               int height) {
    // merge: 8x8 outputs per thread; the block's halo tile of in and the filter in shared memory, each input
    // row read into registers once for the 8 output rows it feeds
    __shared__ __align__(16) float tile_in[79][144];
    __shared__ __align__(16) float tile_filt[16][16];
    const int first_row = blockIdx.y * 64;
    const int first_col = blockIdx.x * 128;
    // the block's window of in: its outputs plus the filter's reach
    const int window_rows = 64 + 15;
    const int window_cols = 128 + 15;
    // in[(y + j) * (width + 16 - 1) + (x + i)] for the block's 64x128 outputs plus the filter's reach, where
    // an output in range reads it: 4 batches of 23 loads per thread, a batch's loads all issued before its
    // stores so that they are in flight together
    for (int batch = 0; batch < 4; batch++) {
        float in_staged[23];
        #pragma unroll
        for (int l = 0; l < 23; l++) {
            const int e = (batch * 23 + l) * 128 + threadIdx.y * 16 + threadIdx.x;
            const int tile_row = e / window_cols;
            const int tile_col = e % window_cols;
            in_staged[l] = (e < window_rows * window_cols
                            && first_col + ((tile_col < 15) ? 0 : (tile_col - 15)) < width
                            && first_row + ((tile_row < 15) ? 0 : (tile_row - 15)) < height)
                    ? in[(first_row + tile_row) * (width + 15) + first_col + tile_col] : 0;
        }
        #pragma unroll
        for (int l = 0; l < 23; l++) {
            const int e = (batch * 23 + l) * 128 + threadIdx.y * 16 + threadIdx.x;
            if (e < window_rows * window_cols)
                tile_in[e / window_cols][e % window_cols] = in_staged[l];
        }
    }
    // filt[j * 16 + i] for every step of the filter: the same for all outputs
    for (int e = threadIdx.y * 16 + threadIdx.x; e < 256; e += 128) {
        const int tile_row = e / 16;
        const int tile_col = e % 16;
        tile_filt[tile_row][tile_col] = (first_col < width && first_row < height)
                ? filt[tile_col + tile_row * 16] : 0;
    }
    __syncthreads();
    float sum[8][8];
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        #pragma unroll
        for (int c = 0; c < 8; c++) {
            sum[r][c] = 0.0f;
        }
    }
    // input row 'row' of the thread's window feeds output row r with filter row row - r, in the naive order
    // of the sums
    for (int row = 0; row < 23; row++) {
        float in_row[23];
        #pragma unroll
        for (int c = 0; c < 23; c++)
            in_row[c] = tile_in[threadIdx.y * 8 + row][threadIdx.x * 8 + c];
        #pragma unroll
        for (int r = 0; r < 8; r++) {
            const int j = row - r;
            if (j >= 0 && j < 16) {
                #pragma unroll
                for (int i = 0; i < 16; i++) {
                    #pragma unroll
                    for (int c = 0; c < 8; c++) {
                        sum[r][c] += in_row[c + i] * tile_filt[j][i];
                    }
                }
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        #pragma unroll
        for (int c = 0; c < 8; c++) {
            int x = blockIdx.x * 128 + threadIdx.x * 8 + c;
            int y = blockIdx.y * 64 + threadIdx.y * 8 + r;
            if (x < width && y < height) {
                out[y * width + x] = sum[r][c];
            }
        }
    }
}
