/* conv2d_5x5.cu -- a 5x5 filter over an image padded by 2 on each side: out is w x h, in is (w + 4) x (h + 4),
 * both row-major; the filter's 25 weights are a kernel argument array. 2-D launch, one thread per output pixel. */
#define RADIUS 2
#define TAPS (2 * RADIUS + 1)

__global__ void conv2d_5x5(const float *in, const float *filter, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) {
        int in_w = w + 2 * RADIUS;
        float acc = 0.0f;
        for (int fy = 0; fy < TAPS; fy++)
            for (int fx = 0; fx < TAPS; fx++)
                acc += filter[fy * TAPS + fx] * in[(y + fy) * in_w + (x + fx)];
        out[y * w + x] = acc;
    }
}
