/**
 * transpose_rowsum.cu: out-of-place transpose B = A^T, then the row sums of A
 *
 * Two kernels: a 2-D transpose (one thread per element of B, sizes from the NI/NJ macros) and a 1-D
 * row sum (one thread per row, the sizes as kernel parameters).
 * ./transpose_rowsum
 */

#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>

#include "common/bench_utils.c"

/* Default problem size: A is NI x NJ */
#ifndef NI
#define NI 2048
#endif
#ifndef NJ
#define NJ 1536
#endif

#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
#define ROW_BLOCK 128

typedef float DATA_TYPE;

void transpose_cpu(DATA_TYPE *A, DATA_TYPE *B)
{
	int i, j;
	for (i = 0; i < NI; i++)
		for (j = 0; j < NJ; j++)
			B[j * NI + i] = A[i * NJ + j];
}

void rowsum_cpu(int ni, int nj, DATA_TYPE *A, DATA_TYPE *s)
{
	int i, j;
	for (i = 0; i < ni; i++)
	{
		s[i] = 0;
		for (j = 0; j < nj; j++)
			s[i] += A[i * nj + j];
	}
}

__global__ void transpose_kernel(DATA_TYPE *a, DATA_TYPE *b)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	int j = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < NI) && (j < NJ))
	{
		b[j * NI + i] = a[i * NJ + j];
	}
}

__global__ void rowsum_kernel(int ni, int nj, DATA_TYPE *a, DATA_TYPE *s)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < ni)
	{
		DATA_TYPE acc = 0;
		for (int j = 0; j < nj; j++)
		{
			acc += a[i * nj + j];
		}
		s[i] = acc;
	}
}

int main(int argc, char *argv[])
{
	double t_start, t_end;
	int fail = 0;
	DATA_TYPE *A = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	DATA_TYPE *B = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	DATA_TYPE *B_outputFromGpu = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	DATA_TYPE *s = (DATA_TYPE *)malloc(NI * sizeof(DATA_TYPE));
	DATA_TYPE *s_outputFromGpu = (DATA_TYPE *)malloc(NI * sizeof(DATA_TYPE));
	DATA_TYPE *A_gpu;
	DATA_TYPE *B_gpu;
	DATA_TYPE *s_gpu;

	bench_srand(5);
	init_random_matrix(A, NI, NJ);

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NJ);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NI * NJ);
	cudaMalloc((void **)&s_gpu, sizeof(DATA_TYPE) * NI);
	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((NI + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X, (NJ + DIM_THREAD_BLOCK_Y - 1) / DIM_THREAD_BLOCK_Y);
	dim3 rowBlock(ROW_BLOCK);
	dim3 rowGrid((NI + ROW_BLOCK - 1) / ROW_BLOCK);

	t_start = rtclock();
	transpose_kernel<<<grid, block>>>(A_gpu, B_gpu);
	rowsum_kernel<<<rowGrid, rowBlock>>>(NI, NJ, A_gpu, s_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaMemcpy(B_outputFromGpu, B_gpu, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyDeviceToHost);
	cudaMemcpy(s_outputFromGpu, s_gpu, sizeof(DATA_TYPE) * NI, cudaMemcpyDeviceToHost);

	t_start = rtclock();
	transpose_cpu(A, B);
	rowsum_cpu(NI, NJ, A, s);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail += compareResults(B, B_outputFromGpu, NI * NJ, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(s, s_outputFromGpu, NI, PERCENT_DIFF_ERROR_THRESHOLD);

	cudaFree(A_gpu);
	cudaFree(B_gpu);
	cudaFree(s_gpu);
	free(A);
	free(B);
	free(B_outputFromGpu);
	free(s);
	free(s_outputFromGpu);
	return fail > 0;
}
