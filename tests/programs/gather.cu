/**
 * gather.cu: indirect (data dependent) reads
 *   out[i][j]  = src[perm[i]][j] * w[i] + bias[j]       (2-D, row gather)
 *   score[i]   = sum_j out[i][j] * v[col[j]]             (1-D, gather inside the loop)
 *   y[k]       = x[idx[k]] + alpha * x[k]                (1-D, element gather)
 *
 * Sizes are kernel parameters (int ni, int nj, int len), set from the
 * NI/NJ/LEN macros or argv: ./gather [ni nj len]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

/* Default problem size */
#ifndef NI
#define NI 4096
#endif
#ifndef NJ
#define NJ 1024
#endif
#ifndef LEN
#define LEN (1 << 22)
#endif

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
#define DIM_THREAD_BLOCK_1D 256

typedef float DATA_TYPE;

void init_arrays(int ni, int nj, int len, DATA_TYPE *src, DATA_TYPE *w, DATA_TYPE *bias, DATA_TYPE *v,
		 int *perm, int *col, DATA_TYPE *x, int *idx)
{
	int k;

	bench_srand(19);
	init_random(src, ni * nj, 0.0f, 1.0f);
	init_random(w, ni, 0.5f, 1.5f);
	init_random(bias, nj, 0.0f, 0.25f);
	init_random(v, nj, 0.0f, 1.0f);
	init_permutation(perm, ni);
	init_permutation(col, nj);
	init_random(x, len, 1.0f, 2.0f);
	/* idx is not a permutation: repeated indices are allowed */
	for (k = 0; k < len; k++)
	{
		idx[k] = (int)(bench_randf() * len);
		if (idx[k] >= len)
			idx[k] = len - 1;
	}
}

void gather_cpu(int ni, int nj, int len, DATA_TYPE alpha, DATA_TYPE *src, DATA_TYPE *w, DATA_TYPE *bias, DATA_TYPE *v,
		int *perm, int *col, DATA_TYPE *out, DATA_TYPE *score, DATA_TYPE *x, int *idx, DATA_TYPE *y)
{
	int i, j, k;

	for (i = 0; i < ni; i++)
		for (j = 0; j < nj; j++)
			out[i * nj + j] = src[perm[i] * nj + j] * w[i] + bias[j];

	for (i = 0; i < ni; i++)
	{
		score[i] = 0.0f;
		for (j = 0; j < nj; j++)
			score[i] += out[i * nj + j] * v[col[j]];
	}

	for (k = 0; k < len; k++)
		y[k] = x[idx[k]] + alpha * x[k];
}

__global__ void gather_rows_kernel(int ni, int nj, DATA_TYPE *src, int *perm, DATA_TYPE *w, DATA_TYPE *bias, DATA_TYPE *out)
{
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y * blockDim.y + threadIdx.y;

	if ((i < ni) && (j < nj))
	{
		out[i * nj + j] = src[perm[i] * nj + j] * w[i] + bias[j];
	}
}

__global__ void score_kernel(int ni, int nj, DATA_TYPE *out, int *col, DATA_TYPE *v, DATA_TYPE *score)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < ni)
	{
		int j;
		score[i] = 0.0f;
		for (j = 0; j < nj; j++)
		{
			score[i] += out[i * nj + j] * v[col[j]];
		}
	}
}

__global__ void gather_elems_kernel(int len, DATA_TYPE alpha, DATA_TYPE *x, int *idx, DATA_TYPE *y)
{
	int k = blockIdx.x * blockDim.x + threadIdx.x;

	if (k < len)
	{
		y[k] = x[idx[k]] + alpha * x[k];
	}
}

void gatherCuda(int ni, int nj, int len, DATA_TYPE alpha, DATA_TYPE *src, DATA_TYPE *w, DATA_TYPE *bias, DATA_TYPE *v,
		int *perm, int *col, DATA_TYPE *x, int *idx,
		DATA_TYPE *out_outputFromGpu, DATA_TYPE *score_outputFromGpu, DATA_TYPE *y_outputFromGpu)
{
	double t_start, t_end;

	DATA_TYPE *src_gpu;
	DATA_TYPE *w_gpu;
	DATA_TYPE *bias_gpu;
	DATA_TYPE *v_gpu;
	DATA_TYPE *out_gpu;
	DATA_TYPE *score_gpu;
	DATA_TYPE *x_gpu;
	DATA_TYPE *y_gpu;
	int *perm_gpu;
	int *col_gpu;
	int *idx_gpu;

	cudaMalloc((void **)&src_gpu, sizeof(DATA_TYPE) * ni * nj);
	cudaMalloc((void **)&w_gpu, sizeof(DATA_TYPE) * ni);
	cudaMalloc((void **)&bias_gpu, sizeof(DATA_TYPE) * nj);
	cudaMalloc((void **)&v_gpu, sizeof(DATA_TYPE) * nj);
	cudaMalloc((void **)&out_gpu, sizeof(DATA_TYPE) * ni * nj);
	cudaMalloc((void **)&score_gpu, sizeof(DATA_TYPE) * ni);
	cudaMalloc((void **)&x_gpu, sizeof(DATA_TYPE) * len);
	cudaMalloc((void **)&y_gpu, sizeof(DATA_TYPE) * len);
	cudaMalloc((void **)&perm_gpu, sizeof(int) * ni);
	cudaMalloc((void **)&col_gpu, sizeof(int) * nj);
	cudaMalloc((void **)&idx_gpu, sizeof(int) * len);

	cudaMemcpy(src_gpu, src, sizeof(DATA_TYPE) * ni * nj, cudaMemcpyHostToDevice);
	cudaMemcpy(w_gpu, w, sizeof(DATA_TYPE) * ni, cudaMemcpyHostToDevice);
	cudaMemcpy(bias_gpu, bias, sizeof(DATA_TYPE) * nj, cudaMemcpyHostToDevice);
	cudaMemcpy(v_gpu, v, sizeof(DATA_TYPE) * nj, cudaMemcpyHostToDevice);
	cudaMemcpy(x_gpu, x, sizeof(DATA_TYPE) * len, cudaMemcpyHostToDevice);
	cudaMemcpy(perm_gpu, perm, sizeof(int) * ni, cudaMemcpyHostToDevice);
	cudaMemcpy(col_gpu, col, sizeof(int) * nj, cudaMemcpyHostToDevice);
	cudaMemcpy(idx_gpu, idx, sizeof(int) * len, cudaMemcpyHostToDevice);

	dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
	dim3 grid((size_t)(ceil(((float)nj) / ((float)block.x))), (size_t)(ceil(((float)ni) / ((float)block.y))));
	dim3 block1(DIM_THREAD_BLOCK_1D);
	dim3 grid1((size_t)(ceil(((float)ni) / ((float)block1.x))));
	dim3 grid2((size_t)(ceil(((float)len) / ((float)block1.x))));

	t_start = rtclock();
	gather_rows_kernel<<<grid, block>>>(ni, nj, src_gpu, perm_gpu, w_gpu, bias_gpu, out_gpu);
	cudaDeviceSynchronize();
	score_kernel<<<grid1, block1>>>(ni, nj, out_gpu, col_gpu, v_gpu, score_gpu);
	cudaDeviceSynchronize();
	gather_elems_kernel<<<grid2, block1>>>(len, alpha, x_gpu, idx_gpu, y_gpu);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaError_t err = cudaGetLastError();
	if (err != cudaSuccess)
		fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));

	cudaMemcpy(out_outputFromGpu, out_gpu, sizeof(DATA_TYPE) * ni * nj, cudaMemcpyDeviceToHost);
	cudaMemcpy(score_outputFromGpu, score_gpu, sizeof(DATA_TYPE) * ni, cudaMemcpyDeviceToHost);
	cudaMemcpy(y_outputFromGpu, y_gpu, sizeof(DATA_TYPE) * len, cudaMemcpyDeviceToHost);

	cudaFree(src_gpu);
	cudaFree(w_gpu);
	cudaFree(bias_gpu);
	cudaFree(v_gpu);
	cudaFree(out_gpu);
	cudaFree(score_gpu);
	cudaFree(x_gpu);
	cudaFree(y_gpu);
	cudaFree(perm_gpu);
	cudaFree(col_gpu);
	cudaFree(idx_gpu);
}

int main(int argc, char **argv)
{
	double t_start, t_end;
	int fail;

	int ni = arg_size(argc, argv, 1, NI);
	int nj = arg_size(argc, argv, 2, NJ);
	int len = arg_size(argc, argv, 3, LEN);
	DATA_TYPE alpha = 0.5f;

	DATA_TYPE *src = (DATA_TYPE *)malloc(ni * nj * sizeof(DATA_TYPE));
	DATA_TYPE *w = (DATA_TYPE *)malloc(ni * sizeof(DATA_TYPE));
	DATA_TYPE *bias = (DATA_TYPE *)malloc(nj * sizeof(DATA_TYPE));
	DATA_TYPE *v = (DATA_TYPE *)malloc(nj * sizeof(DATA_TYPE));
	DATA_TYPE *out = (DATA_TYPE *)malloc(ni * nj * sizeof(DATA_TYPE));
	DATA_TYPE *score = (DATA_TYPE *)malloc(ni * sizeof(DATA_TYPE));
	DATA_TYPE *x = (DATA_TYPE *)malloc(len * sizeof(DATA_TYPE));
	DATA_TYPE *y = (DATA_TYPE *)malloc(len * sizeof(DATA_TYPE));
	int *perm = (int *)malloc(ni * sizeof(int));
	int *col = (int *)malloc(nj * sizeof(int));
	int *idx = (int *)malloc(len * sizeof(int));
	DATA_TYPE *out_outputFromGpu = (DATA_TYPE *)malloc(ni * nj * sizeof(DATA_TYPE));
	DATA_TYPE *score_outputFromGpu = (DATA_TYPE *)malloc(ni * sizeof(DATA_TYPE));
	DATA_TYPE *y_outputFromGpu = (DATA_TYPE *)malloc(len * sizeof(DATA_TYPE));

	printf("gather: ni=%d nj=%d len=%d\n", ni, nj, len);
	init_arrays(ni, nj, len, src, w, bias, v, perm, col, x, idx);

	cudaSetDevice(GPU_DEVICE);
	gatherCuda(ni, nj, len, alpha, src, w, bias, v, perm, col, x, idx, out_outputFromGpu, score_outputFromGpu, y_outputFromGpu);

	t_start = rtclock();
	gather_cpu(ni, nj, len, alpha, src, w, bias, v, perm, col, out, score, x, idx, y);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(out, out_outputFromGpu, ni * nj, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(score, score_outputFromGpu, ni, PERCENT_DIFF_ERROR_THRESHOLD);
	fail += compareResults(y, y_outputFromGpu, len, PERCENT_DIFF_ERROR_THRESHOLD);

	free(src);
	free(w);
	free(bias);
	free(v);
	free(out);
	free(score);
	free(x);
	free(y);
	free(perm);
	free(col);
	free(idx);
	free(out_outputFromGpu);
	free(score_outputFromGpu);
	free(y_outputFromGpu);

	return fail > 0;
}
