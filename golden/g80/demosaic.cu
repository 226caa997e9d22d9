/* demosaic.cu -- naive bilinear demosaicing of an RGGB Bayer image into R, G, B planes (width x height).
 * raw is pre-padded by 1 pixel on every side: (height+2) x (width+2), pixel (y,x) lives at RAW(y+1,x+1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1. */

#define RAW(yy, xx) raw[(yy) * (width + 2) + (xx)]

// gpgpu-opt: launch configuration of the optimized 'demosaic': blocks of 16x16 threads,
// each covering 16x16 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 demosaic_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(16, 16);
}

__attribute__((unused)) static dim3 demosaic_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 15) / 16, (global_y + 15) / 16);
}

// gpgpu_opt launch block(16, 16) grid((global_x + 15) / 16, (global_y + 15) / 16)
__global__ void demosaic(const float *raw, float *r, float *g, float *b, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    // coalesce: stage the raw reads' footprint in tile_raw (18x18: the block's 16x16 outputs and the
    // stencil's reach, 0 up, 2 down, 0 left, 2 right), each element once
    const int row0 = blockIdx.y * 16;
    const int col0 = blockIdx.x * 16;
    __shared__ float tile_raw[18][18];
    if (col0 < width && row0 < height)
        for (int elem = threadIdx.y * 16 + threadIdx.x; elem < 324; elem += 256) {
            const int row = row0 + elem / 18;
            const int col = col0 + elem % 18;
            tile_raw[elem / 18][elem % 18] = (row < height + 2 && col < width + 2)
                    ? raw[row * (width + 2) + col] : 0.0f;
        }
    __syncthreads();
    if (x < width && y < height) {
        float nw = tile_raw[threadIdx.y][threadIdx.x];
        float n = tile_raw[threadIdx.y][threadIdx.x + 1];
        float ne = tile_raw[threadIdx.y][threadIdx.x + 2];
        float w = tile_raw[threadIdx.y + 1][threadIdx.x];
        float c = tile_raw[threadIdx.y + 1][threadIdx.x + 1];
        float e = tile_raw[threadIdx.y + 1][threadIdx.x + 2];
        float sw = tile_raw[threadIdx.y + 2][threadIdx.x];
        float s = tile_raw[threadIdx.y + 2][threadIdx.x + 1];
        float se = tile_raw[threadIdx.y + 2][threadIdx.x + 2];
        float cross = 0.25f * (n + s + w + e);
        float diag = 0.25f * (nw + ne + sw + se);
        float horiz = 0.5f * (w + e);
        float vert = 0.5f * (n + s);
        float rv;
        float gv;
        float bv;
        if (y % 2 == 0) {
            if (x % 2 == 0) {
                rv = c;
                gv = cross;
                bv = diag;
            } else {
                rv = horiz;
                gv = c;
                bv = vert;
            }
        } else {
            if (x % 2 == 0) {
                rv = vert;
                gv = c;
                bv = horiz;
            } else {
                rv = diag;
                gv = cross;
                bv = c;
            }
        }
        r[y * width + x] = rv;
        g[y * width + x] = gv;
        b[y * width + x] = bv;
    }
}
