/* row_sum_exp.cu -- softmax denominators: denom[i] = sum_j expf(x[i][j] - row_max[i]), x row-major.
 * 1-D launch, one thread per row. */
__global__ void row_sum_exp(const float *x, const float *row_max, float *denom, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {
        float m = row_max[i];
        float s = 0.0f;
        for (int j = 0; j < cols; j++)
            s += expf(x[i * cols + j] - m);
        denom[i] = s;
    }
}
