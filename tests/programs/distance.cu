/**
 * distance.cu: pairwise Euclidean distances and nearest distance
 *   dist[i][j] = sqrt(sum_k sq(p[i][k] - q[j][k]))   (np points x nq queries, dim d)
 *   mind[i]    = min_j dist[i][j]
 *
 * A pure __device__ helper (sq) is called inside the kernel loop. Sizes are
 * kernel parameters (int np, int nq, int d), set from the NP/NQ/DIM macros
 * or argv: ./distance [np nq d]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef NP
#define NP 2048
#endif
#ifndef NQ
#define NQ 1024
#endif
#ifndef DIM
#define DIM 64
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
#define DIM_THREAD_BLOCK_MIN 256

typedef float DATA_TYPE;

__device__ float sq(float x)
{
	return x * x;
}

float sq_cpu(float x)
{
	return x * x;
}

void init_points(int np, int nq, int d, DATA_TYPE *p, DATA_TYPE *q)
{
	bench_srand(29);
	init_random(p, np * d, -1.0f, 1.0f);
	init_random(q, nq * d, -1.0f, 1.0f);
}

void distance_cpu(int np, int nq, int d, DATA_TYPE *p, DATA_TYPE *q, DATA_TYPE *dist, DATA_TYPE *mind)
{
	int i, j, k;

	for (i = 0; i < np; i++)
	{
		for (j = 0; j < nq; j++)
		{
			DATA_TYPE s = 0.0f;
			for (k = 0; k < d; k++)
				s += sq_cpu(p[i * d + k] - q[j * d + k]);
			dist[i * nq + j] = sqrtf(s);
		}
	}

	for (i = 0; i < np; i++)
	{
		mind[i] = dist[i * nq];
		for (j = 1; j < nq; j++)
			if (dist[i * nq + j] < mind[i])
				mind[i] = dist[i * nq + j];
	}
}

__global__ void distance_kernel(int np, int nq, int d, DATA_TYPE *p, DATA_TYPE *q, DATA_TYPE *dist)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < np) && (j < nq))
	{
		DATA_TYPE s = 0.0f;
		int k;
		for (k = 0; k < d; k++)
		{
			s += sq(p[i * d + k] - q[j * d + k]);
		}
		dist[i * nq + j] = sqrtf(s);
	}
}

__global__ void min_kernel(int np, int nq, DATA_TYPE *dist, DATA_TYPE *mind)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < np)
	{
		int j;
		mind[i] = dist[i * nq];
		for (j = 1; j < nq; j++)
		{
			if (dist[i * nq + j] < mind[i])
				mind[i] = dist[i * nq + j];
		}
	}
}

void distanceCuda(int np, int nq, int d, DATA_TYPE *p, DATA_TYPE *q, DATA_TYPE *dist_outputFromGpu, DATA_TYPE *mind_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *p_gpu;
	DATA_TYPE *q_gpu;
	DATA_TYPE *dist_gpu;
	DATA_TYPE *mind_gpu;

	cudaMalloc((void **)&p_gpu, sizeof(DATA_TYPE) * np * d);
	cudaMalloc((void **)&q_gpu, sizeof(DATA_TYPE) * nq * d);
	cudaMalloc((void **)&dist_gpu, sizeof(DATA_TYPE) * np * nq);
	cudaMalloc((void **)&mind_gpu, sizeof(DATA_TYPE) * np);

	cudaMemcpy(p_gpu, p, sizeof(DATA_TYPE) * np * d, cudaMemcpyHostToDevice);
	cudaMemcpy(q_gpu, q, sizeof(DATA_TYPE) * nq * d, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)(ceil(((float)nq) / ((float)block.x))), (size_t)(ceil(((float)np) / ((float)block.y))));
	dim3 block2(DIM_THREAD_BLOCK_MIN, 1);
	dim3 grid2((size_t)(ceil(((float)np) / ((float)block2.x))), 1);

	t_start = rtclock();
	distance_kernel<<<grid, block>>>(np, nq, d, p_gpu, q_gpu, dist_gpu);
	cudaDeviceSynchronize();
	min_kernel<<<grid2, block2>>>(np, nq, dist_gpu, mind_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(dist_outputFromGpu, dist_gpu, sizeof(DATA_TYPE) * np * nq, cudaMemcpyDeviceToHost);
	cudaMemcpy(mind_outputFromGpu, mind_gpu, sizeof(DATA_TYPE) * np, cudaMemcpyDeviceToHost);

	cudaFree(p_gpu);
	cudaFree(q_gpu);
	cudaFree(dist_gpu);
	cudaFree(mind_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int np = arg_size(argc, argv, 1, NP);
	int nq = arg_size(argc, argv, 2, NQ);
	int d = arg_size(argc, argv, 3, DIM);

	DATA_TYPE *p = (DATA_TYPE *)malloc(np * d * sizeof(DATA_TYPE));
	DATA_TYPE *q = (DATA_TYPE *)malloc(nq * d * sizeof(DATA_TYPE));
	DATA_TYPE *dist = (DATA_TYPE *)malloc(np * nq * sizeof(DATA_TYPE));
	DATA_TYPE *mind = (DATA_TYPE *)malloc(np * sizeof(DATA_TYPE));
	DATA_TYPE *dist_outputFromGpu = (DATA_TYPE *)malloc(np * nq * sizeof(DATA_TYPE));
	DATA_TYPE *mind_outputFromGpu = (DATA_TYPE *)malloc(np * sizeof(DATA_TYPE));

	printf("distance: np=%d nq=%d d=%d\n", np, nq, d);
	init_points(np, nq, d, p, q);

	cudaSetDevice(GPU_DEVICE);
	distanceCuda(np, nq, d, p, q, dist_outputFromGpu, mind_outputFromGpu);

	t_start = rtclock();
	distance_cpu(np, nq, d, p, q, dist, mind);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(dist, dist_outputFromGpu, np * nq, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(mind, mind_outputFromGpu, np, PERCENT_DIFF_ERROR_THRESHOLD);

	free(p);
	free(q);
	free(dist);
	free(mind);
	free(dist_outputFromGpu);
	free(mind_outputFromGpu);

	return fail > 0;
}
