/* softmax_normalize.cu -- the last step of a softmax: y[i][j] = expf(x[i][j] - row_max[i]) / denom[i].
 * 2-D launch, one thread per element: x = column j, y = row i, 16x16 blocks. */
__global__ void softmax_normalize(const float *x, const float *row_max, const float *denom, float *y,
                                  int rows, int cols)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < rows && j < cols)
        y[i * cols + j] = expf(x[i * cols + j] - row_max[i]) / denom[i];
}
