/* conv.cu -- naive 2-D convolution with a FILTER x FILTER (16x16) filter on a pre-padded input:
 * out[y][x] = sum_{j,i < FILTER} in[y+j][x+i] * filt[j][i]; in is (height+FILTER-1) x (width+FILTER-1).
 * 2-D launch, one thread per output pixel: x in 0..width-1, y in 0..height-1 (e.g. 16x16 blocks). */

#define FILTER 16

__global__ void conv(const float *in, const float *filt, float *out, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        float sum = 0.0f;
        for (int j = 0; j < FILTER; j++)
            for (int i = 0; i < FILTER; i++)
                sum += in[(y + j) * (width + FILTER - 1) + (x + i)] * filt[j * FILTER + i];
        out[y * width + x] = sum;
    }
}
