// mixed_good_bad.cu: a file with one kernel a source-to-source compiler is unlikely to read (inline PTX to get
// the lane id) next to a plain vector add. The add must still be optimizable; the PTX kernel must pass through.
//
//   ./mixed_good_bad [n]        prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <stdio.h>
#include <stdlib.h>

__global__ void lane_ids(int *lanes, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (i < n)
        lanes[i] = (int)lane;
}

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 24);
    float *a = (float *)malloc(n * sizeof(float));
    float *b = (float *)malloc(n * sizeof(float));
    float *c = (float *)malloc(n * sizeof(float));
    int *lanes = (int *)malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) {
        a[i] = (float)(i % 1000);
        b[i] = (float)(i % 3) * 0.5f;
    }
    float *d_a, *d_b, *d_c;
    int *d_lanes;
    cudaMalloc((void **)&d_a, n * sizeof(float));
    cudaMalloc((void **)&d_b, n * sizeof(float));
    cudaMalloc((void **)&d_c, n * sizeof(float));
    cudaMalloc((void **)&d_lanes, n * sizeof(int));
    cudaMemcpy(d_a, a, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, b, n * sizeof(float), cudaMemcpyHostToDevice);

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, 0);
    vadd<<<(n + 255) / 256, 256>>>(d_a, d_b, d_c, n);
    lane_ids<<<(n + 127) / 128, 128>>>(d_lanes, n);
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(c, d_c, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(lanes, d_lanes, n * sizeof(int), cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; i++) {
        if (c[i] != a[i] + b[i] || lanes[i] != i % 32)
            fail++;
        checksum += c[i] + lanes[i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_a); cudaFree(d_b); cudaFree(d_c); cudaFree(d_lanes);
    free(a); free(b); free(c); free(lanes);
    return fail > 0;
}
