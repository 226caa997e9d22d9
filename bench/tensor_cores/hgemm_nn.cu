/* hgemm_nn.cu -- a naive half-input product with a float accumulator, C = alpha * A * B + beta * C: row-major
 * __half A (M x K) and B (K x N), float C, one thread per element of C; launched with 16x16 blocks over (N, M). */
#include <cuda_fp16.h>

__global__ void hgemm_nn(const __half *A, const __half *B, float *C, int M, int N, int K, float alpha, float beta)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}
