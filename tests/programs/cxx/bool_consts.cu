// bool_consts.cu: two kernels that use what C's headers give device code: bool flags, M_PI from <math.h> and
// FLT_MAX from <float.h>. wave: a sine of each phase, optionally inverted; row_min: the smallest element of
// each row of a matrix (FLT_MAX as the empty minimum), one thread per row.
//
//   ./bool_consts [n]           prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <math.h>
#include <float.h>

#define COLS 64

__global__ void wave(float *out, const float *phase, int n, bool invert)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = sinf(2.0f * (float)M_PI * phase[i]);
        bool negative = v < 0.0f;
        if (invert)
            v = -v;
        out[i] = negative ? 0.5f * v : v;
    }
}

__global__ void row_min(const float *a, float *m, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float best = FLT_MAX;
        bool found = false;
        for (int j = 0; j < COLS; j++) {
            float v = a[r * COLS + j];
            if (v >= 0.0f && v < best) {
                best = v;
                found = true;
            }
        }
        m[r] = found ? best : -1.0f;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 22);
    int rows = n / COLS;
    float *phase = (float *)malloc(n * sizeof(float));
    float *out = (float *)malloc(n * sizeof(float));
    float *m = (float *)malloc(rows * sizeof(float));
    for (int i = 0; i < n; i++)
        phase[i] = (float)((i * 7) % 360) / 360.0f - ((i % 11) == 0 ? 2.0f : 0.0f);

    float *d_phase, *d_out, *d_m;
    cudaMalloc((void **)&d_phase, n * sizeof(float));
    cudaMalloc((void **)&d_out, n * sizeof(float));
    cudaMalloc((void **)&d_m, rows * sizeof(float));
    cudaMemcpy(d_phase, phase, n * sizeof(float), cudaMemcpyHostToDevice);

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, 0);
    wave<<<(n + 255) / 256, 256>>>(d_out, d_phase, n, true);
    row_min<<<(rows + 127) / 128, 128>>>(d_phase, d_m, rows);
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(m, d_m, rows * sizeof(float), cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; i++) {
        float v = sinf(2.0f * (float)M_PI * phase[i]);
        float expect = v < 0.0f ? 0.5f * -v : -v;
        if (fabsf(out[i] - expect) > 1e-4f)
            fail++;
        checksum += out[i];
    }
    for (int r = 0; r < rows; r++) {
        float best = FLT_MAX;
        bool found = false;
        for (int j = 0; j < COLS; j++)
            if (phase[r * COLS + j] >= 0.0f && phase[r * COLS + j] < best) {
                best = phase[r * COLS + j];
                found = true;
            }
        if (m[r] != (found ? best : -1.0f))
            fail++;
        checksum += m[r];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_phase); cudaFree(d_out); cudaFree(d_m);
    free(phase); free(out); free(m);
    return fail > 0;
}
