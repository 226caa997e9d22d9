/**
 * gemm.cu: C = alpha * A * B + beta * C
 *
 * Sizes are macros used inside the kernel (override with -DNI=... etc).
 * One thread per element of C, C updated in place.
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Problem size */
#ifndef NI
#define NI 1024
#endif
#ifndef NJ
#define NJ 1024
#endif
#ifndef NK
#define NK 1024
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#define ALPHA 1.5f
#define BETA 1.2f

typedef float DATA_TYPE;

void gemm(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C)
{
	int i, j, k;

	for (i = 0; i < NI; i++)
	{
		for (j = 0; j < NJ; j++)
		{
			C[i * NJ + j] *= BETA;
		}
		/* i-k-j order: same summation order per element as the kernel, cache friendly */
		for (k = 0; k < NK; k++)
		{
			for (j = 0; j < NJ; j++)
			{
				C[i * NJ + j] += ALPHA * A[i * NK + k] * B[k * NJ + j];
			}
		}
	}
}

void init(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C)
{
	bench_srand(1);
	init_random_matrix(A, NI, NK);
	init_random_matrix(B, NK, NJ);
	init_random_matrix(C, NI, NJ);
}

__global__ void gemm_kernel(DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *c)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < NI) && (j < NJ))
	{
		c[i * NJ + j] *= BETA;
		int k;
		for (k = 0; k < NK; k++)
		{
			c[i * NJ + j] += ALPHA * a[i * NK + k] * b[k * NJ + j];
		}
	}
}

void gemmCuda(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *C_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *B_gpu;
	DATA_TYPE *C_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NK);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NK * NJ);
	cudaMalloc((void **)&C_gpu, sizeof(DATA_TYPE) * NI * NJ);

	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NK, cudaMemcpyHostToDevice);
	cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * NK * NJ, cudaMemcpyHostToDevice);
	cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)(ceil(((float)NJ) / ((float)block.x))), (size_t)(ceil(((float)NI) / ((float)block.y))));

	t_start = rtclock();
	gemm_kernel<<<grid, block>>>(A_gpu, B_gpu, C_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(C_outputFromGpu, C_gpu, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(B_gpu);
	cudaFree(C_gpu);
}

int main(int argc, char *argv[])
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *A;
	DATA_TYPE *B;
	DATA_TYPE *C;
	DATA_TYPE *C_outputFromGpu;

	A = (DATA_TYPE *)malloc(NI * NK * sizeof(DATA_TYPE));
	B = (DATA_TYPE *)malloc(NK * NJ * sizeof(DATA_TYPE));
	C = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
	C_outputFromGpu = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));

	init(A, B, C);

	cudaSetDevice(GPU_DEVICE);
	gemmCuda(A, B, C, C_outputFromGpu);

	t_start = rtclock();
	gemm(A, B, C);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(C, C_outputFromGpu, NI * NJ, PERCENT_DIFF_ERROR_THRESHOLD);

	free(A);
	free(B);
	free(C);
	free(C_outputFromGpu);

	return fail > 0;
}
