/**
 * blur3x3.cu: 3x3 box blur of a w x h image (interior pixels; the border is copied)
 *
 * One thread per pixel, a 2-D launch of 32x8 blocks; sizes are kernel parameters,
 * W and H come from macros or argv: ./blur3x3 [w h]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#ifndef W
#define W 1024
#endif
#ifndef H
#define H 768
#endif

#define BLOCK_X 32
#define BLOCK_Y 8

void blur_cpu(int w, int h, const float *in, float *out)
{
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			if (x >= 1 && x < w - 1 && y >= 1 && y < h - 1) {
				float sum = 0.0f;
				for (int dy = -1; dy <= 1; dy++)
					for (int dx = -1; dx <= 1; dx++)
						sum += in[(y + dy) * w + (x + dx)];
				out[y * w + x] = sum / 9.0f;
			} else {
				out[y * w + x] = in[y * w + x];
			}
		}
}

__global__ void blur3x3(float *in, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;

	if (x >= 1 && x < w - 1 && y >= 1 && y < h - 1) {
		float sum = 0.0f;
		for (int dy = -1; dy <= 1; dy++)
			for (int dx = -1; dx <= 1; dx++)
				sum += in[(y + dy) * w + (x + dx)];
		out[y * w + x] = sum / 9.0f;
	}
}

int main(int argc, char **argv)
{
	int w = arg_size(argc, argv, 1, W);
	int h = arg_size(argc, argv, 2, H);
	size_t bytes = (size_t)w * h * sizeof(float);

	float *in = (float *)malloc(bytes);
	float *out = (float *)malloc(bytes);
	float *ref = (float *)malloc(bytes);
	for (int i = 0; i < w * h; i++)
		in[i] = (float)((i * 7) % 101) / 101.0f;

	float *d_in, *d_out;
	cudaMalloc(&d_in, bytes);
	cudaMalloc(&d_out, bytes);
	cudaMemcpy(d_in, in, bytes, cudaMemcpyHostToDevice);
	cudaMemcpy(d_out, in, bytes, cudaMemcpyHostToDevice);

	dim3 block(BLOCK_X, BLOCK_Y);
	dim3 grid((w + BLOCK_X - 1) / BLOCK_X, (h + BLOCK_Y - 1) / BLOCK_Y);
	blur3x3<<<grid, block>>>(d_in, d_out, w, h);
	cudaDeviceSynchronize();
	cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost);

	blur_cpu(w, h, in, ref);
	int fail = compareResults(ref, out, w * h, PERCENT_DIFF_ERROR_THRESHOLD);

	cudaFree(d_in);
	cudaFree(d_out);
	free(in);
	free(out);
	free(ref);
	return fail > 0;
}
