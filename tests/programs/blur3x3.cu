/**
 * blur3x3.cu: 3x3 box blur of a w x h image (the border is copied unchanged)
 *
 * One 2-D kernel, one thread per pixel, guarded for the interior; the border
 * is copied by the host. Sizes are kernel parameters; ./blur3x3 [w h]
 */

#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>

#include "common/bench_utils.c"

#ifndef WIDTH
#define WIDTH 1024
#endif
#ifndef HEIGHT
#define HEIGHT 768
#endif

#define BLOCK_X 16
#define BLOCK_Y 16

__global__ void blur3x3(float *in, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;

	if (x >= 1 && x < w - 1 && y >= 1 && y < h - 1)
	{
		float sum = 0.0f;
		sum += in[(y - 1) * w + x - 1];
		sum += in[(y - 1) * w + x];
		sum += in[(y - 1) * w + x + 1];
		sum += in[y * w + x - 1];
		sum += in[y * w + x];
		sum += in[y * w + x + 1];
		sum += in[(y + 1) * w + x - 1];
		sum += in[(y + 1) * w + x];
		sum += in[(y + 1) * w + x + 1];
		out[y * w + x] = sum / 9.0f;
	}
}

void blur_cpu(float *in, float *out, int w, int h)
{
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			if (x < 1 || x >= w - 1 || y < 1 || y >= h - 1) {
				out[y * w + x] = in[y * w + x];
				continue;
			}
			float sum = 0.0f;
			for (int dy = -1; dy <= 1; dy++)
				for (int dx = -1; dx <= 1; dx++)
					sum += in[(y + dy) * w + x + dx];
			out[y * w + x] = sum / 9.0f;
		}
}

int main(int argc, char **argv)
{
	int w = arg_size(argc, argv, 1, WIDTH);
	int h = arg_size(argc, argv, 2, HEIGHT);
	size_t bytes = (size_t)w * h * sizeof(float);
	float *img = (float *)malloc(bytes);
	float *ref = (float *)malloc(bytes);
	float *res = (float *)malloc(bytes);
	double t_start, t_end;

	printf("blur3x3: %d x %d\n", w, h);
	init_random(img, w * h, 0.0f, 1.0f);

	float *d_in, *d_out;
	cudaMalloc((void **)&d_in, bytes);
	cudaMalloc((void **)&d_out, bytes);
	cudaMemcpy(d_in, img, bytes, cudaMemcpyHostToDevice);
	/* the border keeps the input's values */
	cudaMemcpy(d_out, img, bytes, cudaMemcpyHostToDevice);

	dim3 threads(BLOCK_X, BLOCK_Y);
	dim3 blocks((w + BLOCK_X - 1) / BLOCK_X, (h + BLOCK_Y - 1) / BLOCK_Y);
	t_start = rtclock();
	blur3x3<<<blocks, threads>>>(d_in, d_out, w, h);
	cudaDeviceSynchronize();
	t_end = rtclock();
	fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

	cudaMemcpy(res, d_out, bytes, cudaMemcpyDeviceToHost);

	t_start = rtclock();
	blur_cpu(img, ref, w, h);
	t_end = rtclock();
	fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);

	int fail = compareResults(ref, res, w * h, PERCENT_DIFF_ERROR_THRESHOLD);

	cudaFree(d_in);
	cudaFree(d_out);
	free(img);
	free(ref);
	free(res);
	return fail > 0;
}
