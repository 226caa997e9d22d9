/**
 * bicg.cu: the BiCG sub kernel of BiCGStab
 *   s = A^T * r   (one thread per column j of A)
 *   q = A * p     (one thread per row i of A)
 *
 * Two 1-D kernels. Sizes are macros used inside the kernels (-DNX=... -DNY=...).
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Problem size */
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

void init_array(DATA_TYPE *A, DATA_TYPE *p, DATA_TYPE *r)
{
	int i, j;

	for (i = 0; i < NX; i++)
	{
		r[i] = i * 3.14159f / NX;
		for (j = 0; j < NY; j++)
			A[i * NY + j] = ((DATA_TYPE)((i * j) % 211)) / 211.0f;
	}

	for (i = 0; i < NY; i++)
		p[i] = i * 3.14159f / NY;
}

void bicg_cpu(DATA_TYPE *A, DATA_TYPE *r, DATA_TYPE *s, DATA_TYPE *p, DATA_TYPE *q)
{
	int i, j;

	for (i = 0; i < NY; i++)
		s[i] = 0.0f;

	for (i = 0; i < NX; i++)
	{
		q[i] = 0.0f;
		for (j = 0; j < NY; j++)
		{
			s[j] = s[j] + r[i] * A[i * NY + j];
			q[i] = q[i] + A[i * NY + j] * p[j];
		}
	}
}

/* s = A^T r: thread j walks down column j */
__global__ void bicg_kernel1(DATA_TYPE *A, DATA_TYPE *r, DATA_TYPE *s)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;

	if (j < NY)
	{
		s[j] = 0.0f;

		int i;
		for (i = 0; i < NX; i++)
		{
			s[j] += r[i] * A[i * NY + j];
		}
	}
}

/* q = A p: thread i walks along row i */
__global__ void bicg_kernel2(DATA_TYPE *A, DATA_TYPE *p, DATA_TYPE *q)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < NX)
	{
		q[i] = 0.0f;

		int j;
		for (j = 0; j < NY; j++)
		{
			q[i] += A[i * NY + j] * p[j];
		}
	}
}

void bicgCuda(DATA_TYPE *A, DATA_TYPE *r, DATA_TYPE *p, DATA_TYPE *s_outputFromGpu, DATA_TYPE *q_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *A_gpu;
	DATA_TYPE *q_gpu;
	DATA_TYPE *p_gpu;
	DATA_TYPE *r_gpu;
	DATA_TYPE *s_gpu;

	cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NX * NY);
	cudaMalloc((void **)&r_gpu, sizeof(DATA_TYPE) * NX);
	cudaMalloc((void **)&s_gpu, sizeof(DATA_TYPE) * NY);
	cudaMalloc((void **)&p_gpu, sizeof(DATA_TYPE) * NY);
	cudaMalloc((void **)&q_gpu, sizeof(DATA_TYPE) * NX);

	cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NX * NY, cudaMemcpyHostToDevice);
	cudaMemcpy(r_gpu, r, sizeof(DATA_TYPE) * NX, cudaMemcpyHostToDevice);
	cudaMemcpy(p_gpu, p, sizeof(DATA_TYPE) * NY, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid1((size_t)(ceil(((float)NY) / ((float)block.x))), 1);
	dim3 grid2((size_t)(ceil(((float)NX) / ((float)block.x))), 1);

	t_start = rtclock();
	bicg_kernel1<<<grid1, block>>>(A_gpu, r_gpu, s_gpu);
	cudaDeviceSynchronize();
	bicg_kernel2<<<grid2, block>>>(A_gpu, p_gpu, q_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(s_outputFromGpu, s_gpu, sizeof(DATA_TYPE) * NY, cudaMemcpyDeviceToHost);
	cudaMemcpy(q_outputFromGpu, q_gpu, sizeof(DATA_TYPE) * NX, cudaMemcpyDeviceToHost);

	cudaFree(A_gpu);
	cudaFree(r_gpu);
	cudaFree(s_gpu);
	cudaFree(p_gpu);
	cudaFree(q_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	DATA_TYPE *A;
	DATA_TYPE *r;
	DATA_TYPE *s;
	DATA_TYPE *p;
	DATA_TYPE *q;
	DATA_TYPE *s_outputFromGpu;
	DATA_TYPE *q_outputFromGpu;

	A = (DATA_TYPE *)malloc(NX * NY * sizeof(DATA_TYPE));
	r = (DATA_TYPE *)malloc(NX * sizeof(DATA_TYPE));
	s = (DATA_TYPE *)malloc(NY * sizeof(DATA_TYPE));
	p = (DATA_TYPE *)malloc(NY * sizeof(DATA_TYPE));
	q = (DATA_TYPE *)malloc(NX * sizeof(DATA_TYPE));
	s_outputFromGpu = (DATA_TYPE *)malloc(NY * sizeof(DATA_TYPE));
	q_outputFromGpu = (DATA_TYPE *)malloc(NX * sizeof(DATA_TYPE));

	init_array(A, p, r);

	cudaSetDevice(GPU_DEVICE);
	bicgCuda(A, r, p, s_outputFromGpu, q_outputFromGpu);

	t_start = rtclock();
	bicg_cpu(A, r, s, p, q);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(s, s_outputFromGpu, NY, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(q, q_outputFromGpu, NX, PERCENT_DIFF_ERROR_THRESHOLD);

	free(A);
	free(r);
	free(s);
	free(p);
	free(q);
	free(s_outputFromGpu);
	free(q_outputFromGpu);

	return fail > 0;
}
