/* row_max.cu -- the first step of a softmax: row_max[i] = max_j x[i][j], x row-major. 1-D launch, one thread a row. */
__global__ void row_max(const float *x, float *maxima, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {
        float m = x[i * cols];
        for (int j = 1; j < cols; j++)
            m = fmaxf(m, x[i * cols + j]);
        maxima[i] = m;
    }
}
