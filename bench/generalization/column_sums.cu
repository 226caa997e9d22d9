/* column_sums.cu -- sums[col] = sum over the rows of m[row][col], m row-major rows x cols.
 * 1-D launch, one thread per column; each thread walks down its column. */
__global__ void column_sums(const float *m, float *sums, int rows, int cols)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col < cols) {
        float total = 0.0f;
        for (int row = 0; row < rows; row++)
            total += m[row * cols + col];
        sums[col] = total;
    }
}
