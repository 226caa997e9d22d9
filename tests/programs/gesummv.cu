/**
 * gesummv.cu: scalar, vector and matrix multiplication
 *   y = alpha * A * x + beta * B * x
 *
 * One 1-D kernel, one thread per row, two accumulators in global memory.
 * The size is a kernel parameter (int n), set from the N macro or from argv:
 * ./gesummv [n]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef N
#define N 4096
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 256
#define DIM_THREAD_BLOCK_Y 1

#define DATA_TYPE float

void init(int n, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *x)
{
	int i, j;

	bench_srand(11);
	for (i = 0; i < n; i++)
	{
		x[i] = ((DATA_TYPE)i) / n;
		for (j = 0; j < n; j++)
		{
			A[i * n + j] = ((DATA_TYPE)(i * j % n)) / n;
			B[i * n + j] = bench_randf();
		}
	}
}

void gesummv(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *tmp)
{
	int i, j;

	for (i = 0; i < n; i++)
	{
		tmp[i] = 0;
		y[i] = 0;
		for (j = 0; j < n; j++)
		{
			tmp[i] = A[i * n + j] * x[j] + tmp[i];
			y[i] = B[i * n + j] * x[j] + y[i];
		}

		y[i] = alpha * tmp[i] + beta * y[i];
	}
}

__global__ void gesummv_kernel(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *tmp)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		int j;
		tmp[i] = 0;
		y[i] = 0;
		for (j = 0; j < n; j++)
		{
			tmp[i] += a[i * n + j] * x[j];
			y[i] += b[i * n + j] * x[j];
		}
		y[i] = alpha * tmp[i] + beta * y[i];
	}
}

void gesummvCuda(int n, DATA_TYPE alpha, DATA_TYPE beta, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *x, DATA_TYPE *y_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *B_gpu;
	DATA_TYPE *x_gpu;
	DATA_TYPE *y_gpu;
	DATA_TYPE *tmp_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * n * n);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * n * n);
	cudaMalloc((void **)&x_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&y_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&tmp_gpu, sizeof(DATA_TYPE) * n);

	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * n * n, cudaMemcpyHostToDevice);
	cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * n * n, cudaMemcpyHostToDevice);
	cudaMemcpy(x_gpu, x, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((unsigned int)ceil(((float)n) / ((float)block.x)), 1);

	t_start = rtclock();
	gesummv_kernel<<<grid, block>>>(n, alpha, beta, A_gpu, B_gpu, x_gpu, y_gpu, tmp_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(y_outputFromGpu, y_gpu, sizeof(DATA_TYPE) * n, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(B_gpu);
	cudaFree(x_gpu);
	cudaFree(y_gpu);
	cudaFree(tmp_gpu);
}

int main(int argc, char *argv[])
{
	double t_start, t_end;
	int fail;

	int n = arg_size(argc, argv, 1, N);
	DATA_TYPE alpha = 0.75f;
	DATA_TYPE beta = 1.5f;

	DATA_TYPE *A;
	DATA_TYPE *B;
	DATA_TYPE *x;
	DATA_TYPE *y;
	DATA_TYPE *y_outputFromGpu;
	DATA_TYPE *tmp;

	A = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	B = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	x = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	y = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	y_outputFromGpu = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	tmp = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));

	printf("gesummv: n=%d\n", n);
	init(n, A, B, x);

	cudaSetDevice(GPU_DEVICE);
	gesummvCuda(n, alpha, beta, A, B, x, y_outputFromGpu);

	t_start = rtclock();
	gesummv(n, alpha, beta, A, B, x, y, tmp);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(y, y_outputFromGpu, n, PERCENT_DIFF_ERROR_THRESHOLD);

	free(A);
	free(B);
	free(x);
	free(y);
	free(y_outputFromGpu);
	free(tmp);

	return fail > 0;
}
