/**
 * mvt_racy.cu: matrix vector product and transpose, launched the racy way
 *   x1 = x1 + A * y1
 *   x2 = x2 + A^T * y2
 *
 * The kernels are 1-D (they only use threadIdx.x / blockIdx.x), but they are
 * launched with a 2-D 32x8 thread block and a 1-D grid of ceil(N/32) blocks.
 * So every i is handled by 8 threads (threadIdx.y = 0..7, one per warp),
 * all doing the same read-modify-write of x1[i] / x2[i]: a data race in the
 * input program. It happens to give the right answer on a GPU because nvcc
 * (CUDA 13, seen in the PTX) loads x1[i] once before the j loop and keeps the
 * running sum in a register (it stores it every iteration but never reloads
 * it): all 8 warps of a block start together, read the same initial x1[i],
 * compute the same sum and store the same final value.
 *
 * Sizes are macros used inside the kernels (-DN=...).
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Problem size */
#ifndef N
#define N 4096
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

typedef float DATA_TYPE;

void init_array(DATA_TYPE *A, DATA_TYPE *x1, DATA_TYPE *x2, DATA_TYPE *y1, DATA_TYPE *y2)
{
	int i, j;

	for (i = 0; i < N; i++)
	{
		x1[i] = ((DATA_TYPE)(i % 17)) / 17.0f;
		x2[i] = ((DATA_TYPE)((i + 1) % 13)) / 13.0f;
		y1[i] = ((DATA_TYPE)((i + 3) % 31)) / 31.0f;
		y2[i] = ((DATA_TYPE)((i + 4) % 29)) / 29.0f;
		for (j = 0; j < N; j++)
			A[i * N + j] = ((DATA_TYPE)((i * j) % N)) / N;
	}
}

void runMvt(DATA_TYPE *a, DATA_TYPE *x1, DATA_TYPE *x2, DATA_TYPE *y1, DATA_TYPE *y2)
{
	int i, j;

	for (i = 0; i < N; i++)
		for (j = 0; j < N; j++)
			x1[i] = x1[i] + a[i * N + j] * y1[j];

	for (j = 0; j < N; j++)
		for (i = 0; i < N; i++)
			x2[i] = x2[i] + a[j * N + i] * y2[j];
}

__global__ void mvt_kernel1(DATA_TYPE *a, DATA_TYPE *x1, DATA_TYPE *y1)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < N)
	{
		int j;
		for (j = 0; j < N; j++)
		{
			x1[i] += a[i * N + j] * y1[j];
		}
	}
}

__global__ void mvt_kernel2(DATA_TYPE *a, DATA_TYPE *x2, DATA_TYPE *y2)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < N)
	{
		int j;
		for (j = 0; j < N; j++)
		{
			x2[i] += a[j * N + i] * y2[j];
		}
	}
}

void mvtCuda(DATA_TYPE *a, DATA_TYPE *x1, DATA_TYPE *x2, DATA_TYPE *y1, DATA_TYPE *y2,
	     DATA_TYPE *x1_outputFromGpu, DATA_TYPE *x2_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *a_gpu;
	DATA_TYPE *x1_gpu;
	DATA_TYPE *x2_gpu;
	DATA_TYPE *y_1_gpu;
	DATA_TYPE *y_2_gpu;

	cudaMalloc((void **)&a_gpu, sizeof(DATA_TYPE) * N * N);
	cudaMalloc((void **)&x1_gpu, sizeof(DATA_TYPE) * N);
	cudaMalloc((void **)&x2_gpu, sizeof(DATA_TYPE) * N);
	cudaMalloc((void **)&y_1_gpu, sizeof(DATA_TYPE) * N);
	cudaMalloc((void **)&y_2_gpu, sizeof(DATA_TYPE) * N);
	cudaMemcpy(a_gpu, a, sizeof(DATA_TYPE) * N * N, cudaMemcpyHostToDevice);
	cudaMemcpy(x1_gpu, x1, sizeof(DATA_TYPE) * N, cudaMemcpyHostToDevice);
	cudaMemcpy(x2_gpu, x2, sizeof(DATA_TYPE) * N, cudaMemcpyHostToDevice);
	cudaMemcpy(y_1_gpu, y1, sizeof(DATA_TYPE) * N, cudaMemcpyHostToDevice);
	cudaMemcpy(y_2_gpu, y2, sizeof(DATA_TYPE) * N, cudaMemcpyHostToDevice);

	/* 2-D block for a 1-D kernel: 8 threads per i (the race) */
	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)ceil((float)N / ((float)DIM_THREAD_BLOCK_X)), 1);

	t_start = rtclock();
	mvt_kernel1<<<grid, block>>>(a_gpu, x1_gpu, y_1_gpu);
	mvt_kernel2<<<grid, block>>>(a_gpu, x2_gpu, y_2_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(x1_outputFromGpu, x1_gpu, sizeof(DATA_TYPE) * N, cudaMemcpyDeviceToHost);
	cudaMemcpy(x2_outputFromGpu, x2_gpu, sizeof(DATA_TYPE) * N, cudaMemcpyDeviceToHost);

	cudaFree(a_gpu);
	cudaFree(x1_gpu);
	cudaFree(x2_gpu);
	cudaFree(y_1_gpu);
	cudaFree(y_2_gpu);
}

int main()
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *a;
	DATA_TYPE *x1;
	DATA_TYPE *x2;
	DATA_TYPE *x1_outputFromGpu;
	DATA_TYPE *x2_outputFromGpu;
	DATA_TYPE *y_1;
	DATA_TYPE *y_2;

	a = (DATA_TYPE *)malloc(N * N * sizeof(DATA_TYPE));
	x1 = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
	x2 = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
	x1_outputFromGpu = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
	x2_outputFromGpu = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
	y_1 = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));
	y_2 = (DATA_TYPE *)malloc(N * sizeof(DATA_TYPE));

	init_array(a, x1, x2, y_1, y_2);

	cudaSetDevice(GPU_DEVICE);
	mvtCuda(a, x1, x2, y_1, y_2, x1_outputFromGpu, x2_outputFromGpu);

	t_start = rtclock();
	runMvt(a, x1, x2, y_1, y_2);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(x1, x1_outputFromGpu, N, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(x2, x2_outputFromGpu, N, PERCENT_DIFF_ERROR_THRESHOLD);

	free(a);
	free(x1);
	free(x2);
	free(x1_outputFromGpu);
	free(x2_outputFromGpu);
	free(y_1);
	free(y_2);

	return fail > 0;
}
