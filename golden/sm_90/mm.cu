/* mm.cu -- naive dense matrix multiply C = A * B (n x n, row-major), then C *= alpha.
 * mm: 2-D launch, one thread per C element: x = column (0..n-1), y = row (0..n-1),
 *     16x16 blocks, grid ((n+15)/16, (n+15)/16).  scale_matrix: 1-D, one thread per element. */
#include <cuda_pipeline.h>
#include "include/bench_util.h"

#define BLOCK_X 16
#define BLOCK_Y 16

// gpgpu-opt: launch configuration of the optimized 'mm': blocks of 16x16 threads,
// each covering 128x128 threads of the naive launch (64 outputs per thread).
__attribute__((unused)) static dim3 mm_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(16, 16);
}

__attribute__((unused)) static dim3 mm_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 127) / 128, (global_y + 127) / 128);
}

// gpgpu-opt: launch configuration of the optimized 'scale_matrix': blocks of 256x1 threads,
// each covering 1024x1 threads of the naive launch (4 outputs per thread).
__attribute__((unused)) static dim3 scale_matrix_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(256, 1);
}

__attribute__((unused)) static dim3 scale_matrix_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 1023) / 1024, global_y);
}

// gpgpu-opt: the optimized 'scale_matrix' gains only where the naive launch has at least 540672 threads
// (fewer leave the GPU part idle with its fewer, longer threads); smaller launches run 'scale_matrix_naive'.
__attribute__((unused)) static bool scale_matrix_gains(dim3 naive_grid, dim3 naive_block)
{
    const unsigned long long threads = (unsigned long long)naive_grid.x * naive_grid.y * naive_grid.z
                                       * naive_block.x * naive_block.y * naive_block.z;
    return threads >= 540672ull;
}

// gpgpu_opt launch block(16, 16) grid((global_x + 127) / 128, (global_y + 127) / 128)
__global__ __launch_bounds__(256, 2) void mm(const float *__restrict__ A, const float *__restrict__ B,
                                             float *__restrict__ C, int n) {
    // merge: 8x8 outputs per thread; per step of 'k' the block stages its operands in shared tiles, each
    // value then reused from registers
    __shared__ __align__(16) float tile_A[2][16][132];
    __shared__ __align__(16) float tile_B[2][16][128];
    float sum[8][8];
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        #pragma unroll
        for (int c = 0; c < 8; c++) {
            sum[r][c] = 0.0f;
        }
    }
    // prefetch: two stages of tile_A, tile_B, filled by asynchronous copies (cp.async) one step ahead of the
    // computation
    if (0 < n) {
        #pragma unroll
        for (int l = 0; l < 8; l++) {
            const int e = threadIdx.y * 16 + threadIdx.x + l * 256;
            const int load_row = blockIdx.y * 128 + e / 16;
            const int load_k = e % 16;
            const int in_range = load_row < n && load_k < n;
            __pipeline_memcpy_async(&tile_A[0][e % 16][e / 16], &A[in_range ? (load_row * n + load_k) : 0],
                                    sizeof(float), in_range ? 0 : (sizeof(float)));
        }
        #pragma unroll
        for (int l = 0; l < 8; l++) {
            const int e = threadIdx.y * 16 + threadIdx.x + l * 256;
            const int load_col = blockIdx.x * 128 + e % 128;
            const int load_k = e / 128;
            const int in_range = load_col < n && load_k < n;
            __pipeline_memcpy_async(&tile_B[0][e / 128][e % 128], &B[in_range ? (load_col + load_k * n) : 0],
                                    sizeof(float), in_range ? 0 : (sizeof(float)));
        }
    }
    __pipeline_commit();
    for (int k0 = 0, stage = 0; k0 < n; k0 += 16, stage ^= 1) {
        // prefetch: this step's copies have landed; past the barrier no thread still reads the other stage
        __pipeline_wait_prior(0);
        __syncthreads();
        // prefetch: the next step's tiles are copied into the other stage during this step's computation
        const int k0_next = k0 + 16;
        if (k0_next < n) {
            #pragma unroll
            for (int l = 0; l < 8; l++) {
                const int e = threadIdx.y * 16 + threadIdx.x + l * 256;
                const int load_row = blockIdx.y * 128 + e / 16;
                const int load_k = k0_next + e % 16;
                const int in_range = load_row < n && 0 < n && load_k < n;
                __pipeline_memcpy_async(&tile_A[stage ^ 1][e % 16][e / 16],
                                        &A[in_range ? (load_row * n + load_k) : 0], sizeof(float),
                                        in_range ? 0 : (sizeof(float)));
            }
            #pragma unroll
            for (int l = 0; l < 8; l++) {
                const int e = threadIdx.y * 16 + threadIdx.x + l * 256;
                const int load_col = blockIdx.x * 128 + e % 128;
                const int load_k = k0_next + e / 128;
                const int in_range = load_col < n && 0 < n && load_k < n;
                __pipeline_memcpy_async(&tile_B[stage ^ 1][e / 128][e % 128],
                                        &B[in_range ? (load_col + load_k * n) : 0], sizeof(float),
                                        in_range ? 0 : (sizeof(float)));
            }
        }
        __pipeline_commit();
        #pragma unroll
        for (int kk = 0; kk < 16; kk++) {
            if (k0 + kk >= n)
                break;
            float A_frag[8];
            #pragma unroll
            for (int r = 0; r < 8; r++)
                A_frag[r] = tile_A[stage][kk][r / 4 * 64 + threadIdx.y * 4 + r % 4];
            float B_frag[8];
            #pragma unroll
            for (int c = 0; c < 8; c++)
                B_frag[c] = tile_B[stage][kk][c / 4 * 64 + threadIdx.x * 4 + c % 4];
            #pragma unroll
            for (int r = 0; r < 8; r++) {
                #pragma unroll
                for (int c = 0; c < 8; c++) {
                    sum[r][c] += A_frag[r] * B_frag[c];
                }
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        #pragma unroll
        for (int c = 0; c < 8; c++) {
            int row = blockIdx.y * 128 + r / 4 * 64 + threadIdx.y * 4 + r % 4;
            int col = blockIdx.x * 128 + c / 4 * 64 + threadIdx.x * 4 + c % 4;
            if (row < n && col < n) {
                C[row * n + col] = sum[r][c];
            }
        }
    }
}

// gpgpu_opt launch block(256, 1) grid((global_x + 1023) / 1024, global_y)
__global__ void scale_matrix(float *__restrict__ C, float alpha, int count) {
    // vectorize: each thread handles 4 consecutive x, one 4-wide vector access per array; unaligned or ragged
    // groups take the scalar path
    int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < count) {
        if (i + 3 < count) {
            const float4 C_val = ((const float4 *) C)[i / 4];
            ((float4 *) C)[i / 4] = make_float4(alpha * C_val.x, alpha * C_val.y, alpha * C_val.z,
                                                alpha * C_val.w);
        } else {
            for (int k = 0; k < 4; k++) {
                if (i + k < count) {
                    const float C_val = C[i + k];
                    C[i + k] = alpha * C_val;
                }
            }
        }
    }
}

// gpgpu-opt: 'scale_matrix' as written, launched where the launch has fewer than 540672 threads (scale_matrix_gains)
__global__ void scale_matrix_naive(float *C, float alpha, int count)
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
    if (scale_matrix_gains(blocks, threads)) scale_matrix<<<scale_matrix_grid(blocks, threads), scale_matrix_block(blocks, threads)>>>(dC, alpha, (int)count); else scale_matrix_naive<<<blocks, threads>>>(dC, alpha, (int)count);
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
