/* dgemm_nn.cu -- a naive double-precision product C = alpha * A * B + beta * C, row-major A (M x K) and
 * B (K x N), one thread per element of C; launched with 16x16 blocks over (N, M). */
__global__ void dgemm_nn(const double *A, const double *B, double *C, int M, int N, int K, double alpha, double beta)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        double sum = 0.0;
        for (int k = 0; k < K; k++)
            sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}
