/**
 * sum_atomic.cu: sum of a vector by atomic accumulation
 *   total = sum_i a[i]
 *
 * One 1-D kernel, one thread per element, each doing atomicAdd(total, a[i]); the grid is rounded up in
 * integer arithmetic, (n + BLOCK - 1) / BLOCK blocks of BLOCK threads. The inputs are small integers
 * (0..3) so that every partial sum is an integer below 2^24 at the default size and any summation order
 * gives the exact total; the GPU total is checked against a double CPU sum with a relative tolerance
 * (SUM_THRESHOLD percent). The size is a kernel parameter (int n), set from the N macro or argv:
 * ./sum_atomic [n]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef N
#define N (1 << 22)
#endif

/* Threads per block */
#define BLOCK 256

/* Tolerance (percent) for the atomically accumulated sum */
#define SUM_THRESHOLD 0.001

typedef float DATA_TYPE;

__global__ void sum_kernel(int n, DATA_TYPE *a, DATA_TYPE *total)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		atomicAdd(total, a[i]);
}

double sum_cpu(int n, DATA_TYPE *a)
{
	int i;
	double s = 0.0;
	for (i = 0; i < n; i++)
		s += (double)a[i];
	return s;
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail = 0;
	int i;

	int n = arg_size(argc, argv, 1, N);

	DATA_TYPE *a = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE total_outputFromGpu;

	printf("sum_atomic: n=%d\n", n);
	bench_srand(17);
	for (i = 0; i < n; i++)
		a[i] = (DATA_TYPE)(int)(bench_randf() * 4.0f);

	cudaSetDevice(GPU_DEVICE);

	DATA_TYPE *a_gpu;
	DATA_TYPE *total_gpu;

	cudaMalloc((void **)&a_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&total_gpu, sizeof(DATA_TYPE));

	cudaMemcpy(a_gpu, a, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);
	cudaMemset(total_gpu, 0, sizeof(DATA_TYPE));

	t_start = rtclock();
	sum_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, a_gpu, total_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(&total_outputFromGpu, total_gpu, sizeof(DATA_TYPE), cudaMemcpyDeviceToHost);

	cudaFree(a_gpu);
	cudaFree(total_gpu);

	t_start = rtclock();
	double ref = sum_cpu(n, a);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	printf("sum: cpu %.6f gpu %.6f\n", ref, (double)total_outputFromGpu);
	if (percentDiff(ref, total_outputFromGpu) > SUM_THRESHOLD)
	{
		fprintf(stderr, "sum mismatch: cpu %f gpu %f\n", ref, (double)total_outputFromGpu);
		fail++;
	}

	free(a);

	return fail > 0;
}
