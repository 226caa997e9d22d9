// main.cu: a matrix-vector product and a vector add whose kernels live in "kernels.cuh".
//
//   ./main [rows] [cols]        prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "cuda_runtime.h"
#include "kernels.cuh"

int main(int argc, char **argv)
{
    int rows = argc > 1 ? atoi(argv[1]) : 8192;
    int cols = argc > 2 ? atoi(argv[2]) : 4096;
    float *A = (float *)malloc(sizeof(float) * rows * cols);
    float *x = (float *)malloc(sizeof(float) * cols);
    float *w = (float *)malloc(sizeof(float) * rows);
    float *z = (float *)malloc(sizeof(float) * rows);
    for (int i = 0; i < rows * cols; i++)
        A[i] = (float)((i * 13) % 101) / 101.0f - 0.5f;
    for (int j = 0; j < cols; j++)
        x[j] = (float)(j % 17) / 17.0f;
    for (int i = 0; i < rows; i++)
        w[i] = (float)(i % 7);

    float *A_d, *x_d, *y_d, *w_d, *z_d;
    cudaMalloc((void **)&A_d, sizeof(float) * rows * cols);
    cudaMalloc((void **)&x_d, sizeof(float) * cols);
    cudaMalloc((void **)&y_d, sizeof(float) * rows);
    cudaMalloc((void **)&w_d, sizeof(float) * rows);
    cudaMalloc((void **)&z_d, sizeof(float) * rows);
    cudaMemcpy(A_d, A, sizeof(float) * rows * cols, cudaMemcpyHostToDevice);
    cudaMemcpy(x_d, x, sizeof(float) * cols, cudaMemcpyHostToDevice);
    cudaMemcpy(w_d, w, sizeof(float) * rows, cudaMemcpyHostToDevice);

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, 0);
    matvec<<<(rows + MV_BLOCK - 1) / MV_BLOCK, MV_BLOCK>>>(A_d, x_d, y_d, rows, cols);
    vec_add<<<(rows + 255) / 256, 256>>>(y_d, w_d, z_d, rows);
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(z, z_d, sizeof(float) * rows, cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < rows; i++) {
        double ref = w[i];
        for (int j = 0; j < cols; j++)
            ref += (double)A[i * cols + j] * x[j];
        if (fabs(z[i] - ref) > 1e-3 * (1.0 + fabs(ref)))
            fail++;
        checksum += z[i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(A_d); cudaFree(x_d); cudaFree(y_d); cudaFree(w_d); cudaFree(z_d);
    free(A); free(x); free(w); free(z);
    return fail > 0;
}
