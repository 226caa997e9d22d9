/**
 * correlation.cu: correlation matrix of the M columns of an N x M data set
 *
 * Four kernels: column means (1-D), column standard deviations (1-D),
 * centre and reduce the data (2-D), correlation of each column pair (1-D,
 * thread j1 loops over j2 > j1: a triangular loop whose lower bound is the
 * thread index). Sizes are macros used inside the kernels (-DM=... -DN=...).
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Correlations near zero have few correct digits in float: looser threshold */
#define CORR_THRESHOLD 1.05

/* Problem size */
#ifndef M
#define M 1024
#endif
#ifndef N
#define N 1024
#endif

/* Thread block dimensions for kernel 1, 2, 4 */
#define DIM_THREAD_BLOCK_KERNEL_1_X 256
#define DIM_THREAD_BLOCK_KERNEL_1_Y 1
#define DIM_THREAD_BLOCK_KERNEL_2_X 256
#define DIM_THREAD_BLOCK_KERNEL_2_Y 1
/* Thread block dimensions for kernel 3 */
#define DIM_THREAD_BLOCK_KERNEL_3_X 32
#define DIM_THREAD_BLOCK_KERNEL_3_Y 8
#define DIM_THREAD_BLOCK_KERNEL_4_X 256
#define DIM_THREAD_BLOCK_KERNEL_4_Y 1

#define sqrt_of_array_cell(x, j) sqrt(x[j])

#define FLOAT_N ((DATA_TYPE)N)
#define EPS 0.005f

typedef float DATA_TYPE;

void init_arrays(DATA_TYPE *data)
{
	int i, j;

	bench_srand(13);
	for (i = 0; i < N; i++)
	{
		for (j = 0; j < M; j++)
		{
			/* columns share a common component so correlations are not all near 0 */
			data[i * M + j] = bench_randf() + ((DATA_TYPE)(i % 16)) * ((DATA_TYPE)(j % 7)) / 16.0f;
		}
	}
}

void correlation(DATA_TYPE *data, DATA_TYPE *mean, DATA_TYPE *stddev, DATA_TYPE *symmat)
{
	int i, j, j1, j2;

	/* Determine mean of column vectors of input data matrix */
	for (j = 0; j < M; j++)
	{
		mean[j] = 0.0f;
		for (i = 0; i < N; i++)
			mean[j] += data[i * M + j];
		mean[j] /= (DATA_TYPE)FLOAT_N;
	}

	/* Determine standard deviations of column vectors of data matrix. */
	for (j = 0; j < M; j++)
	{
		stddev[j] = 0.0f;
		for (i = 0; i < N; i++)
			stddev[j] += (data[i * M + j] - mean[j]) * (data[i * M + j] - mean[j]);
		stddev[j] /= FLOAT_N;
		stddev[j] = sqrt_of_array_cell(stddev, j);
		stddev[j] = stddev[j] <= EPS ? 1.0f : stddev[j];
	}

	/* Center and reduce the column vectors. */
	for (i = 0; i < N; i++)
	{
		for (j = 0; j < M; j++)
		{
			data[i * M + j] -= mean[j];
			data[i * M + j] /= (sqrt(FLOAT_N) * stddev[j]);
		}
	}

	/* Calculate the m * m correlation matrix (i outermost for the cache; the
	   sum for each pair still runs over i in increasing order). */
	for (j1 = 0; j1 < M - 1; j1++)
		for (j2 = j1 + 1; j2 < M; j2++)
			symmat[j1 * M + j2] = 0.0f;
	for (i = 0; i < N; i++)
		for (j1 = 0; j1 < M - 1; j1++)
			for (j2 = j1 + 1; j2 < M; j2++)
				symmat[j1 * M + j2] += (data[i * M + j1] * data[i * M + j2]);
	for (j1 = 0; j1 < M - 1; j1++)
	{
		symmat[j1 * M + j1] = 1.0f;
		for (j2 = j1 + 1; j2 < M; j2++)
			symmat[j2 * M + j1] = symmat[j1 * M + j2];
	}
	symmat[(M - 1) * M + (M - 1)] = 1.0f;
}

__global__ void mean_kernel(DATA_TYPE *mean, DATA_TYPE *data)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < M)
	{
		mean[j] = 0.0f;

		int i;
		for (i = 0; i < N; i++)
		{
			mean[j] += data[i * M + j];
		}

		mean[j] /= (DATA_TYPE)FLOAT_N;
	}
}

__global__ void std_kernel(DATA_TYPE *mean, DATA_TYPE *std, DATA_TYPE *data)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < M)
	{
		std[j] = 0.0f;

		int i;
		for (i = 0; i < N; i++)
		{
			std[j] += (data[i * M + j] - mean[j]) * (data[i * M + j] - mean[j]);
		}
		std[j] /= (FLOAT_N);
		std[j] = sqrt(std[j]);
		if (std[j] <= EPS)
		{
			std[j] = 1.0f;
		}
	}
}

__global__ void reduce_kernel(DATA_TYPE *mean, DATA_TYPE *std, DATA_TYPE *data)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < N) && (j < M))
	{
		data[i * M + j] -= mean[j];
		data[i * M + j] /= (sqrt(FLOAT_N) * std[j]);
	}
}

__global__ void corr_kernel(DATA_TYPE *symmat, DATA_TYPE *data)
{
	int j1 = blockIdx.x * blockDim.x + threadIdx.x;

	int i, j2;
	if (j1 < (M - 1))
	{
		symmat[j1 * M + j1] = 1.0f;

		for (j2 = (j1 + 1); j2 < M; j2++)
		{
			symmat[j1 * M + j2] = 0.0f;
			for (i = 0; i < N; i++)
			{
				symmat[j1 * M + j2] += data[i * M + j1] * data[i * M + j2];
			}
			symmat[j2 * M + j1] = symmat[j1 * M + j2];
		}
	}
}

void correlationCuda(DATA_TYPE *data, DATA_TYPE *mean, DATA_TYPE *stddev, DATA_TYPE *symmat,
		     DATA_TYPE *symmat_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *data_gpu;
	DATA_TYPE *stddev_gpu;
	DATA_TYPE *mean_gpu;
	DATA_TYPE *symmat_gpu;

	cudaMalloc((void **)&data_gpu, sizeof(DATA_TYPE) * M * N);
	cudaMalloc((void **)&symmat_gpu, sizeof(DATA_TYPE) * M * M);
	cudaMalloc((void **)&stddev_gpu, sizeof(DATA_TYPE) * M);
	cudaMalloc((void **)&mean_gpu, sizeof(DATA_TYPE) * M);
	cudaMemcpy(data_gpu, data, sizeof(DATA_TYPE) * M * N, cudaMemcpyHostToDevice);
	cudaMemcpy(symmat_gpu, symmat, sizeof(DATA_TYPE) * M * M, cudaMemcpyHostToDevice);
	cudaMemcpy(stddev_gpu, stddev, sizeof(DATA_TYPE) * M, cudaMemcpyHostToDevice);
	cudaMemcpy(mean_gpu, mean, sizeof(DATA_TYPE) * M, cudaMemcpyHostToDevice);

	dim3 block1(DIM_THREAD_BLOCK_KERNEL_1_X, DIM_THREAD_BLOCK_KERNEL_1_Y);
	dim3 grid1((size_t)(ceil((float)(M)) / ((float)DIM_THREAD_BLOCK_KERNEL_1_X)) + 1, 1);

	dim3 block2(DIM_THREAD_BLOCK_KERNEL_2_X, DIM_THREAD_BLOCK_KERNEL_2_Y);
	dim3 grid2((size_t)(ceil((float)(M)) / ((float)DIM_THREAD_BLOCK_KERNEL_2_X)) + 1, 1);

	dim3 block3(DIM_THREAD_BLOCK_KERNEL_3_X, DIM_THREAD_BLOCK_KERNEL_3_Y);
	dim3 grid3((size_t)(ceil((float)(M)) / ((float)DIM_THREAD_BLOCK_KERNEL_3_X)) + 1,
		   (size_t)(ceil((float)(N)) / ((float)DIM_THREAD_BLOCK_KERNEL_3_Y)) + 1);

	dim3 block4(DIM_THREAD_BLOCK_KERNEL_4_X, DIM_THREAD_BLOCK_KERNEL_4_Y);
	dim3 grid4((size_t)(ceil((float)(M)) / ((float)DIM_THREAD_BLOCK_KERNEL_4_X)) + 1, 1);

	t_start = rtclock();
	mean_kernel<<<grid1, block1>>>(mean_gpu, data_gpu);
	cudaDeviceSynchronize();
	std_kernel<<<grid2, block2>>>(mean_gpu, stddev_gpu, data_gpu);
	cudaDeviceSynchronize();
	reduce_kernel<<<grid3, block3>>>(mean_gpu, stddev_gpu, data_gpu);
	cudaDeviceSynchronize();
	corr_kernel<<<grid4, block4>>>(symmat_gpu, data_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	DATA_TYPE valueAtSymmatIndexMTimesMPlus1PlusMPoint = 1.0f;
	cudaMemcpy(&(symmat_gpu[(M - 1) * M + (M - 1)]), &valueAtSymmatIndexMTimesMPlus1PlusMPoint, sizeof(DATA_TYPE), cudaMemcpyHostToDevice);

	cudaMemcpy(symmat_outputFromGpu, symmat_gpu, sizeof(DATA_TYPE) * M * M, cudaMemcpyDeviceToHost);

	cudaFree(data_gpu);
	cudaFree(symmat_gpu);
	cudaFree(stddev_gpu);
	cudaFree(mean_gpu);
}

int main()
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *data;
	DATA_TYPE *mean;
	DATA_TYPE *stddev;
	DATA_TYPE *symmat;
	DATA_TYPE *symmat_outputFromGpu;

	data = (DATA_TYPE *)malloc(M * N * sizeof(DATA_TYPE));
	mean = (DATA_TYPE *)malloc(M * sizeof(DATA_TYPE));
	stddev = (DATA_TYPE *)malloc(M * sizeof(DATA_TYPE));
	symmat = (DATA_TYPE *)malloc(M * M * sizeof(DATA_TYPE));
	symmat_outputFromGpu = (DATA_TYPE *)malloc(M * M * sizeof(DATA_TYPE));

	init_arrays(data);
	/* symmat is copied to the device before the kernels fill it: give it defined contents */
	init_random(symmat, M * M, 0.0f, 0.0f);
	init_random(mean, M, 0.0f, 0.0f);
	init_random(stddev, M, 0.0f, 0.0f);

	cudaSetDevice(GPU_DEVICE);
	correlationCuda(data, mean, stddev, symmat, symmat_outputFromGpu);

	t_start = rtclock();
	correlation(data, mean, stddev, symmat);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(symmat, symmat_outputFromGpu, M * M, CORR_THRESHOLD);

	free(data);
	free(mean);
	free(stddev);
	free(symmat);
	free(symmat_outputFromGpu);

	return fail > 0;
}
