/**
 * stream_triad.cu: the STREAM triad a[i] = b[i] + scalar * c[i], the bandwidth kernel people time first.
 *
 * One 1-D kernel, one thread per element, the length as a kernel parameter set from the N macro or argv:
 * ./stream_triad [n]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#ifndef N
#define N (1 << 24)
#endif

#define THREADS 256

__global__ void triad(float *a, float *b, float *c, float scalar, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = b[i] + scalar * c[i];
}

int main(int argc, char *argv[])
{
	int n = arg_size(argc, argv, 1, N);
	float scalar = 3.0f;
	size_t bytes = sizeof(float) * (size_t)n;
	float *a = (float *)malloc(bytes);
	float *b = (float *)malloc(bytes);
	float *c = (float *)malloc(bytes);
	int i, fail = 0;

	bench_srand(7);
	for (i = 0; i < n; i++) {
		b[i] = bench_randf();
		c[i] = bench_randf();
	}

	float *a_gpu, *b_gpu, *c_gpu;
	cudaMalloc((void **)&a_gpu, bytes);
	cudaMalloc((void **)&b_gpu, bytes);
	cudaMalloc((void **)&c_gpu, bytes);
	cudaMemcpy(b_gpu, b, bytes, cudaMemcpyHostToDevice);
	cudaMemcpy(c_gpu, c, bytes, cudaMemcpyHostToDevice);

	triad<<<(n + THREADS - 1) / THREADS, THREADS>>>(a_gpu, b_gpu, c_gpu, scalar, n);
	cudaDeviceSynchronize();
	cudaMemcpy(a, a_gpu, bytes, cudaMemcpyDeviceToHost);

	for (i = 0; i < n; i++)
		if (fabs(a[i] - (b[i] + scalar * c[i])) > 1e-5f)
			fail++;
	printf("triad n=%d: %s\n", n, fail ? "FAILED" : "PASSED");

	cudaFree(a_gpu);
	cudaFree(b_gpu);
	cudaFree(c_gpu);
	free(a);
	free(b);
	free(c);
	return fail != 0;
}
