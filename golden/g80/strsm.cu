/* strsm.cu -- naive triangular solve L X = B (L: n x n lower-triangular, non-unit diagonal;
 * B, X: n x m, all row-major), then residual R = L X - B.
 * strsm: 1-D launch, one thread per column of B: x = col in 0..m-1.
 * residual: 2-D launch, one thread per element of R: x = col in 0..m-1, y = row in 0..n-1. */
#include "include/bench_util.h"

// gpgpu-opt: launch configuration of the optimized 'strsm': blocks of 256x1 threads,
// each covering 256x1 threads of the naive launch (one thread per output).
__attribute__((unused)) static dim3 strsm_block(dim3 /* naive_grid */, dim3 /* naive_block */)
{
    return dim3(256, 1);
}

__attribute__((unused)) static dim3 strsm_grid(dim3 naive_grid, dim3 naive_block)
{
    const unsigned int global_x = naive_grid.x * naive_block.x;
    const unsigned int global_y = naive_grid.y * naive_block.y;
    return dim3((global_x + 255) / 256, global_y);
}

// gpgpu_opt launch block(256, 1) grid((global_x + 255) / 256, global_y)
__global__ void strsm(const float *__restrict__ L, const float *__restrict__ B, float *__restrict__ X, int n,
                      int m) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    // merge: 16 blocks of 16x1 threads merged in x: they share tile_L, loaded once per merged block
    __shared__ float tile_L[256];
    for (int i = 0; i < n; i++) {
        float s;
        if (col < m)
            s = B[i * m + col];
        // coalesce: 'k' loop unrolled by 256 around the staged tiles (the last step may be partial)
        // prefetch: the first step's loads go to registers (L_next); each step stores them to its tiles and
        // loads the next step's while it computes
        float L_next;
        if (0 < i) {
            L_next = (blockIdx.x * 256 < m && threadIdx.x < i) ? L[i * n + threadIdx.x] : 0.0f;
        }
        for (int k0 = 0; k0 < i; k0 += 256) {
            // coalesce: stage L[i * n + k] in tile_L (256: L's segment in this step of 'k')
            tile_L[threadIdx.x] = L_next;
            __syncthreads();
            // prefetch: the next step's loads, in flight during this step's computation
            const int k0_next = k0 + 256;
            if (k0_next < i) {
                L_next = (blockIdx.x * 256 < m && k0_next + threadIdx.x < i)
                        ? L[i * n + k0_next + threadIdx.x] : 0.0f;
            }
            if (col < m) {
                for (int k = k0; k < k0 + 256 && k < i; k++) {
                    s -= tile_L[k - k0] * X[k * m + col];
                }
            }
            __syncthreads();
        }
        float L_val2;
        if (col < m) {
            L_val2 = L[i * n + i];
            X[i * m + col] = s / L_val2;
        }
    }
}

__global__ void residual(const float *__restrict__ L, const float *__restrict__ X, const float *__restrict__ B, float *__restrict__ R, int n, int m)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < m) {
        float sum = 0.0f;
        for (int k = 0; k <= row; k++)
            sum += L[row * n + k] * X[k * m + col];
        R[row * m + col] = sum - B[row * m + col];
    }
}

int main(int argc, char **argv)
{
    int n = arg_int(argc, argv, 1, 1024);   /* order of L */
    int m = arg_int(argc, argv, 2, 1024);   /* number of right-hand sides */
    size_t lcount = (size_t)n * n;
    size_t bcount = (size_t)n * m;

    float *hL = (float *)malloc(lcount * sizeof(float));
    float *hB = (float *)malloc(bcount * sizeof(float));
    float *hR = (float *)malloc(bcount * sizeof(float));
    if (!hL || !hB || !hR) {
        fprintf(stderr, "host allocation failed\n");
        return 1;
    }

    /* Well-conditioned lower-triangular L: random strictly-lower part in [-1,1),
     * zero upper part, diagonal n + [1,2) (strictly diagonally dominant). */
    fill_random(hL, lcount, -1.0f, 1.0f, 7);
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++)
            hL[(size_t)i * n + j] = 0.0f;
        hL[(size_t)i * n + i] = (float)n + 1.0f + hL[(size_t)i * n + i] * 0.5f + 0.5f;
    }
    fill_random(hB, bcount, -1.0f, 1.0f, 8);

    float *dL, *dB, *dX, *dR;
    CUDA_CHECK(cudaMalloc((void **)&dL, lcount * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&dB, bcount * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&dX, bcount * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&dR, bcount * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dL, hL, lcount * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dB, hB, bcount * sizeof(float), cudaMemcpyHostToDevice));

    int threads = 128;
    gpu_timer t;
    timer_start(&t);
    strsm<<<strsm_grid((m + threads - 1) / threads, threads), strsm_block((m + threads - 1) / threads, threads)>>>(dL, dB, dX, n, m);
    CUDA_CHECK_LAUNCH();
    float ms = timer_stop_ms(&t);

    dim3 block(16, 16);
    dim3 grid((m + 15) / 16, (n + 15) / 16);
    residual<<<grid, block>>>(dL, dX, dB, dR, n, m);
    CUDA_CHECK_LAUNCH();

    CUDA_CHECK(cudaMemcpy(hR, dR, bcount * sizeof(float), cudaMemcpyDeviceToHost));
    double maxres = 0.0;
    for (size_t i = 0; i < bcount; i++) {
        double a = fabs((double)hR[i]);
        if (a > maxres)
            maxres = a;
    }
    int ok = maxres < 1e-3;
    printf("strsm n=%d m=%d: %.3f ms, max |L X - B| = %g %s\n", n, m, ms, maxres,
           ok ? "PASSED" : "FAILED");

    CUDA_CHECK(cudaFree(dL));
    CUDA_CHECK(cudaFree(dB));
    CUDA_CHECK(cudaFree(dX));
    CUDA_CHECK(cudaFree(dR));
    free(hL);
    free(hB);
    free(hR);
    return ok ? 0 : 1;
}
