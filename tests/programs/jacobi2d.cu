/**
 * jacobi2d.cu: 2-D Jacobi stencil, TSTEPS time steps
 *   B = 5-point average of A (interior), then A = B (interior)
 *
 * Two 2-D kernels launched once per time step from a host loop. Sizes are
 * kernel parameters (int n); n and tsteps come from the N/TSTEPS macros or
 * argv: ./jacobi2d [n tsteps]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef TSTEPS
#define TSTEPS 20
#endif
#ifndef N
#define N 2048
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#define DATA_TYPE float

void init_array(int n, DATA_TYPE *A, DATA_TYPE *B)
{
	int i, j;

	for (i = 0; i < n; i++)
	{
		for (j = 0; j < n; j++)
		{
			A[i * n + j] = ((DATA_TYPE)i * (j + 2) + 10) / n;
			B[i * n + j] = ((DATA_TYPE)(i - 4) * (j - 1) + 11) / n;
		}
	}
}

void runJacobi2DCpu(int n, int tsteps, DATA_TYPE *A, DATA_TYPE *B)
{
	int t, i, j;

	for (t = 0; t < tsteps; t++)
	{
		for (i = 1; i < n - 1; i++)
		{
			for (j = 1; j < n - 1; j++)
			{
				B[i * n + j] = 0.2f * (A[i * n + j] + A[i * n + (j - 1)] + A[i * n + (1 + j)] + A[(1 + i) * n + j] + A[(i - 1) * n + j]);
			}
		}

		for (i = 1; i < n - 1; i++)
		{
			for (j = 1; j < n - 1; j++)
			{
				A[i * n + j] = B[i * n + j];
			}
		}
	}
}

__global__ void runJacobiCUDA_kernel1(int n, DATA_TYPE *A, DATA_TYPE *B)
{
	int i = blockIdx.y * blockDim.y + threadIdx.y;
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if ((i >= 1) && (i < (n - 1)) && (j >= 1) && (j < (n - 1)))
	{
		B[i * n + j] = 0.2f * (A[i * n + j] + A[i * n + (j - 1)] + A[i * n + (1 + j)] + A[(1 + i) * n + j] + A[(i - 1) * n + j]);
	}
}

__global__ void runJacobiCUDA_kernel2(int n, DATA_TYPE *A, DATA_TYPE *B)
{
	int i = blockIdx.y * blockDim.y + threadIdx.y;
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if ((i >= 1) && (i < (n - 1)) && (j >= 1) && (j < (n - 1)))
	{
		A[i * n + j] = B[i * n + j];
	}
}

void runJacobi2DCUDA(int n, int tsteps, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *A_outputFromGpu, DATA_TYPE *B_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *Agpu;
	DATA_TYPE *Bgpu;

	cudaMalloc(&Agpu, n * n * sizeof(DATA_TYPE));
	cudaMalloc(&Bgpu, n * n * sizeof(DATA_TYPE));
	cudaMemcpy(Agpu, A, n * n * sizeof(DATA_TYPE), cudaMemcpyHostToDevice);
	cudaMemcpy(Bgpu, B, n * n * sizeof(DATA_TYPE), cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((unsigned int)ceil(((float)n) / ((float)block.x)), (unsigned int)ceil(((float)n) / ((float)block.y)));

	t_start = rtclock();
	for (int t = 0; t < tsteps; t++)
	{
		runJacobiCUDA_kernel1<<<grid, block>>>(n, Agpu, Bgpu);
		cudaDeviceSynchronize();
		runJacobiCUDA_kernel2<<<grid, block>>>(n, Agpu, Bgpu);
		cudaDeviceSynchronize();
	}
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(A_outputFromGpu, Agpu, sizeof(DATA_TYPE) * n * n, cudaMemcpyDeviceToHost);
	cudaMemcpy(B_outputFromGpu, Bgpu, sizeof(DATA_TYPE) * n * n, cudaMemcpyDeviceToHost);

	cudaFree(Agpu);
	cudaFree(Bgpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int n = arg_size(argc, argv, 1, N);
	int tsteps = arg_size(argc, argv, 2, TSTEPS);

	DATA_TYPE *a;
	DATA_TYPE *b;
	DATA_TYPE *a_outputFromGpu;
	DATA_TYPE *b_outputFromGpu;

	a = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	a_outputFromGpu = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	b = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));
	b_outputFromGpu = (DATA_TYPE *)malloc(n * n * sizeof(DATA_TYPE));

	printf("jacobi2d: n=%d tsteps=%d\n", n, tsteps);
	init_array(n, a, b);

	cudaSetDevice(GPU_DEVICE);
	runJacobi2DCUDA(n, tsteps, a, b, a_outputFromGpu, b_outputFromGpu);

	t_start = rtclock();
	runJacobi2DCpu(n, tsteps, a, b);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(a, a_outputFromGpu, n * n, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(b, b_outputFromGpu, n * n, PERCENT_DIFF_ERROR_THRESHOLD);

	free(a);
	free(a_outputFromGpu);
	free(b);
	free(b_outputFromGpu);

	return fail > 0;
}
