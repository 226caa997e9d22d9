#include <cstdio>
#include <cstdlib>
#include "saxpy_rows.cuh"

int main()
{
    const int n = 4096;
    const size_t bytes = (size_t)ROWS * n * sizeof(float);
    float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes);
    for (int i = 0; i < ROWS * n; i++) {
        x[i] = (float)(i % 7);
        y[i] = 1.0f;
    }
    float *d_x, *d_y;
    cudaMalloc(&d_x, bytes);
    cudaMalloc(&d_y, bytes);
    cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, y, bytes, cudaMemcpyHostToDevice);
    dim3 block(256, 1);
    dim3 grid((n + 255) / 256, ROWS);
    saxpy_rows<<<grid, block>>>(d_y, d_x, 2.0f, n);
    cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < ROWS * n; i++)
        wrong += y[i] != 2.0f * (float)(i % 7) + 1.0f;
    printf("%s (%d wrong)\n", wrong ? "FAILED" : "PASSED", wrong);
    cudaFree(d_x);
    cudaFree(d_y);
    free(x);
    free(y);
    return wrong != 0;
}
