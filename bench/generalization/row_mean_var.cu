/* row_mean_var.cu -- layer-norm statistics: the mean and the (biased) variance of every row of x (rows x cols,
 * row-major), two passes over the row. 1-D launch, one thread per row. */
__global__ void row_mean_var(const float *x, float *mean, float *var, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    float sum = 0.0f;
    for (int c = 0; c < cols; c++)
        sum += x[r * cols + c];
    float mu = sum / cols;
    float sq = 0.0f;
    for (int c = 0; c < cols; c++) {
        float d = x[r * cols + c] - mu;
        sq += d * d;
    }
    mean[r] = mu;
    var[r] = sq / cols;
}
