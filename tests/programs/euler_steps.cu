/**
 * euler_steps.cu: explicit time steps of a 1-D conservation law u_t + (u^2/2)_x = 0, then a few smoothing
 * sweeps, with the host code of an unstructured-grid solver: every launch sits in a small host function that
 * takes the device arrays as parameters, the arrays come from a template allocation helper wrapped in an
 * error-checking macro, and the smoothing ping-pongs two scratch arrays (swapped after each sweep), with the
 * kernel's cache preference set before the sweeps.
 *
 * ./euler_steps [n]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#ifndef N
#define N (192 * 2048)
#endif

#define BLOCK_SIZE_1 192
#define BLOCK_SIZE_2 128
#define STEPS 3
#define SWEEPS 4
#define DT_OVER_DX 0.2f

#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

#define checkCudaErrors(val) check_cuda((val), #val, __LINE__)

static void check_cuda(cudaError_t err, const char *what, int line)
{
	if (err != cudaSuccess) {
		fprintf(stderr, "CUDA error %s at line %d: %s\n", cudaGetErrorString(err), line, what);
		exit(2);
	}
}

/*
 * Generic functions
 */
template <typename T>
T *alloc(int count)
{
	T *t;
	checkCudaErrors(cudaMalloc((void **)&t, sizeof(T) * count));
	return t;
}

template <typename T>
void dealloc(T *array)
{
	checkCudaErrors(cudaFree((void *)array));
}

template <typename T>
void copy(T *dst, T *src, int count)
{
	checkCudaErrors(cudaMemcpy((void *)dst, (void *)src, count * sizeof(T), cudaMemcpyDeviceToDevice));
}

template <typename T>
void upload(T *dst, T *src, int count)
{
	checkCudaErrors(cudaMemcpy((void *)dst, (void *)src, count * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
void download(T *dst, T *src, int count)
{
	checkCudaErrors(cudaMemcpy((void *)dst, (void *)src, count * sizeof(T), cudaMemcpyDeviceToHost));
}

/*
 * Kernels, each with the host function that launches it
 */
__global__ void cuda_compute_flux(int n, float *variables, float *fluxes)
{
	int i = blockDim.x * blockIdx.x + threadIdx.x;
	if (i < n)
		fluxes[i] = 0.5f * variables[i] * variables[i];
}

void compute_flux(int n, float *variables, float *fluxes)
{
	dim3 Dg((n + BLOCK_SIZE_1 - 1) / BLOCK_SIZE_1), Db(BLOCK_SIZE_1);
	cuda_compute_flux<<<Dg, Db>>>(n, variables, fluxes);
}

__global__ void cuda_time_step(int n, float factor, float *old_variables, float *fluxes, float *variables)
{
	int i = blockDim.x * blockIdx.x + threadIdx.x;
	if (i > 0 && i < n)
		variables[i] = old_variables[i] - factor * (fluxes[i] - fluxes[i - 1]);
}

void time_step(int n, float *old_variables, float *fluxes, float *variables)
{
	dim3 Dg((n + BLOCK_SIZE_1 - 1) / BLOCK_SIZE_1), Db(BLOCK_SIZE_1);
	cuda_time_step<<<Dg, Db>>>(n, DT_OVER_DX, old_variables, fluxes, variables);
}

__global__ void cuda_smooth(int n, float *tIn, float *tOut)
{
	int i = blockDim.x * blockIdx.x + threadIdx.x;
	if (i > 0 && i < n - 1)
		tOut[i] = 0.25f * tIn[i - 1] + 0.5f * tIn[i] + 0.25f * tIn[i + 1];
}

void smooth(int n, float *variables)
{
	float *tIn_d = alloc<float>(n), *tOut_d = alloc<float>(n);
	copy<float>(tIn_d, variables, n);
	copy<float>(tOut_d, variables, n);   /* the end points, which no sweep writes */
	cudaFuncSetCacheConfig(cuda_smooth, cudaFuncCachePreferL1);
	for (int s = 0; s < SWEEPS; s++) {
		cuda_smooth<<<(n + BLOCK_SIZE_2 - 1) / BLOCK_SIZE_2, BLOCK_SIZE_2>>>(n, tIn_d, tOut_d);
		float *t = tIn_d;
		tIn_d = tOut_d;
		tOut_d = t;
	}
	copy<float>(variables, tIn_d, n);
	dealloc<float>(tIn_d);
	dealloc<float>(tOut_d);
}

/*
 * The same steps on the CPU
 */
static void reference(int n, float *u)
{
	float *old_u = (float *)malloc(n * sizeof(float));
	float *flux = (float *)malloc(n * sizeof(float));
	for (int step = 0; step < STEPS; step++) {
		for (int i = 0; i < n; i++) {
			old_u[i] = u[i];
			flux[i] = 0.5f * u[i] * u[i];
		}
		for (int i = 1; i < n; i++)
			u[i] = old_u[i] - DT_OVER_DX * (flux[i] - flux[i - 1]);
	}
	for (int s = 0; s < SWEEPS; s++) {
		for (int i = 0; i < n; i++)
			old_u[i] = u[i];
		for (int i = 1; i < n - 1; i++)
			u[i] = 0.25f * old_u[i - 1] + 0.5f * old_u[i] + 0.25f * old_u[i + 1];
	}
	free(old_u);
	free(flux);
}

int main(int argc, char *argv[])
{
	int n = arg_size(argc, argv, 1, N);
	float *h_variables = (float *)malloc(n * sizeof(float));
	float *h_result = (float *)malloc(n * sizeof(float));
	double t_start, t_end;

	bench_srand(11);
	for (int i = 0; i < n; i++)
		h_variables[i] = 1.0f + bench_randf();

	float *variables = alloc<float>(n);
	float *old_variables = alloc<float>(n);
	float *fluxes;
	fluxes = alloc<float>(n);
	upload<float>(variables, h_variables, n);

	t_start = rtclock();
	for (int step = 0; step < STEPS; step++) {
		copy<float>(old_variables, variables, n);
		compute_flux(n, variables, fluxes);
		time_step(n, old_variables, fluxes, variables);
	}
	smooth(n, variables);
	checkCudaErrors(cudaDeviceSynchronize());
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);
	download<float>(h_result, variables, n);

	t_start = rtclock();
	reference(n, h_variables);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	int fail = compareResults(h_variables, h_result, n, PERCENT_DIFF_ERROR_THRESHOLD);

	dealloc<float>(variables);
	dealloc<float>(old_variables);
	dealloc<float>(fluxes);
	free(h_variables);
	free(h_result);
	return fail > 0;
}
