/* sgemm_nn.cu -- a naive single-precision product C = alpha * A * B + beta * C, row-major A (M x K) and
 * B (K x N), one thread per element of C; launched with 16x16 blocks over (N, M). */
__global__ void sgemm_nn(const float *A, const float *B, float *C, int M, int N, int K, float alpha, float beta)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}
