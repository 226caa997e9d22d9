// constant_coeffs.cu: a 1-D filter of radius RADIUS whose weights live in a file-scope __constant__ array,
// set with cudaMemcpyToSymbol; taps that fall off either end of the signal are skipped. The kernel is
// declared before main and defined after it.
//
//   ./constant_coeffs [n]       prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "cuda.h"

#define RADIUS 4
#define TAPS (2 * RADIUS + 1)

__constant__ float c_weights[TAPS];

/* the kernel is defined after main, as in Rodinia's programs: a prototype here */
__global__ void filter1d(const float *in, float *out, int n);

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    float weights[TAPS];
    float total = 0.0f;
    for (int k = 0; k < TAPS; k++) {
        weights[k] = 1.0f / (1.0f + abs(k - RADIUS));
        total += weights[k];
    }
    for (int k = 0; k < TAPS; k++)
        weights[k] /= total;
    cudaMemcpyToSymbol(c_weights, weights, sizeof(weights));

    float *in = (float *)malloc(n * sizeof(float));
    float *out = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++)
        in[i] = (float)((i * 29) % 113) - 56.0f;
    float *d_in, *d_out;
    cudaMalloc((void **)&d_in, n * sizeof(float));
    cudaMalloc((void **)&d_out, n * sizeof(float));
    cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice);

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, 0);
    filter1d<<<(n + 255) / 256, 256>>>(d_in, d_out, n);
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; i++) {
        float sum = 0.0f;
        for (int k = -RADIUS; k <= RADIUS; k++)
            if (i + k >= 0 && i + k < n)
                sum += weights[k + RADIUS] * in[i + k];
        if (fabsf(out[i] - sum) > 1e-4f * (1.0f + fabsf(sum)))
            fail++;
        checksum += out[i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_in);
    cudaFree(d_out);
    free(in);
    free(out);
    return fail > 0;
}

__global__ void filter1d(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = -RADIUS; k <= RADIUS; k++) {
            int j = i + k;
            if (j >= 0 && j < n)
                sum += c_weights[k + RADIUS] * in[j];
        }
        out[i] = sum;
    }
}
