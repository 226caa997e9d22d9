/* dgemm.cu -- C = A B in FP64, square n x n, row-major.
 * 2-D launch: x = column, y = row of C, 16x16 blocks. */
__global__ void dgemm(const double *A, const double *B, double *C, int n)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        double sum = 0.0;
        for (int k = 0; k < n; k++)
            sum += A[row * n + k] * B[k * n + col];
        C[row * n + col] = sum;
    }
}
