/* bilinear_resize.cu -- resize a single-channel in_w x in_h image to out_w x out_h by bilinear interpolation
 * (align-corners off, source coordinates clamped to the image). 2-D launch, one thread per output pixel. */
__global__ void bilinear_resize(const float *src, float *dst, int in_w, int in_h, int out_w, int out_h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= out_w || y >= out_h)
        return;
    float sx = (x + 0.5f) * ((float)in_w / out_w) - 0.5f;
    float sy = (y + 0.5f) * ((float)in_h / out_h) - 0.5f;
    sx = fminf(fmaxf(sx, 0.0f), in_w - 1.0f);
    sy = fminf(fmaxf(sy, 0.0f), in_h - 1.0f);
    int x0 = (int)sx;
    int y0 = (int)sy;
    int x1 = min(x0 + 1, in_w - 1);
    int y1 = min(y0 + 1, in_h - 1);
    float fx = sx - x0;
    float fy = sy - y0;
    float top = src[y0 * in_w + x0] * (1.0f - fx) + src[y0 * in_w + x1] * fx;
    float bottom = src[y1 * in_w + x0] * (1.0f - fx) + src[y1 * in_w + x1] * fx;
    dst[y * out_w + x] = top * (1.0f - fy) + bottom * fy;
}
