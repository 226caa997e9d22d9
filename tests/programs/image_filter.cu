/**
 * image_filter.cu: 2-D image filter (correlation) with a KSIZE x KSIZE kernel, clamped borders
 *
 * The host pads the image by KSIZE/2 pixels on every side (edge pixels repeated), then one 2-D kernel
 * computes every output pixel from its KSIZE x KSIZE window of the padded image. Sizes are kernel
 * parameters (int width, int height); width and height come from argv: ./image_filter [width height]
 */

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda.h>

#include "common/bench_utils.c"

#define GPU_DEVICE 0

#ifndef WIDTH
#define WIDTH 2048
#endif
#ifndef HEIGHT
#define HEIGHT 2048
#endif
/* Filter size (odd) */
#ifndef KSIZE
#define KSIZE 7
#endif
#define RADIUS (KSIZE / 2)

#define BLOCK_X 32
#define BLOCK_Y 8

typedef float DATA_TYPE;

void make_filter(DATA_TYPE *weights)
{
	int i, j;
	DATA_TYPE total = 0;
	for (j = 0; j < KSIZE; j++)
		for (i = 0; i < KSIZE; i++)
		{
			weights[j * KSIZE + i] = (DATA_TYPE)((j + 1) * (KSIZE - i)) + 0.5f;
			total += weights[j * KSIZE + i];
		}
	for (j = 0; j < KSIZE * KSIZE; j++)
		weights[j] /= total;
}

void pad_image(int width, int height, DATA_TYPE *image, DATA_TYPE *padded)
{
	int x, y;
	int pw = width + 2 * RADIUS;
	for (y = 0; y < height + 2 * RADIUS; y++)
	{
		for (x = 0; x < pw; x++)
		{
			int sx = x - RADIUS, sy = y - RADIUS;
			sx = sx < 0 ? 0 : (sx >= width ? width - 1 : sx);
			sy = sy < 0 ? 0 : (sy >= height ? height - 1 : sy);
			padded[y * pw + x] = image[sy * width + sx];
		}
	}
}

void filter_cpu(int width, int height, DATA_TYPE *padded, DATA_TYPE *weights, DATA_TYPE *out)
{
	int x, y, i, j;
	int pw = width + 2 * RADIUS;
	for (y = 0; y < height; y++)
	{
		for (x = 0; x < width; x++)
		{
			DATA_TYPE acc = 0;
			for (j = 0; j < KSIZE; j++)
				for (i = 0; i < KSIZE; i++)
					acc += padded[(y + j) * pw + x + i] * weights[j * KSIZE + i];
			out[y * width + x] = acc;
		}
	}
}

__global__ void filter_kernel(DATA_TYPE *padded, DATA_TYPE *weights, DATA_TYPE *out, int width, int height)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	int pw = width + 2 * RADIUS;
	int i, j;

	if (x < width && y < height)
	{
		DATA_TYPE acc = 0;
		for (j = 0; j < KSIZE; j++)
		{
			for (i = 0; i < KSIZE; i++)
			{
				acc += padded[(y + j) * pw + x + i] * weights[j * KSIZE + i];
			}
		}
		out[y * width + x] = acc;
	}
}

void filter_cuda(int width, int height, DATA_TYPE *padded, DATA_TYPE *weights, DATA_TYPE *out_gpu)
{
	double t_start, t_end;
	int padded_size = (width + 2 * RADIUS) * (height + 2 * RADIUS);
	DATA_TYPE *padded_d;
	DATA_TYPE *weights_d;
	DATA_TYPE *out_d;

	cudaMalloc((void **)&padded_d, sizeof(DATA_TYPE) * padded_size);
	cudaMalloc((void **)&weights_d, sizeof(DATA_TYPE) * KSIZE * KSIZE);
	cudaMalloc((void **)&out_d, sizeof(DATA_TYPE) * width * height);
	cudaMemcpy(padded_d, padded, sizeof(DATA_TYPE) * padded_size, cudaMemcpyHostToDevice);
	cudaMemcpy(weights_d, weights, sizeof(DATA_TYPE) * KSIZE * KSIZE, cudaMemcpyHostToDevice);

	dim3 block(BLOCK_X, BLOCK_Y);
	dim3 grid((width + BLOCK_X - 1) / BLOCK_X, (height + BLOCK_Y - 1) / BLOCK_Y);

	t_start = rtclock();
	filter_kernel<<<grid, block>>>(padded_d, weights_d, out_d, width, height);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaMemcpy(out_gpu, out_d, sizeof(DATA_TYPE) * width * height, cudaMemcpyDeviceToHost);
	cudaFree(padded_d);
	cudaFree(weights_d);
	cudaFree(out_d);
}

int main(int argc, char *argv[])
{
	double t_start, t_end;
	int width = arg_size(argc, argv, 1, WIDTH);
	int height = arg_size(argc, argv, 2, HEIGHT);
	int padded_size = (width + 2 * RADIUS) * (height + 2 * RADIUS);
	int fail;

	DATA_TYPE *image = (DATA_TYPE *)malloc(width * height * sizeof(DATA_TYPE));
	DATA_TYPE *padded = (DATA_TYPE *)malloc(padded_size * sizeof(DATA_TYPE));
	DATA_TYPE *weights = (DATA_TYPE *)malloc(KSIZE * KSIZE * sizeof(DATA_TYPE));
	DATA_TYPE *out = (DATA_TYPE *)malloc(width * height * sizeof(DATA_TYPE));
	DATA_TYPE *out_gpu = (DATA_TYPE *)malloc(width * height * sizeof(DATA_TYPE));

	bench_srand(7);
	init_random(image, width * height, 0.0f, 255.0f);
	make_filter(weights);
	pad_image(width, height, image, padded);

	filter_cuda(width, height, padded, weights, out_gpu);

	t_start = rtclock();
	filter_cpu(width, height, padded, weights, out);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	fail = compareResults(out, out_gpu, width * height, PERCENT_DIFF_ERROR_THRESHOLD);

	free(image);
	free(padded);
	free(weights);
	free(out);
	free(out_gpu);
	return fail > 0;
}
