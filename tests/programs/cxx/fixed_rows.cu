// fixed_rows.cu: row sums and a scaled copy of a matrix whose row width is fixed in its type, as C numerical
// code ported to CUDA often keeps it (float a[][COLS]); the row count comes from the command line.
//
//   ./fixed_rows [rows]          prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define COLS 512

typedef float Row[COLS];

__global__ void row_sums(const float a[][COLS], float *sums, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float sum = 0.0f;
        for (int c = 0; c < COLS; c++)
            sum += a[r][c];
        sums[r] = sum;
    }
}

__global__ void scale_rows(const float a[][COLS], float (*b)[COLS], const float *weights, int rows)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (c < COLS && r < rows)
        b[r][c] = weights[r] * a[r][c];
}

int main(int argc, char **argv)
{
    int rows = argc > 1 ? atoi(argv[1]) : 16384;
    size_t bytes = (size_t)rows * sizeof(Row);
    float *host = (float *)malloc(bytes), *weights = (float *)malloc(rows * sizeof(float));
    for (size_t k = 0; k < (size_t)rows * COLS; k++)
        host[k] = (float)((k * 7) % 23) / 23.0f - 0.5f;
    for (int r = 0; r < rows; r++)
        weights[r] = 1.0f + (r % 5) * 0.25f;
    Row *a, *b;
    float *sums, *d_weights;
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    cudaMalloc(&sums, rows * sizeof(float));
    cudaMalloc(&d_weights, rows * sizeof(float));
    cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_weights, weights, rows * sizeof(float), cudaMemcpyHostToDevice);

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    row_sums<<<(rows + 127) / 128, 128>>>(a, sums, rows);
    dim3 block(32, 8);
    dim3 grid((COLS + 31) / 32, (rows + 7) / 8);
    scale_rows<<<grid, block>>>(a, b, d_weights, rows);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);

    float *got_sums = (float *)malloc(rows * sizeof(float)), *got = (float *)malloc(bytes);
    cudaMemcpy(got_sums, sums, rows * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(got, b, bytes, cudaMemcpyDeviceToHost);
    int fail = 0;
    double checksum = 0.0;
    for (int r = 0; r < rows; r++) {
        double expect = 0.0;
        for (int c = 0; c < COLS; c++) {
            size_t k = (size_t)r * COLS + c;
            expect += host[k];
            if (got[k] != weights[r] * host[k])
                fail++;
            checksum += got[k];
        }
        if (std::fabs(got_sums[r] - expect) > 1e-3 * (1.0 + std::fabs(expect)))
            fail++;
        checksum += got_sums[r];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(a);
    cudaFree(b);
    cudaFree(sums);
    cudaFree(d_weights);
    free(host);
    free(weights);
    free(got_sums);
    free(got);
    return fail > 0;
}
