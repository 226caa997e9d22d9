/**
 * 2mm.cu: two matrix multiplications.
 *   tmp = alpha * A * B          (ni x nj)
 *   D   = beta * D + tmp * C     (ni x nl)
 *
 * Sizes are kernel parameters (int ni, int nj, int nk, int nl) set on the host
 * from the NI/NJ/NK/NL macros or from argv: ./2mm [ni nj nk nl]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef NI
#define NI 1024
#endif
#ifndef NJ
#define NJ 1024
#endif
#ifndef NK
#define NK 1024
#endif
#ifndef NL
#define NL 1024
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

typedef float DATA_TYPE;

void init_array(int ni, int nj, int nk, int nl, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *D)
{
	int i, j;

	for (i = 0; i < ni; i++)
		for (j = 0; j < nk; j++)
			A[i * nk + j] = ((DATA_TYPE)((i * j) % 97)) / 97.0f;

	for (i = 0; i < nk; i++)
		for (j = 0; j < nj; j++)
			B[i * nj + j] = ((DATA_TYPE)((i * (j + 1)) % 89)) / 89.0f;

	for (i = 0; i < nj; i++)
		for (j = 0; j < nl; j++)
			C[i * nl + j] = ((DATA_TYPE)((i * (j + 3)) % 83)) / 83.0f;

	for (i = 0; i < ni; i++)
		for (j = 0; j < nl; j++)
			D[i * nl + j] = ((DATA_TYPE)((i * (j + 2)) % 79)) / 79.0f;
}

void mm2_cpu(int ni, int nj, int nk, int nl, DATA_TYPE alpha, DATA_TYPE beta,
	     DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *D, DATA_TYPE *tmp)
{
	int i, j, k;

	for (i = 0; i < ni; i++)
	{
		for (j = 0; j < nj; j++)
			tmp[i * nj + j] = 0;
		for (k = 0; k < nk; k++)
			for (j = 0; j < nj; j++)
				tmp[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j];
	}

	for (i = 0; i < ni; i++)
	{
		for (j = 0; j < nl; j++)
			D[i * nl + j] *= beta;
		for (k = 0; k < nj; k++)
			for (j = 0; j < nl; j++)
				D[i * nl + j] += tmp[i * nj + k] * C[k * nl + j];
	}
}

__global__ void mm2_kernel1(int ni, int nj, int nk, DATA_TYPE alpha, DATA_TYPE *tmp, DATA_TYPE *A, DATA_TYPE *B)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < ni) && (j < nj))
	{
		tmp[i * nj + j] = 0;
		int k;
		for (k = 0; k < nk; k++)
		{
			tmp[i * nj + j] += alpha * A[i * nk + k] * B[k * nj + j];
		}
	}
}

__global__ void mm2_kernel2(int ni, int nj, int nl, DATA_TYPE beta, DATA_TYPE *tmp, DATA_TYPE *C, DATA_TYPE *D)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < ni) && (j < nl))
	{
		D[i * nl + j] *= beta;
		int k;
		for (k = 0; k < nj; k++)
		{
			D[i * nl + j] += tmp[i * nj + k] * C[k * nl + j];
		}
	}
}

void mm2Cuda(int ni, int nj, int nk, int nl, DATA_TYPE alpha, DATA_TYPE beta,
	     DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *D, DATA_TYPE *D_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *tmp_gpu;
	DATA_TYPE *A_gpu;
	DATA_TYPE *B_gpu;
	DATA_TYPE *C_gpu;
	DATA_TYPE *D_gpu;

	cudaMalloc((void **)&tmp_gpu, sizeof(DATA_TYPE) * ni * nj);
	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * ni * nk);
	cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * nk * nj);
	cudaMalloc((void **)&C_gpu, sizeof(DATA_TYPE) * nj * nl);
	cudaMalloc((void **)&D_gpu, sizeof(DATA_TYPE) * ni * nl);

	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * ni * nk, cudaMemcpyHostToDevice);
	cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * nk * nj, cudaMemcpyHostToDevice);
	cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * nj * nl, cudaMemcpyHostToDevice);
	cudaMemcpy(D_gpu, D, sizeof(DATA_TYPE) * ni * nl, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid1((size_t)(ceil(((float)nj) / ((float)block.x))), (size_t)(ceil(((float)ni) / ((float)block.y))));
	dim3 grid2((size_t)(ceil(((float)nl) / ((float)block.x))), (size_t)(ceil(((float)ni) / ((float)block.y))));

	t_start = rtclock();
	mm2_kernel1<<<grid1, block>>>(ni, nj, nk, alpha, tmp_gpu, A_gpu, B_gpu);
	cudaDeviceSynchronize();
	mm2_kernel2<<<grid2, block>>>(ni, nj, nl, beta, tmp_gpu, C_gpu, D_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(D_outputFromGpu, D_gpu, sizeof(DATA_TYPE) * ni * nl, cudaMemcpyDeviceToHost);

	cudaFree(tmp_gpu);
	cudaFree(A_gpu);
	cudaFree(B_gpu);
	cudaFree(C_gpu);
	cudaFree(D_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int ni = arg_size(argc, argv, 1, NI);
	int nj = arg_size(argc, argv, 2, NJ);
	int nk = arg_size(argc, argv, 3, NK);
	int nl = arg_size(argc, argv, 4, NL);
	DATA_TYPE alpha = 1.25f;
	DATA_TYPE beta = 0.75f;

	DATA_TYPE *tmp;
	DATA_TYPE *A;
	DATA_TYPE *B;
	DATA_TYPE *C;
	DATA_TYPE *D;
	DATA_TYPE *D_outputFromGpu;

	tmp = (DATA_TYPE *)malloc(ni * nj * sizeof(DATA_TYPE));
	A = (DATA_TYPE *)malloc(ni * nk * sizeof(DATA_TYPE));
	B = (DATA_TYPE *)malloc(nk * nj * sizeof(DATA_TYPE));
	C = (DATA_TYPE *)malloc(nj * nl * sizeof(DATA_TYPE));
	D = (DATA_TYPE *)malloc(ni * nl * sizeof(DATA_TYPE));
	D_outputFromGpu = (DATA_TYPE *)malloc(ni * nl * sizeof(DATA_TYPE));

	printf("2mm: ni=%d nj=%d nk=%d nl=%d\n", ni, nj, nk, nl);
	init_array(ni, nj, nk, nl, A, B, C, D);

	cudaSetDevice(GPU_DEVICE);
	mm2Cuda(ni, nj, nk, nl, alpha, beta, A, B, C, D, D_outputFromGpu);

	t_start = rtclock();
	mm2_cpu(ni, nj, nk, nl, alpha, beta, A, B, C, D, tmp);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(D, D_outputFromGpu, ni * nl, PERCENT_DIFF_ERROR_THRESHOLD);

	free(tmp);
	free(A);
	free(B);
	free(C);
	free(D);
	free(D_outputFromGpu);

	return fail > 0;
}
