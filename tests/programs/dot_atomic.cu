/**
 * dot_atomic.cu: dot product by atomic accumulation
 *   result = sum_i a[i] * b[i]
 *
 * One 1-D kernel; every thread does atomicAdd(result, a[i] * b[i]). The order
 * of the float additions is not fixed, so the GPU result is checked against a
 * double precision CPU sum with a relative tolerance (DOT_THRESHOLD percent).
 * The inputs are small integers (0..3) so that, at the default size, every
 * partial sum is an integer below 2^24 and any summation order (atomics, a
 * tree reduction, ...) gives the exact sum: a float sum of 4M fractional
 * values in one accumulator drifts by ~0.2%, which would hide real errors
 * behind a loose tolerance. Past n ~ 7M the sum exceeds 2^24 and is no
 * longer exact. A second kernel scales
 * a by the mean product (c[i] = a[i] * result / n) so the program also has
 * an elementwise output that depends on the sum. The size is a kernel parameter (int n), set from the N
 * macro or argv: ./dot_atomic [n]
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

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 256

/* Tolerance (percent) for the atomically accumulated sum */
#define DOT_THRESHOLD 0.001

typedef float DATA_TYPE;

__global__ void dot_kernel(int n, DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *result)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		atomicAdd(result, a[i] * b[i]);
	}
}

__global__ void scale_kernel(int n, DATA_TYPE *a, DATA_TYPE *result, DATA_TYPE *c)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		c[i] = a[i] * result[0] / n;
	}
}

double dot_cpu(int n, DATA_TYPE *a, DATA_TYPE *b)
{
	int i;
	double s = 0.0;
	for (i = 0; i < n; i++)
		s += (double)a[i] * (double)b[i];
	return s;
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail = 0;
	int i;

	int n = arg_size(argc, argv, 1, N);

	DATA_TYPE *a = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *b = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *c = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE *c_outputFromGpu = (DATA_TYPE *)malloc(n * sizeof(DATA_TYPE));
	DATA_TYPE result_outputFromGpu;

	printf("dot_atomic: n=%d\n", n);
	bench_srand(31);
	for (i = 0; i < n; i++)
	{
		a[i] = (DATA_TYPE)(int)(bench_randf() * 4.0f);
		b[i] = (DATA_TYPE)(int)(bench_randf() * 4.0f);
	}

	cudaSetDevice(GPU_DEVICE);

	DATA_TYPE *a_gpu;
	DATA_TYPE *b_gpu;
	DATA_TYPE *c_gpu;
	DATA_TYPE *result_gpu;

	cudaMalloc((void **)&a_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&b_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&c_gpu, sizeof(DATA_TYPE) * n);
	cudaMalloc((void **)&result_gpu, sizeof(DATA_TYPE));

	cudaMemcpy(a_gpu, a, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);
	cudaMemcpy(b_gpu, b, sizeof(DATA_TYPE) * n, cudaMemcpyHostToDevice);
	cudaMemset(result_gpu, 0, sizeof(DATA_TYPE));

	dim3 block(DIM_THREAD_BLOCK_X);
	dim3 grid((size_t)(ceil(((float)n) / ((float)block.x))));

	t_start = rtclock();
	dot_kernel<<<grid, block>>>(n, a_gpu, b_gpu, result_gpu);
	cudaDeviceSynchronize();
	scale_kernel<<<grid, block>>>(n, a_gpu, result_gpu, c_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(&result_outputFromGpu, result_gpu, sizeof(DATA_TYPE), cudaMemcpyDeviceToHost);
	cudaMemcpy(c_outputFromGpu, c_gpu, sizeof(DATA_TYPE) * n, cudaMemcpyDeviceToHost);

	cudaFree(a_gpu);
	cudaFree(b_gpu);
	cudaFree(c_gpu);
	cudaFree(result_gpu);

	t_start = rtclock();
	double ref = dot_cpu(n, a, b);
	for (i = 0; i < n; i++)
		c[i] = a[i] * (DATA_TYPE)ref / n;
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	printf("dot: cpu %.6f gpu %.6f\n", ref, (double)result_outputFromGpu);
	if (percentDiff(ref, result_outputFromGpu) > DOT_THRESHOLD)
	{
		fprintf(stderr, "dot product mismatch: cpu %f gpu %f\n", ref, (double)result_outputFromGpu);
		fail++;
	}
	/* c inherits the tolerance of the sum */
	fail += compareResults(c, c_outputFromGpu, n, DOT_THRESHOLD);

	free(a);
	free(b);
	free(c);
	free(c_outputFromGpu);

	return fail > 0;
}
