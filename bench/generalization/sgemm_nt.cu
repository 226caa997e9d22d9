/* sgemm_nt.cu -- C = A B^T in FP32: A is M x K, B is N x K (both row-major, so both walk along k), C is M x N.
 * 2-D launch: x = column, y = row of C. */
__global__ void sgemm_nt(const float *A, const float *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += A[row * K + k] * B[col * K + k];
        C[row * N + col] = sum;
    }
}
