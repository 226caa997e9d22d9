/**
 * syrk.cu: symmetric rank-k update
 *   C = alpha * A * A^T + beta * C     (C is N x N, A is N x M)
 *
 * One 2-D kernel over all of C, C updated in place. Sizes are macros used
 * inside the kernel (-DN=... -DM=...).
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Problem size */
#ifndef N
#define N 1024
#endif
#ifndef M
#define M 512
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

/* Declared constant values for alpha and beta */
#define alpha 12435
#define beta 4546

typedef float DATA_TYPE;

void init_arrays(DATA_TYPE *A, DATA_TYPE *C)
{
	int i, j;

	for (i = 0; i < N; i++)
	{
		for (j = 0; j < M; j++)
		{
			A[i * M + j] = ((DATA_TYPE)((i * j) % 101)) / N;
		}

		for (j = 0; j < N; j++)
		{
			C[i * N + j] = ((DATA_TYPE)((i * (j + 2)) % 103)) / N;
		}
	}
}

void syrk(DATA_TYPE *A, DATA_TYPE *C)
{
	int i, j, k;

	/*  C := alpha*A*A' + beta*C */
	for (i = 0; i < N; i++)
	{
		for (j = 0; j < N; j++)
		{
			DATA_TYPE c = C[i * N + j] * beta;
			for (k = 0; k < M; k++)
			{
				c += alpha * A[i * M + k] * A[j * M + k];
			}
			C[i * N + j] = c;
		}
	}
}

__global__ void syrk_kernel(DATA_TYPE ALPHA, DATA_TYPE BETA, DATA_TYPE *a, DATA_TYPE *c)
{
	/*  C := alpha*A*A' + beta*C */
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < N) && (j < N))
	{
		c[i * N + j] *= beta;
		int k;
		for (k = 0; k < M; k++)
		{
			c[i * N + j] += alpha * a[i * M + k] * a[j * M + k];
		}
	}
}

void syrkCuda(DATA_TYPE *A, DATA_TYPE *C, DATA_TYPE *C_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *C_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * N * M);
	cudaMalloc((void **)&C_gpu, sizeof(DATA_TYPE) * N * N);
	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * N * M, cudaMemcpyHostToDevice);
	cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * N * N, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)(ceil(((float)N) / ((float)DIM_THREAD_BLOCK_X))), (size_t)ceil(((float)N) / ((float)DIM_THREAD_BLOCK_Y)));

	t_start = rtclock();
	syrk_kernel<<<grid, block>>>(alpha, beta, A_gpu, C_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(C_outputFromGpu, C_gpu, sizeof(DATA_TYPE) * N * N, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(C_gpu);
}

int main()
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *A;
	DATA_TYPE *C;
	DATA_TYPE *C_outputFromGpu;

	A = (DATA_TYPE *)malloc(N * M * sizeof(DATA_TYPE));
	C = (DATA_TYPE *)malloc(N * N * sizeof(DATA_TYPE));
	C_outputFromGpu = (DATA_TYPE *)malloc(N * N * sizeof(DATA_TYPE));

	init_arrays(A, C);

	cudaSetDevice(GPU_DEVICE);
	syrkCuda(A, C, C_outputFromGpu);

	t_start = rtclock();
	syrk(A, C);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(C, C_outputFromGpu, N * N, PERCENT_DIFF_ERROR_THRESHOLD);

	free(A);
	free(C);
	free(C_outputFromGpu);

	return fail > 0;
}
