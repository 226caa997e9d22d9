/* sgemm_nt.cu -- the same product with B stored transposed (N x K, `B[col * K + k]`), as a row of B^T per
 * output column. */
__global__ void sgemm_nt(const float *A, const float *B, float *C, int M, int N, int K, float alpha, float beta)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[col * K + k];
        C[row * N + col] = alpha * acc + beta * C[row * N + col];
    }
}
