/**
 * matrix_transpose.cu: out-of-place transpose of a height x width matrix, the way the CUDA samples'
 * naive version writes it: one thread per element of the output, 32x8 blocks, sizes as kernel parameters
 * read from argv.
 * ./matrix_transpose [height] [width]
 */

#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>

#include "common/bench_utils.c"

#ifndef HEIGHT
#define HEIGHT 4096
#endif
#ifndef WIDTH
#define WIDTH 2048
#endif

#define BLOCK_X 32
#define BLOCK_Y 8

/* odata (width x height) = idata^T; idata is height x width, row-major */
__global__ void transposeNaive(float *odata, float *idata, int width, int height)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	int col = blockIdx.y * blockDim.y + threadIdx.y;

	if (row < height && col < width) {
		odata[col * height + row] = idata[row * width + col];
	}
}

int main(int argc, char *argv[])
{
	int height = arg_size(argc, argv, 1, HEIGHT);
	int width = arg_size(argc, argv, 2, WIDTH);
	size_t bytes = sizeof(float) * (size_t)height * width;
	float *h_in = (float *)malloc(bytes);
	float *h_out = (float *)malloc(bytes);
	float *ref = (float *)malloc(bytes);
	double t_start, t_end;
	int i, j, fail;

	bench_srand(11);
	init_random_matrix(h_in, height, width);

	float *d_in, *d_out;
	cudaMalloc((void **)&d_in, bytes);
	cudaMalloc((void **)&d_out, bytes);
	cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice);

	dim3 block(BLOCK_X, BLOCK_Y);
	dim3 grid((height + BLOCK_X - 1) / BLOCK_X, (width + BLOCK_Y - 1) / BLOCK_Y);
	t_start = rtclock();
	transposeNaive<<<grid, block>>>(d_out, d_in, width, height);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);
	cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost);

	t_start = rtclock();
	for (i = 0; i < height; i++)
		for (j = 0; j < width; j++)
			ref[j * height + i] = h_in[i * width + j];
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(ref, h_out, height * width, PERCENT_DIFF_ERROR_THRESHOLD);
	printf("transpose %dx%d: %d mismatches\n", height, width, fail);

	cudaFree(d_in);
	cudaFree(d_out);
	free(h_in);
	free(h_out);
	free(ref);
	return fail > 0;
}
