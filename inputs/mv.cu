/* mv.cu -- naive matrix-vector product y = A x, A is rows x cols row-major.
 * 1-D launch, one thread per row: x = r (0..rows-1), y = 1; e.g. 256-thread blocks,
 * grid (rows+255)/256. */

__global__ void mv(const float *A, const float *x, float *y, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0;
        for (int c = 0; c < cols; c++)
            sum += A[r * cols + c] * x[c];
        y[r] = sum;
    }
}
