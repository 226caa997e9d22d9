/* demosaic.cu -- naive bilinear demosaicing of an RGGB Bayer image into R, G, B planes (width x height).
 * raw is pre-padded by 1 pixel on every side: (height+2) x (width+2), pixel (y,x) lives at RAW(y+1,x+1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1. */

#define RAW(yy, xx) raw[(yy) * (width + 2) + (xx)]

// gpgpu-opt: launch configuration of the optimized 'demosaic': blocks of 32x8 threads,
// each covering 128x32 threads of the naive launch (16 outputs per thread).
__attribute__((unused)) static dim3 demosaic_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(32, 8);
}

__attribute__((unused)) static dim3 demosaic_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 127) / 128, (global_y + 31) / 32);
}

// gpgpu_opt launch block(32, 8) grid((global_x + 127) / 128, (global_y + 31) / 32)
__global__ void demosaic(const float *raw, float *r, float *g, float *b, int width, int height) {
    // stencil window: each thread computes 4 x 4 outputs from a register window of raw; 2 float2 loads per
    // row, the neighbouring columns from the neighbouring lanes (__shfl_up/down_sync)
    const int x0 = (blockIdx.x * 32 + threadIdx.x) * 4;
    const int y0 = (blockIdx.y * 8 + threadIdx.y) * 4;
    float raw_win[6][6];
    #pragma unroll
    for (int i = 0; i < 6; i++) {
        const int row = y0 + i;
        const int row_read = row < height + 2 && 0 < width && 0 < height;
        if (row_read && x0 + 3 < width + 2 && (((size_t) (raw + row * (width + 2) + x0)) & 7) == 0) {
            const float2 pair0 = *((const float2 *) (&raw[row * (width + 2) + x0]));
            raw_win[i][0] = pair0.x;
            raw_win[i][1] = pair0.y;
            const float2 pair2 = *((const float2 *) (&raw[row * (width + 2) + x0 + 2]));
            raw_win[i][2] = pair2.x;
            raw_win[i][3] = pair2.y;
        } else {
            #pragma unroll
            for (int e2 = 0; e2 < 4; e2++)
                raw_win[i][e2] = (row_read && x0 + e2 < width + 2) ? raw[row * (width + 2) + x0 + e2] : 0;
        }
        raw_win[i][4] = (threadIdx.x == 31 && row_read && x0 + 4 < width + 2)
                ? raw[row * (width + 2) + x0 + 4] : 0;
        raw_win[i][5] = (threadIdx.x == 31 && row_read && x0 + 5 < width + 2)
                ? raw[row * (width + 2) + x0 + 5] : 0;
    }
    #pragma unroll
    for (int i = 0; i < 6; i++) {
        const float from_right1 = __shfl_down_sync(0xffffffffu, raw_win[i][0], 1);
        const float from_right2 = __shfl_down_sync(0xffffffffu, raw_win[i][1], 1);
        if (threadIdx.x != 31) {
            raw_win[i][4] = from_right1;
            raw_win[i][5] = from_right2;
        }
    }
    if (x0 + 3 < width && y0 + 3 < height) {
        // interior: every copy's guard holds, so the copies run unguarded, each row of r, g, b one float4
        // store where aligned (else element by element)
        #pragma unroll
        for (int r2 = 0; r2 < 4; r2++) {
            float r_row[4];
            float g_row[4];
            float b_row[4];
            #pragma unroll
            for (int v = 0; v < 4; v++) {
                int x = x0 + v;
                int y = y0 + r2;
                float nw = raw_win[r2][v];
                float n = raw_win[r2][v + 1];
                float ne = raw_win[r2][v + 2];
                float w = raw_win[r2 + 1][v];
                float c = raw_win[r2 + 1][v + 1];
                float e = raw_win[r2 + 1][v + 2];
                float sw = raw_win[r2 + 2][v];
                float s = raw_win[r2 + 2][v + 1];
                float se = raw_win[r2 + 2][v + 2];
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
                r_row[v] = rv;
                g_row[v] = gv;
                b_row[v] = bv;
            }
            if ((((size_t) r) & 15) == 0 && (((size_t) g) & 15) == 0 && (((size_t) b) & 15) == 0
                && width % 4 == 0) {
                *((float4 *) (&r[(y0 + r2) * width + x0])) = make_float4(r_row[0], r_row[1], r_row[2],
                        r_row[3]);
                *((float4 *) (&g[(y0 + r2) * width + x0])) = make_float4(g_row[0], g_row[1], g_row[2],
                        g_row[3]);
                *((float4 *) (&b[(y0 + r2) * width + x0])) = make_float4(b_row[0], b_row[1], b_row[2],
                        b_row[3]);
            } else if ((((size_t) r) & 7) == 0 && (((size_t) g) & 7) == 0 && (((size_t) b) & 7) == 0
                       && width % 2 == 0) {
                *((float2 *) (&r[(y0 + r2) * width + x0])) = make_float2(r_row[0], r_row[1]);
                *((float2 *) (&r[(y0 + r2) * width + x0 + 2])) = make_float2(r_row[2], r_row[3]);
                *((float2 *) (&g[(y0 + r2) * width + x0])) = make_float2(g_row[0], g_row[1]);
                *((float2 *) (&g[(y0 + r2) * width + x0 + 2])) = make_float2(g_row[2], g_row[3]);
                *((float2 *) (&b[(y0 + r2) * width + x0])) = make_float2(b_row[0], b_row[1]);
                *((float2 *) (&b[(y0 + r2) * width + x0 + 2])) = make_float2(b_row[2], b_row[3]);
            } else {
                #pragma unroll
                for (int v = 0; v < 4; v++) {
                    r[(y0 + r2) * width + x0 + v] = r_row[v];
                    g[(y0 + r2) * width + x0 + v] = g_row[v];
                    b[(y0 + r2) * width + x0 + v] = b_row[v];
                }
            }
        }
    } else {
        // the edges: each copy is a naive thread's statements, with its own guard, reading the window
        #pragma unroll
        for (int r2 = 0; r2 < 4; r2++) {
            #pragma unroll
            for (int v = 0; v < 4; v++) {
                int x = x0 + v;
                int y = y0 + r2;
                if (x < width && y < height) {
                    float nw = raw_win[r2][v];
                    float n = raw_win[r2][v + 1];
                    float ne = raw_win[r2][v + 2];
                    float w = raw_win[r2 + 1][v];
                    float c = raw_win[r2 + 1][v + 1];
                    float e = raw_win[r2 + 1][v + 2];
                    float sw = raw_win[r2 + 2][v];
                    float s = raw_win[r2 + 2][v + 1];
                    float se = raw_win[r2 + 2][v + 2];
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
        }
    }
}
