/**
 * 2DConvolution.cu: 3x3 convolution with constant coefficients
 *
 * One 2-D kernel, one thread per output pixel, interior pixels only
 * (guard i < NI-1 && j < NJ-1 && i > 0 && j > 0). Sizes are macros used
 * inside the kernel (-DNI=... -DNJ=...).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Problem size */
#ifndef NI
#define NI 4096
#endif
#ifndef NJ
#define NJ 4096
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

typedef float DATA_TYPE;

void conv2D(DATA_TYPE *A, DATA_TYPE *B)
{
	int i, j;
	DATA_TYPE c11, c12, c13, c21, c22, c23, c31, c32, c33;

	c11 = +0.2;  c21 = +0.5;  c31 = -0.8;
	c12 = -0.3;  c22 = +0.6;  c32 = -0.9;
	c13 = +0.4;  c23 = +0.7;  c33 = +0.10;

	for (i = 1; i < NI - 1; ++i)
	{
		for (j = 1; j < NJ - 1; ++j)
		{
			B[i * NJ + j] = c11 * A[(i - 1) * NJ + (j - 1)] + c12 * A[(i + 0) * NJ + (j - 1)] + c13 * A[(i + 1) * NJ + (j - 1)]
				+ c21 * A[(i - 1) * NJ + (j + 0)] + c22 * A[(i + 0) * NJ + (j + 0)] + c23 * A[(i + 1) * NJ + (j + 0)]
				+ c31 * A[(i - 1) * NJ + (j + 1)] + c32 * A[(i + 0) * NJ + (j + 1)] + c33 * A[(i + 1) * NJ + (j + 1)];
		}
	}
}

void init(DATA_TYPE *A)
{
	int i, j;

	bench_srand(17);
	for (i = 0; i < NI; ++i)
	{
		for (j = 0; j < NJ; ++j)
		{
			A[i * NJ + j] = bench_randf();
		}
	}
}

__global__ void Convolution2D_kernel(DATA_TYPE *A, DATA_TYPE *B)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	DATA_TYPE c11, c12, c13, c21, c22, c23, c31, c32, c33;

	c11 = +0.2;  c21 = +0.5;  c31 = -0.8;
	c12 = -0.3;  c22 = +0.6;  c32 = -0.9;
	c13 = +0.4;  c23 = +0.7;  c33 = +0.10;

	if ((i < NI - 1) && (j < NJ - 1) && (i > 0) && (j > 0))
	{
		B[i * NJ + j] = c11 * A[(i - 1) * NJ + (j - 1)] + c21 * A[(i - 1) * NJ + (j + 0)] + c31 * A[(i - 1) * NJ + (j + 1)]
			+ c12 * A[(i + 0) * NJ + (j - 1)] + c22 * A[(i + 0) * NJ + (j + 0)] + c32 * A[(i + 0) * NJ + (j + 1)]
			+ c13 * A[(i + 1) * NJ + (j - 1)] + c23 * A[(i + 1) * NJ + (j + 0)] + c33 * A[(i + 1) * NJ + (j + 1)];
	}
}

void convolution2DCuda(DATA_TYPE *A, DATA_TYPE *B_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *B_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NJ);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NI * NJ);
	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyHostToDevice);
	/* border pixels are never written: zero them like the CPU side */
	cudaMemset(B_gpu, 0, sizeof(DATA_TYPE) * NI * NJ);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)ceil(((float)NJ) / ((float)block.x)), (size_t)ceil(((float)NI) / ((float)block.y)));

	t_start = rtclock();
	Convolution2D_kernel<<<grid, block>>>(A_gpu, B_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(B_outputFromGpu, B_gpu, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(B_gpu);
}

int main(int argc, char *argv[])
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *A;
	DATA_TYPE *B;
	DATA_TYPE *B_outputFromGpu;

	A = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	B = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	B_outputFromGpu = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	memset(B, 0, NI * NJ * sizeof(DATA_TYPE));

	init(A);

	cudaSetDevice(GPU_DEVICE);
	convolution2DCuda(A, B_outputFromGpu);

	t_start = rtclock();
	conv2D(A, B);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	/* results can be near zero (mixed-sign coefficients): looser threshold */
	fail = compareResults(B, B_outputFromGpu, NI * NJ, 0.5);

	free(A);
	free(B);
	free(B_outputFromGpu);

	return fail > 0;
}
