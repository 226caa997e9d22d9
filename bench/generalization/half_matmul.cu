/* half_matmul.cu -- C = A B with half inputs and a float accumulator and result (mixed precision).
 * 2-D launch: x = column, y = row of C (M x N); A is M x K, B is K x N, row-major. */
#include <cuda_fp16.h>

__global__ void half_matmul(const __half *A, const __half *B, float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
        C[row * N + col] = acc;
    }
}
