/* batched_matmul.cu -- C[b] = A[b] B[b] for a batch of row-major M x K by K x N products.
 * 3-D launch: x = column, y = row, z = the batch (blockIdx.z), 16x16x1 blocks. */
__global__ void batched_matmul(const float *A, const float *B, float *C, int M, int N, int K)
{
    int batch = blockIdx.z;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        const float *a = A + (size_t)batch * M * K;
        const float *b = B + (size_t)batch * K * N;
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += a[row * K + k] * b[k * N + col];
        C[(size_t)batch * M * N + row * N + col] = acc;
    }
}
