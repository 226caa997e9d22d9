/* demosaic.cu -- naive bilinear demosaicing of an RGGB Bayer image into R, G, B planes (width x height).
 * raw is pre-padded by 1 pixel on every side: (height+2) x (width+2), pixel (y,x) lives at RAW(y+1,x+1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1. */

#define RAW(yy, xx) raw[(yy) * (width + 2) + (xx)]

__global__ void demosaic(const float *raw, float *r, float *g, float *b, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        /* 3x3 neighbourhood around the pixel (padded coordinates). */
        float nw = RAW(y, x);
        float n  = RAW(y, x + 1);
        float ne = RAW(y, x + 2);
        float w  = RAW(y + 1, x);
        float c  = RAW(y + 1, x + 1);
        float e  = RAW(y + 1, x + 2);
        float sw = RAW(y + 2, x);
        float s  = RAW(y + 2, x + 1);
        float se = RAW(y + 2, x + 2);

        float cross = 0.25f * (n + s + w + e);
        float diag = 0.25f * (nw + ne + sw + se);
        float horiz = 0.5f * (w + e);
        float vert = 0.5f * (n + s);

        float rv, gv, bv;
        if (y % 2 == 0) {
            if (x % 2 == 0) {        /* red site */
                rv = c;
                gv = cross;
                bv = diag;
            } else {                 /* green site on a red row */
                rv = horiz;
                gv = c;
                bv = vert;
            }
        } else {
            if (x % 2 == 0) {        /* green site on a blue row */
                rv = vert;
                gv = c;
                bv = horiz;
            } else {                 /* blue site */
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
