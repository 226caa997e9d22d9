/**
 * syr2k.cu: symmetric rank-2k update
 *   C = alpha * A * B^T + alpha * B * A^T + beta * C    (C is n x n, A and B are n x m)
 *
 * One 2-D kernel over all of C, C updated in place. Sizes are kernel
 * parameters (int n, int m), set from the N/M macros or argv: ./syr2k [n m]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef N
#define N 1024
#endif
#ifndef M
#define M 512
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

typedef float DATA_TYPE;

void init_arrays(int n, int m, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C)
{
	bench_srand(5);
	init_random(A, n * m, 0.0f, 1.0f);
	init_random(B, n * m, 0.0f, 1.0f);
	init_random(C, n * n, 0.0f, 1.0f);
}

void syr2k_cpu(int n, int m, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C)
{
	int i, j, k;

	for (i = 0; i < n; i++)
	{
		for (j = 0; j < n; j++)
		{
			DATA_TYPE c = C[i * n + j] * beta;
			for (k = 0; k < m; k++)
			{
				c += alpha * A[i * m + k] * B[j * m + k];
				c += alpha * B[i * m + k] * A[j * m + k];
			}
			C[i * n + j] = c;
		}
	}
}

__global__ void syr2k_kernel(int n, int m, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *c)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < n) && (j < n))
	{
		c[i * n + j] *= beta;

		int k;
		for (k = 0; k < m; k++)
		{
			c[i * n + j] += alpha * a[i * m + k] * b[j * m + k];
			c[i * n + j] += alpha * b[i * m + k] * a[j * m + k];
		}
	}
}

void syr2kCuda(int n, int m, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *C_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *B_gpu;
	DATA_TYPE *C_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * n * m);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * n * m);
	cudaMalloc((void **)&C_gpu, sizeof(DATA_TYPE) * n * n);
	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * n * m, cudaMemcpyHostToDevice);
	cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * n * m, cudaMemcpyHostToDevice);
	cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * n * n, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)ceil(((float)n) / ((float)DIM_THREAD_BLOCK_X)), (size_t)(ceil(((float)n) / ((float)DIM_THREAD_BLOCK_Y))));

	t_start = rtclock();
	syr2k_kernel<<<grid, block>>>(n, m, alpha, beta, A_gpu, B_gpu, C_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(C_outputFromGpu, C_gpu, sizeof(DATA_TYPE) * n * n, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(B_gpu);
	cudaFree(C_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int n = arg_size(argc, argv, 1, N);
	int m = arg_size(argc, argv, 2, M);
	DATA_TYPE alpha = 1.5f;
	DATA_TYPE beta = 2.0f;

	DATA_TYPE *A;
	DATA_TYPE *B;
	DATA_TYPE *C;
	DATA_TYPE *C_outputFromGpu;

	A = (DATA_TYPE *)malloc(n * m * sizeof(DATA_TYPE));
	B = (DATA_TYPE *)malloc(n * m * sizeof(DATA_TYPE));
	C = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	C_outputFromGpu = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));

	printf("syr2k: n=%d m=%d\n", n, m);
	init_arrays(n, m, A, B, C);

	cudaSetDevice(GPU_DEVICE);
	syr2kCuda(n, m, alpha, beta, A, B, C, C_outputFromGpu);

	t_start = rtclock();
	syr2k_cpu(n, m, alpha, beta, A, B, C);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(C, C_outputFromGpu, n * n, PERCENT_DIFF_ERROR_THRESHOLD);

	free(A);
	free(B);
	free(C);
	free(C_outputFromGpu);

	return fail > 0;
}
