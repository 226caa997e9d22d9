/**
 * mvt.cu: matrix vector product and transpose
 *   x1 = x1 + A * y1
 *   x2 = x2 + A^T * y2
 *
 * Two 1-D kernels launched with 256x1 blocks. The size is a kernel parameter
 * (int n), set from the N macro or from argv: ./mvt [n]
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

typedef float DATA_TYPE;

void init_array(int n, DATA_TYPE *A, DATA_TYPE *x1, DATA_TYPE *x2, DATA_TYPE *y1, DATA_TYPE *y2)
{
	int i, j;

	bench_srand(7);
	for (i = 0; i < n; i++)
	{
		x1[i] = 0.0f;
		x2[i] = 0.0f;
		y1[i] = ((DATA_TYPE)i) / n;
		y2[i] = ((DATA_TYPE)(i + 1)) / n;
		for (j = 0; j < n; j++)
			A[i * n + j] = bench_randf();
	}
	/* start from a nonzero x1/x2 */
	init_random(x1, n, 0.0f, 10.0f);
	init_random(x2, n, 0.0f, 10.0f);
}

void mvt_cpu(int n, DATA_TYPE *a, DATA_TYPE *x1, DATA_TYPE *x2, DATA_TYPE *y1, DATA_TYPE *y2)
{
	int i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			x1[i] = x1[i] + a[i * n + j] * y1[j];

	for (j = 0; j < n; j++)
		for (i = 0; i < n; i++)
			x2[i] = x2[i] + a[j * n + i] * y2[j];
}

__global__ void mvt_kernel1(int n, DATA_TYPE *a, DATA_TYPE *x1, DATA_TYPE *y1)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		int j;
		for (j = 0; j < n; j++)
		{
			x1[i] += a[i * n + j] * y1[j];
		}
	}
}

__global__ void mvt_kernel2(int n, DATA_TYPE *a, DATA_TYPE *x2, DATA_TYPE *y2)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		int j;
		for (j = 0; j < n; j++)
		{
			x2[i] += a[j * n + i] * y2[j];
		}
	}
}

void mvtCuda(int n, DATA_TYPE *a, DATA_TYPE *x1, DATA_TYPE *x2, DATA_TYPE *y1, DATA_TYPE *y2,
	     DATA_TYPE *x1_outputFromGpu, DATA_TYPE *x2_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *a_gpu;
	DATA_TYPE *x1_gpu;
	DATA_TYPE *x2_gpu;
	DATA_TYPE *y1_gpu;
	DATA_TYPE *y2_gpu;

	cudaMalloc((void **)&a_gpu, sizeof(DATA_TYPE) * n * n);
	cudaMalloc((void **)&x1_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&x2_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&y1_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&y2_gpu, sizeof(DATA_TYPE) * n);

	cudaMemcpy(a_gpu, a, sizeof(DATA_TYPE) * n * n, cudaMemcpyHostToDevice);
	cudaMemcpy(x1_gpu, x1, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);
	cudaMemcpy(x2_gpu, x2, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);
	cudaMemcpy(y1_gpu, y1, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);
	cudaMemcpy(y2_gpu, y2, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)ceil((float)n / ((float)DIM_THREAD_BLOCK_X)), 1);

	t_start = rtclock();
	mvt_kernel1<<<grid, block>>>(n, a_gpu, x1_gpu, y1_gpu);
	mvt_kernel2<<<grid, block>>>(n, a_gpu, x2_gpu, y2_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(x1_outputFromGpu, x1_gpu, sizeof(DATA_TYPE) * n, cudaMemcpyDeviceToHost);
	cudaMemcpy(x2_outputFromGpu, x2_gpu, sizeof(DATA_TYPE) * n, cudaMemcpyDeviceToHost);

	cudaFree(a_gpu);
	cudaFree(x1_gpu);
	cudaFree(x2_gpu);
	cudaFree(y1_gpu);
	cudaFree(y2_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int n = arg_size(argc, argv, 1, N);

	DATA_TYPE *a = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	DATA_TYPE *x1 = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *x2 = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *x1_outputFromGpu = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *x2_outputFromGpu = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *y1 = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *y2 = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));

	printf("mvt: n=%d\n", n);
	init_array(n, a, x1, x2, y1, y2);

	cudaSetDevice(GPU_DEVICE);
	mvtCuda(n, a, x1, x2, y1, y2, x1_outputFromGpu, x2_outputFromGpu);

	t_start = rtclock();
	mvt_cpu(n, a, x1, x2, y1, y2);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(x1, x1_outputFromGpu, n, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(x2, x2_outputFromGpu, n, PERCENT_DIFF_ERROR_THRESHOLD);

	free(a);
	free(x1);
	free(x2);
	free(x1_outputFromGpu);
	free(x2_outputFromGpu);
	free(y1);
	free(y2);

	return fail > 0;
}
