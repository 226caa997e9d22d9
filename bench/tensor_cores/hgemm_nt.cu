/* hgemm_nt.cu -- hgemm_nn.cu with B stored transposed (N x K, row-major: B[col * K + k]), as a product with a
 * weight matrix kept one output feature per row is written. */
#include <cuda_fp16.h>

__global__ void hgemm_nt(const __half *A, const __half *B, float *C, int M, int N, int K, float alpha, float beta)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; k++)
            sum += __half2float(A[row * K + k]) * __half2float(B[col * K + k]);
        C[row * N + col] = alpha * sum + beta * C[row * N + col];
    }
}
