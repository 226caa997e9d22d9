/**
 * trisolv.cu: back substitution U * X = B for M right-hand sides
 *   U is N x N upper triangular, B and X are N x M (row-major)
 *
 * One 1-D kernel, one thread per column j of X. Each thread walks the rows
 * upward (for (i = N - 1; i >= 0; i--)) and, per row, the already solved
 * unknowns downward (for (k = N - 1; k > i; k--)): down-counting loops and a
 * read of values the same thread wrote earlier. Sizes are macros used inside
 * the kernel (-DN=... -DM=...).
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Problem size */
#ifndef N
#define N 512
#endif
#ifndef M
#define M 4096
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 256
#define DIM_THREAD_BLOCK_Y 1

typedef float DATA_TYPE;

void init_array(DATA_TYPE *U, DATA_TYPE *B)
{
	int i, k;

	bench_srand(23);
	for (i = 0; i < N; i++)
	{
		for (k = 0; k < N; k++)
		{
			if (k < i)
				U[i * N + k] = 0.0f;
			else if (k == i)
				U[i * N + k] = 1.0f + bench_randf();
			else
				U[i * N + k] = bench_randf() / N;
		}
	}
	init_random(B, N * M, 1.0f, 2.0f);
}

void trisolv_cpu(DATA_TYPE *U, DATA_TYPE *B, DATA_TYPE *X)
{
	int i, j, k;
	DATA_TYPE *s = (DATA_TYPE *)malloc(M * sizeof(DATA_TYPE));

	/* all columns at once; per element the same order of operations as the kernel */
	for (i = N - 1; i >= 0; i--)
	{
		for (j = 0; j < M; j++)
			s[j] = B[i * M + j];
		for (k = N - 1; k > i; k--)
			for (j = 0; j < M; j++)
				s[j] -= U[i * N + k] * X[k * M + j];
		for (j = 0; j < M; j++)
			X[i * M + j] = s[j] / U[i * N + i];
	}

	free(s);
}

__global__ void trisolv_kernel(DATA_TYPE *U, DATA_TYPE *B, DATA_TYPE *X)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < M)
	{
		int i, k;
		for (i = N - 1; i >= 0; i--)
		{
			X[i * M + j] = B[i * M + j];
			for (k = N - 1; k > i; k--)
			{
				X[i * M + j] -= U[i * N + k] * X[k * M + j];
			}
			X[i * M + j] = X[i * M + j] / U[i * N + i];
		}
	}
}

void trisolvCuda(DATA_TYPE *U, DATA_TYPE *B, DATA_TYPE *X_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *U_gpu;
	DATA_TYPE *B_gpu;
	DATA_TYPE *X_gpu;

	cudaMalloc((void **)&U_gpu, sizeof(DATA_TYPE) * N * N);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * N * M);
	cudaMalloc((void **)&X_gpu, sizeof(DATA_TYPE) * N * M);

	cudaMemcpy(U_gpu, U, sizeof(DATA_TYPE) * N * N, cudaMemcpyHostToDevice);
	cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * N * M, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)(ceil(((float)M) / ((float)block.x))), 1);

	t_start = rtclock();
	trisolv_kernel<<<grid, block>>>(U_gpu, B_gpu, X_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(X_outputFromGpu, X_gpu, sizeof(DATA_TYPE) * N * M, cudaMemcpyDeviceToHost);

	cudaFree(U_gpu);
	cudaFree(B_gpu);
	cudaFree(X_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *U = (DATA_TYPE *)malloc(N * N * sizeof(DATA_TYPE));
	DATA_TYPE *B = (DATA_TYPE *)malloc(N * M * sizeof(DATA_TYPE));
	DATA_TYPE *X = (DATA_TYPE *)malloc(N * M * sizeof(DATA_TYPE));
	DATA_TYPE *X_outputFromGpu = (DATA_TYPE *)malloc(N * M * sizeof(DATA_TYPE));

	init_array(U, B);

	cudaSetDevice(GPU_DEVICE);
	trisolvCuda(U, B, X_outputFromGpu);

	t_start = rtclock();
	trisolv_cpu(U, B, X);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(X, X_outputFromGpu, N * M, PERCENT_DIFF_ERROR_THRESHOLD);

	free(U);
	free(B);
	free(X);
	free(X_outputFromGpu);

	return fail > 0;
}
