/* mm.cu -- naive dense matrix multiply C = A * B (n x n, row-major), then C *= alpha.
 * mm: 2-D launch, one thread per C element: x = column (0..n-1), y = row (0..n-1),
 *     16x16 blocks, grid ((n+15)/16, (n+15)/16).  scale_matrix: 1-D, one thread per element. */
#include "include/bench_util.h"

#define BLOCK_X 16
#define BLOCK_Y 16

// gpgpu-opt: launch configuration of the optimized 'mm': blocks of 256x1 threads,
// each covering 256x16 threads of the naive launch (16 outputs per thread).
__attribute__((unused)) static dim3 mm_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(256, 1);
}

__attribute__((unused)) static dim3 mm_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 255) / 256, (global_y + 15) / 16);
}

// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, (global_y + 15) / 16)
__global__ void mm(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int n) {
    // merge: each thread computes 16 outputs in y, 1 apart; B[k * n + col] read once for all of them
    int row = blockIdx.y * 16 + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    // merge: 16 blocks of 16x1 threads merged in x: they share tile_A, loaded once per merged block
    __shared__ float tile_A[16][256];
    float sum[16];
    #pragma unroll
    for (int r = 0; r < 16; r++)
        sum[r] = 0.0f;
    // coalesce: 'k' loop unrolled by 256 around the staged tiles (the last step may be partial)
    for (int k0 = 0; k0 < n; k0 += 256) {
        // coalesce: stage A[row * n + k] in tile_A (256: A's segment in this step of 'k')
        #pragma unroll
        for (int r = 0; r < 16; r++)
            tile_A[r][threadIdx.x] = (row + r < n && blockIdx.x * 256 < n && k0 + threadIdx.x < n)
                    ? A[(row + r) * n + k0 + threadIdx.x] : 0.0f;
        __syncthreads();
        if (row < n && col < n) {
            for (int k = k0; k < k0 + 256 && k < n; k++) {
                float A_val[16];
                #pragma unroll
                for (int r = 0; r < 16; r++)
                    if (row + r < n)
                        A_val[r] = tile_A[r][k - k0];
                const float B_val = B[k * n + col];
                #pragma unroll
                for (int r = 0; r < 16; r++)
                    if (row + r < n)
                        sum[r] += A_val[r] * B_val;
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int r = 0; r < 16; r++)
        if (row + r < n && col < n)
            C[(row + r) * n + col] = sum[r];
}

__global__ void scale_matrix(float *__restrict__ C, float alpha, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count)
        C[i] = alpha * C[i];
}

int main(int argc, char **argv)
{
    int n = arg_int(argc, argv, 1, 1024);
    float alpha = 0.5f;
    size_t count = (size_t)n * n;
    size_t bytes = count * sizeof(float);

    float *hA = (float *)malloc(bytes);
    float *hB = (float *)malloc(bytes);
    float *hC = (float *)malloc(bytes);
    if (!hA || !hB || !hC) {
        fprintf(stderr, "host allocation failed\n");
        return 1;
    }
    fill_random(hA, count, -1.0f, 1.0f, 1);
    fill_random(hB, count, -1.0f, 1.0f, 2);

    float *dA, *dB, *dC;
    CUDA_CHECK(cudaMalloc((void **)&dA, bytes));
    CUDA_CHECK(cudaMalloc((void **)&dB, bytes));
    CUDA_CHECK(cudaMalloc((void **)&dC, bytes));
    CUDA_CHECK(cudaMemcpy(dA, hA, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB, bytes, cudaMemcpyHostToDevice));

    dim3 block(BLOCK_X, BLOCK_Y);
    dim3 grid((n + BLOCK_X - 1) / BLOCK_X, (n + BLOCK_Y - 1) / BLOCK_Y);
    gpu_timer t;
    timer_start(&t);
    mm<<<mm_grid(grid, block), mm_block(grid, block)>>>(dA, dB, dC, n);
    CUDA_CHECK_LAUNCH();
    float ms = timer_stop_ms(&t);

    int threads = 256;
    int blocks = (int)((count + threads - 1) / threads);
    scale_matrix<<<blocks, threads>>>(dC, alpha, (int)count);
    CUDA_CHECK_LAUNCH();

    CUDA_CHECK(cudaMemcpy(hC, dC, bytes, cudaMemcpyDeviceToHost));

    /* Spot-check a few elements against a double-precision CPU reference. */
    int ok = 1;
    int probes[5][2] = {{0, 0}, {n - 1, n - 1}, {n / 2, n / 3}, {n / 3, n - 1}, {n - 1, 0}};
    for (int p = 0; p < 5; p++) {
        int r = probes[p][0], c = probes[p][1];
        double ref = 0.0;
        for (int k = 0; k < n; k++)
            ref += (double)hA[(size_t)r * n + k] * (double)hB[(size_t)k * n + c];
        ref *= alpha;
        ok &= check_close("C", (size_t)r * n + c, hC[(size_t)r * n + c], ref, 1e-3);
    }

    double gflops = 2.0 * n * (double)n * n / (ms * 1e6);
    printf("mm n=%d: %.3f ms (%.1f GFLOP/s) %s\n", n, ms, gflops, ok ? "PASSED" : "FAILED");

    CUDA_CHECK(cudaFree(dA));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dC));
    free(hA);
    free(hB);
    free(hC);
    return ok ? 0 : 1;
}
