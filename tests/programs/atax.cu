/**
 * atax.cu: y = A^T * (A * x)
 *
 * Two 1-D kernels: tmp = A * x (one thread per row), y = A^T * tmp (one thread
 * per column). Sizes are kernel parameters (int nx, int ny), set from the
 * NX/NY macros or from argv: ./atax [nx ny]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef NX
#define NX 4096
#endif
#ifndef NY
#define NY 4096
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 256
#define DIM_THREAD_BLOCK_Y 1

typedef float DATA_TYPE;

void init_array(int nx, int ny, DATA_TYPE *x, DATA_TYPE *A)
{
	int i, j;

	for (i = 0; i < ny; i++)
		x[i] = i * 3.14159f / ny;

	for (i = 0; i < nx; i++)
		for (j = 0; j < ny; j++)
			A[i * ny + j] = ((DATA_TYPE)((i * (j + 1)) % nx)) / nx;
}

void atax_cpu(int nx, int ny, DATA_TYPE *A, DATA_TYPE *x, DATA_TYPE *y, DATA_TYPE *tmp)
{
	int i, j;

	for (i = 0; i < ny; i++)
		y[i] = 0;

	for (i = 0; i < nx; i++)
	{
		tmp[i] = 0;
		for (j = 0; j < ny; j++)
			tmp[i] = tmp[i] + A[i * ny + j] * x[j];
	}

	/* y[j] accumulates over i in increasing i, like the kernel */
	for (i = 0; i < nx; i++)
		for (j = 0; j < ny; j++)
			y[j] = y[j] + A[i * ny + j] * tmp[i];
}

__global__ void atax_kernel1(int nx, int ny, DATA_TYPE *A, DATA_TYPE *x, DATA_TYPE *tmp)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < nx)
	{
		int j;
		tmp[i] = 0;
		for (j = 0; j < ny; j++)
		{
			tmp[i] += A[i * ny + j] * x[j];
		}
	}
}

__global__ void atax_kernel2(int nx, int ny, DATA_TYPE *A, DATA_TYPE *y, DATA_TYPE *tmp)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < ny)
	{
		int i;
		y[j] = 0;
		for (i = 0; i < nx; i++)
		{
			y[j] += A[i * ny + j] * tmp[i];
		}
	}
}

void ataxGpu(int nx, int ny, DATA_TYPE *A, DATA_TYPE *x, DATA_TYPE *y_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *x_gpu;
	DATA_TYPE *y_gpu;
	DATA_TYPE *tmp_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * nx * ny);
	cudaMalloc((void **)&x_gpu, sizeof(DATA_TYPE) * ny);
	cudaMalloc((void **)&y_gpu, sizeof(DATA_TYPE) * ny);
	cudaMalloc((void **)&tmp_gpu, sizeof(DATA_TYPE) * nx);

	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * nx * ny, cudaMemcpyHostToDevice);
	cudaMemcpy(x_gpu, x, sizeof(DATA_TYPE) * ny, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid1((size_t)(ceil(((float)nx) / ((float)block.x))), 1);
	dim3 grid2((size_t)(ceil(((float)ny) / ((float)block.x))), 1);

	t_start = rtclock();
	atax_kernel1<<<grid1, block>>>(nx, ny, A_gpu, x_gpu, tmp_gpu);
	cudaDeviceSynchronize();
	atax_kernel2<<<grid2, block>>>(nx, ny, A_gpu, y_gpu, tmp_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(y_outputFromGpu, y_gpu, sizeof(DATA_TYPE) * ny, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(x_gpu);
	cudaFree(y_gpu);
	cudaFree(tmp_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int nx = arg_size(argc, argv, 1, NX);
	int ny = arg_size(argc, argv, 2, NY);

	DATA_TYPE *A;
	DATA_TYPE *x;
	DATA_TYPE *y;
	DATA_TYPE *y_outputFromGpu;
	DATA_TYPE *tmp;

	A = (DATA_TYPE *)malloc(nx * ny * sizeof(DATA_TYPE));
	x = (DATA_TYPE *)malloc(ny * sizeof(DATA_TYPE));
	y = (DATA_TYPE *)malloc(ny * sizeof(DATA_TYPE));
	y_outputFromGpu = (DATA_TYPE *)malloc(ny * sizeof(DATA_TYPE));
	tmp = (DATA_TYPE *)malloc(nx * sizeof(DATA_TYPE));

	printf("atax: nx=%d ny=%d\n", nx, ny);
	init_array(nx, ny, x, A);

	cudaSetDevice(GPU_DEVICE);
	ataxGpu(nx, ny, A, x, y_outputFromGpu);

	t_start = rtclock();
	atax_cpu(nx, ny, A, x, y, tmp);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(y, y_outputFromGpu, ny, PERCENT_DIFF_ERROR_THRESHOLD);

	free(A);
	free(x);
	free(y);
	free(y_outputFromGpu);
	free(tmp);

	return fail > 0;
}
